"""HPC batch systems as `execution.scheduler: {cluster: slurm, ...}`, through dask-jobqueue.

Execute step. A cluster block says what one batch job asks for (cores, memory, walltime, queue,
account, extra directives, shell lines to run first) and how many jobs to keep: a fixed number
(`jobs`) or an adaptive range (`minimum_jobs` .. `maximum_jobs`). Each job starts `processes`
single-threaded Dask workers (one per core by default), which connect back to a scheduler that
studyrun starts in the driver. dask-jobqueue is an optional extra (`pip install
'studyrun[jobqueue]'`), imported only when a cluster is started or its job script is shown.

The jobs are named after the results folder (`job_name`): on SLURM, `studyrun status` counts
them with squeue, and the next driver of the folder cancels those a killed driver left behind.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from studyrun.core.errors import ExecutionError

if TYPE_CHECKING:
    from dask_jobqueue.core import JobQueueCluster
    from distributed import Client

    from studyrun.study.spec.execution import Cluster

CLASSES = {"slurm": "SLURMCluster", "pbs": "PBSCluster", "sge": "SGECluster",
           "lsf": "LSFCluster", "htcondor": "HTCondorCluster"}
_PLACEHOLDER_ADDRESS = "tcp://SCHEDULER-ADDRESS:8786"

def job_keywords(spec: Cluster, name: str = "studyrun") -> dict[str, Any]:
    """dask-jobqueue's keyword arguments for the job each submission runs."""
    keywords: dict[str, Any] = dict(cores=spec.cores, memory=spec.memory, processes=spec.workers_per_job,
                    job_name=name, interface=spec.interface,
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


def cluster_class(kind: str) -> Any:
    """dask-jobqueue's cluster class for a batch system, or a clear error when it is missing
    (typed loosely: dask-jobqueue declares its classes' `job_cls` as an instance attribute)."""
    ctrl_c = signal.getsignal(signal.SIGINT)
    try:
        import dask_jobqueue
    except ImportError:
        raise ExecutionError("a cluster block needs dask-jobqueue: pip install "
                             "'studyrun[jobqueue]' (or pip install dask-jobqueue)") from None
    finally:
        if signal.getsignal(signal.SIGINT) is not ctrl_c:
            # its runner module, imported with it, makes Ctrl-C a silent sys.exit() (status 0):
            # the driver would stop without saying so, as if it had finished
            signal.signal(signal.SIGINT, ctrl_c)
    return getattr(dask_jobqueue, CLASSES[kind])


def job_script(spec: Cluster, name: str = "studyrun") -> str:
    """The script each job called `name` would be submitted with; the scheduler's address is a
    placeholder, since studyrun starts the scheduler when the study runs. Needs no batch system."""
    job_class = cluster_class(spec.cluster).job_cls
    keywords = job_keywords(spec, name)
    name = keywords.pop("job_name")
    script: str = job_class(scheduler=_PLACEHOLDER_ADDRESS, name=name, job_name=name,
                            **keywords).job_script()
    return script


def job_name(folder: Path) -> str:
    """The name of a results folder's batch jobs: the folder's name, for people reading squeue,
    and a digest of its path, which no other folder's jobs share."""
    path = Path(folder).resolve()
    digest = hashlib.sha256(str(path).encode()).hexdigest()[:8]
    return f"studyrun-{re.sub(r'[^A-Za-z0-9_.-]', '_', path.name)[:32]}-{digest}"


def slurm_jobs(name: str) -> list[tuple[str, str]] | None:
    """(job id, state) of this user's SLURM jobs called `name`, e.g. ("42", "PENDING"); None
    when squeue is missing or fails (no SLURM here, or its controller is down)."""
    if shutil.which("squeue") is None:
        return None
    try:
        done = subprocess.run(["squeue", "--noheader", f"--user={os.getuid()}", f"--name={name}",
                               "--format=%i %T"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if done.returncode != 0:
        return None
    return [(job, state) for job, state in (line.split(None, 1) for line in done.stdout.splitlines()
                                              if " " in line)]


def cancel_leftovers(kind: str, name: str) -> int:
    """Cancel the jobs called `name` that an earlier driver of the same folder left (killed, it
    could not cancel them; this driver holds the folder's lock, so no live one owns them).
    SLURM only; how many were cancelled."""
    jobs = slurm_jobs(name) if kind == "slurm" else None
    if not jobs:
        return 0
    subprocess.run(["scancel", *(job for job, _ in jobs)], capture_output=True, timeout=30)
    return len(jobs)


def start_cluster(spec: Cluster, name: str = "studyrun") -> tuple[Client, JobQueueCluster]:
    """A running dask-jobqueue cluster for `spec`, scaled or adaptive, whose jobs are called
    `name`, and a client of it."""
    from distributed import Client

    keywords = job_keywords(spec, name)
    options = {"dashboard_address": ":0"}
    try:
        cluster: JobQueueCluster = cluster_class(spec.cluster)(scheduler_options=options,
                                                               **keywords)
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


def with_kind(scheduler: str | Cluster | None, kind: str) -> Cluster:
    """`--cluster KIND`: the study's cluster block on another batch system, or a default one."""
    from studyrun.study.spec.execution import Cluster

    if isinstance(scheduler, Cluster):
        data = scheduler.model_dump(exclude_unset=True)
        if kind == "htcondor":
            for key in ("walltime", "queue", "account"):
                data.pop(key, None)
        elif scheduler.cluster == "htcondor":
            data.pop("disk", None)
        return Cluster(**{**data, "cluster": kind})
    return Cluster(cluster=kind)
