"""The cores this process may use, and BLAS and OpenMP thread pools held to them: a pool of
more threads than cores (a container's quota, a worker's share of a machine) slows its fits
several times on a busy machine."""

from __future__ import annotations

import math
import os
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

POOL_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
# The analysis step's BLAS threads: its products are small (SALib's kernel densities, a fit's
# factorisations), and on a busy machine a second OpenBLAS thread cost 7 times the CPU (delta on
# 10,000 given rows: 137 CPU s on two threads, 20 on one); one thread also keeps its numbers
# those of any machine.
ANALYSIS_THREADS = 1


def thread_map(function: Callable[[Any], Any], items: Iterable[Any], threads: int | None = None,
               name: str = "studyrun") -> list[Any]:
    """`function` of each item, in order, in up to `threads` threads (default: the usable
    cores); in this thread when that is one."""
    items = list(items)
    threads = min(threads or usable_cores(), len(items))
    if threads < 2:
        return [function(item) for item in items]
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(threads, thread_name_prefix=name) as pool:
        return list(pool.map(function, items))


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity), fewer where its cgroup's CPU quota
    allows less."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:
        cores = os.cpu_count() or 1
    quota = _cgroup_quota()
    return max(1, min(cores, math.ceil(quota)) if quota else cores)


def _cgroup_quota() -> float | None:
    """cgroup v2's cpu.max for this process, in cores (None where there is none or it is max)."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
        where = next(line[3:] for line in lines if line.startswith("0::"))
        quota, period = (Path("/sys/fs/cgroup") / where.lstrip("/") / "cpu.max").read_text().split()
        return int(quota) / int(period) if quota.isdigit() else None
    except (OSError, StopIteration, ValueError):
        return None


def share(workers: int) -> int:
    """Each of `workers` processes' share of the cores, at least one."""
    return max(1, usable_cores() // max(1, workers))


@contextmanager
def held_to_cores(cores: int | None = None) -> Iterator[None]:
    """BLAS and OpenMP pools of at most `cores` threads (default: the usable cores) inside the
    block; a pool already smaller (OMP_NUM_THREADS=1, say) is left as it is."""
    cores = cores or usable_cores()
    pools = _pools()
    limits = {info["prefix"]: min(info["num_threads"], cores) for info in pools.info()}
    with pools.limit(limits=limits):
        yield


_POOLS: list[Any] = []  # [modules imported when found, threadpoolctl's controller]


def _pools() -> Any:
    """threadpoolctl's controller of the pools this process has loaded, found again only after
    a new module was imported (libraries load with their modules): finding them reads every
    loaded library, some 3-5 ms, where a block is often a Bayesian round."""
    from threadpoolctl import ThreadpoolController  # type: ignore[import-untyped]

    if not _POOLS or _POOLS[0] != len(sys.modules):
        _POOLS[:] = [len(sys.modules), ThreadpoolController()]
    return _POOLS[1]


def pool_environment(threads: int) -> dict[str, str]:
    """The environment variables that hold a new process's pools to `threads`; one the user
    set (OMP_NUM_THREADS=1, say) is kept as set."""
    return {name: os.environ.get(name, str(threads)) for name in POOL_VARIABLES}
