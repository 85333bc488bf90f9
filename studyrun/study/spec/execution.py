"""The `execution:` block: scheduler (a name, an address or a batch-system cluster), workers,
batch size, retries, failures, what to keep, and the files runs depend on.

Validation only: starting executors is the execute step's (execution/executors.py, execution/clusters.py), and
nothing here imports Dask.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal, Union, get_args

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    NonNegativeInt,
    PositiveInt,
    Tag,
    field_validator,
    model_validator,
)

ClusterKind = Literal["slurm", "pbs", "sge", "lsf", "htcondor"]
KINDS = get_args(ClusterKind)
_WALLTIME = re.compile(r"^(\d+-)?\d+(:\d{1,2}){0,2}$")


class Cluster(BaseModel):
    """One batch system's jobs, each running Dask workers for this study."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    cluster: ClusterKind = Field(
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
            from studyrun.core.sizes import parse_bytes

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


NAMES = ("local", "threads", "sync")
ADDRESS = re.compile(r"^(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*)://(?P<host>\[[0-9A-Fa-f:.%]+\]|"
                      r"[A-Za-z0-9_.-]+)(?::(?P<port>[0-9]{1,5}))?/?$")


def scheduler_problem(value: str) -> str | None:
    """Why `value` is no scheduler studyrun can use (a name or tcp://HOST:PORT), or None."""
    match = ADDRESS.match(value)
    scheme = (match["scheme"] if match else value.partition("://")[0]).lower()
    if "://" in value and scheme == "inproc":
        return (f"{value!r} is an in-process address, for a scheduler inside the same process, "
                "which a study never has; give tcp://HOST:PORT of a running `dask scheduler`")
    if "://" in value and scheme not in ("tcp", "tls", "ucx"):
        return (f"unknown protocol {scheme + '://'!r} in {value!r}; a Dask scheduler listens on "
                "tcp://HOST:PORT (or tls://, ucx://)")
    if value in NAMES or (match and 0 < int(match["port"] or 8786) < 65536):
        return None
    if match:
        return f"port {match['port']} is out of range (1 to 65535) in {value!r}"
    return (f"expected local, threads, sync or a scheduler address such as tcp://127.0.0.1:8786 "
            f"(an IPv6 host in brackets: tcp://[::1]:8786); got {value!r}")


def _scheduler_kind(value) -> str:
    return "cluster" if isinstance(value, (dict, Cluster)) else "name"


Scheduler = Annotated[Union[Annotated[str, Tag("name")], Annotated[Cluster, Tag("cluster")]],
                      Discriminator(_scheduler_kind)]


class Execution(BaseModel):
    """How the runs are executed; the command line overrides any of these."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    scheduler: Scheduler = Field(
        "local", description="local | threads | sync | tcp://host:port | a cluster block "
        "{cluster: slurm | pbs | sge | lsf | htcondor, cores, memory, walltime, jobs, ...}")
    workers: PositiveInt | None = Field(None, description="worker processes (default: one per "
                                        "core; a cluster block counts its own)")
    batch_size: PositiveInt | Literal["auto"] = "auto"
    retries: NonNegativeInt = Field(0, description="re-runs of failed runs and lost batches")
    timeout: float | None = Field(None, gt=0, description="seconds per run (command models; a "
                                  "python model runs in the worker and cannot be stopped)")
    on_failure: Literal["abort", "continue"] = "abort"
    keep: Literal["quantities", "series"] = Field(
        "quantities", description="series: keep every run's time series in the store too")
    export: list[Literal["csv", "parquet"]] = Field(
        default_factory=lambda: ["csv"], min_length=1,
        description="the runs' files: runs.csv, and/or runs.parquet (typed columns) with "
                    "series.parquet (the kept series in long form); parquet needs pyarrow "
                    "(pip install 'studyrun[parquet]')")
    depends_on: list[Annotated[str, Field(min_length=1)]] = Field(
        default_factory=list, description="files the model reads on its own (data, inputs, a "
        "container image): paths or globs (** for any depth) relative to the study file; their "
        "content is part of every run's identity, so editing one re-runs the study")

    @field_validator("export")
    @classmethod
    def _check_export(cls, value: list[str]) -> list[str]:
        if len(set(value)) < len(value):
            raise ValueError(f"export lists a format twice: {value}")
        if "parquet" in value:
            try:
                import pyarrow  # noqa: F401 - only when parquet is asked for
            except ImportError:
                raise ValueError("parquet needs pyarrow, which is not installed: pip install "
                                 "'studyrun[parquet]' (or pyarrow), or export csv only") from None
        return value

    @field_validator("scheduler")
    @classmethod
    def _check_scheduler(cls, value):
        problem = scheduler_problem(value) if isinstance(value, str) else None
        if problem:
            raise ValueError(problem)
        return value
