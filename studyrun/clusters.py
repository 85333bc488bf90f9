"""HPC batch systems as `execution.scheduler: {cluster: slurm, ...}`, through dask-jobqueue.

Execute step. A cluster block says what one batch job asks for (cores, memory, walltime, queue,
account, extra directives, shell lines to run first) and how many jobs to keep: a fixed number
(`jobs`) or an adaptive range (`minimum_jobs` .. `maximum_jobs`). Each job starts `processes`
single-threaded Dask workers (one per core by default), which connect back to a scheduler that
studyrun starts in the driver. dask-jobqueue is an optional extra (`pip install
'studyrun[jobqueue]'`), imported only when a cluster is started or its job script is shown.
"""

from __future__ import annotations

import re
import sys
from typing import Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    NonNegativeInt,
    PositiveInt,
    field_validator,
    model_validator,
)

from .core.errors import ExecutionError

CLASSES = {"slurm": "SLURMCluster", "pbs": "PBSCluster", "sge": "SGECluster",
           "lsf": "LSFCluster", "htcondor": "HTCondorCluster"}
KINDS = tuple(CLASSES)
_WALLTIME = re.compile(r"^(\d+-)?\d+(:\d{1,2}){0,2}$")
_PLACEHOLDER_ADDRESS = "tcp://SCHEDULER-ADDRESS:8786"


class Cluster(BaseModel):
    """One batch system's jobs, each running Dask workers for this study."""

    model_config = ConfigDict(extra="forbid")

    cluster: Literal["slurm", "pbs", "sge", "lsf", "htcondor"] = Field(
        description="the batch system: slurm | pbs | sge | lsf | htcondor")
    cores: PositiveInt = Field(1, description="cores per job")
    processes: PositiveInt | None = Field(
        None, description="worker processes per job (default: one single-threaded worker per core)")
    memory: str = Field("4GB", description="memory per job, e.g. 16GB or 64GiB")
    walltime: str | None = Field(None, description="time limit per job, e.g. '02:00:00' "
                                 "(dask-jobqueue's default when absent; not for htcondor)")
    queue: str | None = Field(None, min_length=1, description="queue (partition on SLURM)")
    account: str | None = Field(None, min_length=1, description="account or project to charge")
    jobs: PositiveInt = Field(1, description="number of jobs to keep running")
    minimum_jobs: NonNegativeInt | None = Field(
        None, description="adaptive scaling: fewest jobs (with maximum_jobs)")
    maximum_jobs: PositiveInt | None = Field(
        None, description="adaptive scaling: most jobs; jobs are added while runs wait")
    job_extra: list[str] = Field(default_factory=list, description="extra directives, e.g. "
                                 "['--exclusive'] on SLURM, ['key = value'] on htcondor")
    prologue: list[str] = Field(default_factory=list, description="shell lines run in each job "
                                "before the workers start, e.g. 'module load python'")
    interface: str | None = Field(None, min_length=1, description="network interface of "
                                  "workers and scheduler, e.g. ib0")
    local_directory: str | None = Field(None, min_length=1,
                                        description="workers' scratch folder on the node")
    log_directory: str | None = Field(None, min_length=1,
                                      description="folder for the jobs' output files")
    python: str | None = Field(None, min_length=1,
                               description="python on the nodes (default: this one)")
    disk: str | None = Field(None, description="htcondor only: disk per job (default 1GB)")

    @field_validator("queue", "account", "job_extra", "prologue", "interface", "local_directory",
                     "log_directory", "python")
    @classmethod
    def _one_line_each(cls, value):
        """Each value is one line of the job script: a line break would smuggle in another."""
        for line in value if isinstance(value, list) else [value]:
            if isinstance(line, str) and any(c in line for c in "\r\n\x00\x0b\x0c\u2028\u2029"):
                raise ValueError(f"must be a single line (each is one line of the job script); "
                                 f"got {line!r}")
        return value

    @field_validator("memory", "disk")
    @classmethod
    def _size(cls, value):
        if value is not None:
            from .core.sizes import parse_bytes

            try:
                parse_bytes(value)
            except OverflowError:
                raise ValueError(f"not a memory size: {value!r} is too large") from None
        return value

    @field_validator("walltime", mode="before")
    @classmethod
    def _walltime_seconds(cls, value):
        """YAML reads an unquoted 02:00:00 as 7200 (base 60): take a whole number as seconds."""
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return f"{value // 3600:02d}:{value // 60 % 60:02d}:{value % 60:02d}"
        return value

    @field_validator("walltime")
    @classmethod
    def _walltime(cls, value):
        if value is not None and not _WALLTIME.match(value):
            raise ValueError(f"expected HH:MM:SS (or D-HH:MM:SS); got {value!r}")
        return value

    @model_validator(mode="after")
    def _consistent(self):
        if self.processes is not None and self.processes > self.cores:
            raise ValueError(f"processes ({self.processes}) cannot exceed cores ({self.cores}): "
                             "each worker process needs a core")
        if self.minimum_jobs is not None and self.maximum_jobs is None:
            raise ValueError("minimum_jobs needs maximum_jobs too (adaptive scaling between them)")
        if self.maximum_jobs is not None:
            if "jobs" in self.model_fields_set:
                raise ValueError("give either jobs (a fixed number) or minimum_jobs/maximum_jobs "
                                 "(adaptive), not both")
            if (self.minimum_jobs or 0) > self.maximum_jobs:
                raise ValueError(f"minimum_jobs ({self.minimum_jobs}) exceeds maximum_jobs "
                                 f"({self.maximum_jobs})")
        if self.cluster == "htcondor":
            given = [k for k in ("walltime", "queue", "account") if getattr(self, k) is not None]
            if given:
                raise ValueError(f"htcondor has no {given[0]}; write it as a submit-file line in "
                                 "job_extra instead")
            if any("=" not in line for line in self.job_extra):
                raise ValueError("htcondor's job_extra lines are submit-file commands "
                                 "'key = value', e.g. 'requirements = (OpSysMajorVer == 9)'")
        elif self.disk is not None:
            raise ValueError("disk is for htcondor only")
        return self

    @property
    def workers_per_job(self) -> int:
        return self.processes or self.cores

    @property
    def most_workers(self) -> int:
        """Workers when every job runs: for sizing batches before any has started."""
        return self.workers_per_job * (self.maximum_jobs or self.jobs)

    def describe(self) -> str:
        jobs = (f"{self.minimum_jobs or 0}..{self.maximum_jobs} jobs (adaptive)"
                if self.maximum_jobs else f"{self.jobs} job{'s' * (self.jobs > 1)}")
        return (f"{self.cluster} cluster, {jobs} of {self.cores} cores and {self.memory}, "
                f"{self.workers_per_job} worker{'s' * (self.workers_per_job > 1)} per job")


def job_keywords(spec: Cluster) -> dict:
    """dask-jobqueue's keyword arguments for the job each submission runs."""
    keywords = dict(cores=spec.cores, memory=spec.memory, processes=spec.workers_per_job,
                    job_name="studyrun", interface=spec.interface,
                    local_directory=spec.local_directory, log_directory=spec.log_directory,
                    python=spec.python or sys.executable,
                    job_extra_directives=list(spec.job_extra),
                    job_script_prologue=list(spec.prologue))
    if spec.walltime is not None:
        keywords["walltime"] = walltime_for(spec.cluster, spec.walltime)
    if spec.queue is not None:
        keywords["queue"] = spec.queue
    if spec.account is not None:
        keywords["account" if spec.cluster in ("slurm", "pbs") else "project"] = spec.account
    if spec.cluster == "htcondor":
        keywords["disk"] = spec.disk or "1GB"
        pairs = (line.split("=", 1) for line in spec.job_extra)
        keywords["job_extra_directives"] = {k.strip(): v.strip() for k, v in pairs}
    return {k: v for k, v in keywords.items() if v is not None}


def walltime_for(kind: str, text: str) -> str:
    """The walltime as the batch system writes it: D-HH:MM:SS on SLURM, HH:MM on LSF (minutes
    rounded up), HH:MM:SS elsewhere (hours past 24 allowed)."""
    if kind == "slurm":
        return text
    days, _, clock = text.rpartition("-")
    parts = [int(p) for p in clock.split(":")]
    parts = [0] * (3 - len(parts)) + parts if len(parts) > 1 else [0, parts[0], 0]
    seconds = int(days or 0) * 86400 + parts[0] * 3600 + parts[1] * 60 + parts[2]
    if kind == "lsf":
        minutes = -(-seconds // 60)
        return f"{minutes // 60:02d}:{minutes % 60:02d}"
    return f"{seconds // 3600:02d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


def cluster_class(kind: str):
    """dask-jobqueue's cluster class for a batch system, or a clear error when it is missing."""
    try:
        import dask_jobqueue
    except ImportError:
        raise ExecutionError("a cluster block needs dask-jobqueue: pip install "
                             "'studyrun[jobqueue]' (or pip install dask-jobqueue)") from None
    return getattr(dask_jobqueue, CLASSES[kind])


def job_script(spec: Cluster) -> str:
    """The script each job would be submitted with; the scheduler's address is a placeholder,
    since studyrun starts the scheduler when the study runs. Needs no batch system."""
    job_class = cluster_class(spec.cluster).job_cls
    keywords = job_keywords(spec)
    name = keywords.pop("job_name")
    return job_class(scheduler=_PLACEHOLDER_ADDRESS, name=name, job_name=name,
                     **keywords).job_script()


def start_cluster(spec: Cluster):
    """A running dask-jobqueue cluster for `spec`, scaled or adaptive, and a client of it."""
    from distributed import Client

    keywords = job_keywords(spec)
    options = {"dashboard_address": ":0"}
    try:
        cluster = cluster_class(spec.cluster)(scheduler_options=options, **keywords)
    except ExecutionError:
        raise
    except Exception as error:  # dask-jobqueue reports bad options and missing programs this way
        raise ExecutionError(f"cannot start the {spec.cluster} cluster: {type(error).__name__}: "
                             f"{error}") from None
    try:
        # adaptive even for a fixed count (minimum = maximum): a job that ends early (walltime,
        # a node lost, qdel) is then replaced once Dask declares its workers lost
        # (distributed.deploy.lost-worker-timeout, 15 s), where a fixed scale would wait forever
        if spec.maximum_jobs is not None:
            cluster.adapt(minimum_jobs=spec.minimum_jobs or 0, maximum_jobs=spec.maximum_jobs)
        else:
            cluster.adapt(minimum_jobs=spec.jobs, maximum_jobs=spec.jobs)
        client = Client(cluster)
    except Exception as error:
        cluster.close()
        raise ExecutionError(f"cannot submit jobs to the {spec.cluster} cluster: "
                             f"{type(error).__name__}: {error}") from None
    return client, cluster


def with_kind(scheduler, kind: str) -> Cluster:
    """`--cluster KIND`: the study's cluster block on another batch system, or a default one."""
    if isinstance(scheduler, Cluster):
        data = scheduler.model_dump(exclude_unset=True)
        if kind == "htcondor":
            for key in ("walltime", "queue", "account"):
                data.pop(key, None)
        elif scheduler.cluster == "htcondor":
            data.pop("disk", None)
        return Cluster(**{**data, "cluster": kind})
    return Cluster(cluster=kind)
