"""Executors from `execution.scheduler`: in-process, threads, a Dask LocalCluster or scheduler.

Each adapter offers `submit(fn, *args)`, `wait_first(futures)` and `close()`; the execute step
knows nothing else about them. Dask is imported only when a cluster is asked for.
"""

from __future__ import annotations

import concurrent.futures as cf
import logging
import os
from typing import Any, Callable

from .errors import ExecutionError


class SyncExecutor:
    """Runs each task at once in this process: for debugging and for studies too small to share."""

    name = "sync"
    workers = 1

    def submit(self, fn: Callable, *args: Any) -> cf.Future:
        future: cf.Future = cf.Future()
        try:
            future.set_result(fn(*args))
        except BaseException as error:  # delivered through the future, as a pool would
            future.set_exception(error)
        return future

    def wait_first(self, futures):
        return set(futures), set()

    def close(self) -> None:
        pass


class ThreadExecutor(SyncExecutor):
    """A thread pool in this process: for models that release the GIL (subprocesses, numpy)."""

    name = "threads"

    def __init__(self, workers: int) -> None:
        self.workers = workers
        self.pool = cf.ThreadPoolExecutor(workers)

    def submit(self, fn: Callable, *args: Any) -> cf.Future:
        return self.pool.submit(fn, *args)

    def wait_first(self, futures):
        done, pending = cf.wait(futures, return_when=cf.FIRST_COMPLETED)
        return done, pending

    def close(self) -> None:
        self.pool.shutdown(wait=True, cancel_futures=True)


class DaskExecutor:
    """A dask.distributed Client: on a LocalCluster it starts, or on an existing scheduler."""

    def __init__(self, client, cluster=None, name: str = "local") -> None:
        self.client = client
        self.cluster = cluster
        self.name = name

    @property
    def workers(self) -> int:
        info = self.client.scheduler_info()
        return max(1, sum(w.get("nthreads", 1) for w in info.get("workers", {}).values()))

    def submit(self, fn: Callable, *args: Any):
        return self.client.submit(fn, *args, pure=False)

    def wait_first(self, futures):
        from distributed import wait

        result = wait(list(futures), return_when="FIRST_COMPLETED")
        return set(result.done), set(result.not_done)

    def close(self) -> None:
        try:
            self.client.close()
            if self.cluster is not None:
                self.cluster.close()
        except Exception:  # closing a client of a lost scheduler may raise; nothing is left to save
            pass


def default_workers() -> int:
    """One worker per core this process may use."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def start_executor(scheduler: str, workers: int | None):
    """The executor named by `scheduler`: sync, threads, local or tcp://host:port."""
    workers = workers or default_workers()
    if scheduler == "sync":
        return SyncExecutor()
    if scheduler == "threads":
        return ThreadExecutor(workers)
    from distributed import Client, LocalCluster

    if scheduler == "local":
        cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                               dashboard_address=":0", silence_logs=logging.ERROR)
        return DaskExecutor(Client(cluster), cluster, "local")
    try:
        client = Client(scheduler, timeout="10s")
    except (OSError, TimeoutError) as error:
        raise ExecutionError(f"cannot reach the Dask scheduler at {scheduler}: {error}; is it "
                             "running (dask scheduler) and are its workers started?") from None
    return DaskExecutor(client, None, scheduler)
