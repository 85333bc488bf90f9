"""Executors from `execution.scheduler`: in-process, threads, a Dask LocalCluster or scheduler,
or an HPC batch system through dask-jobqueue (a cluster block, see clusters.py).

Each adapter is an `Executor`: `name`, `workers`, `submit(fn, *args)`, `wait_first(futures)`,
`result(future)`, `lost(error)` and `close()`; the execute step knows nothing else about them.
Dask is imported only when a cluster is asked for. A lost scheduler is reported as an ExecutionError by `wait_first` and
`result`, never a hang; a batch whose worker process died is a `Loss` (see `lost`).
"""

from __future__ import annotations

import concurrent.futures as cf
import logging
import os
import socket
import struct
import sys
import time
from collections.abc import Callable, Collection, Hashable
from typing import TYPE_CHECKING, Any, Protocol, cast, runtime_checkable

from studyrun.core.errors import ExecutionError
from studyrun.core.isolated import Loss
from studyrun.core.threads import pool_environment, share, usable_cores

if TYPE_CHECKING:
    from distributed import Client, SpecCluster
    from typing_extensions import TypeIs

    from studyrun.study.spec.execution import Cluster

    Scheduler = str | Cluster  # `execution.scheduler`: a name, an address or a cluster block


class Submitted(Hashable, Protocol):
    """A task handed to an executor: a concurrent.futures or a Dask future."""

    def result(self) -> Any: ...

    def cancel(self) -> Any: ...


@runtime_checkable
class Executor(Protocol):
    """Where batches run: this process, threads, a child process, or Dask workers."""

    @property
    def name(self) -> str:
        """How analysis.json and messages name it: sync, threads, process, local, slurm, ..."""

    @property
    def workers(self) -> int:
        """How many batches it runs at once."""

    def submit(self, fn: Callable[..., Any], *args: Any) -> Submitted:
        """Start `fn(*args)` (or run it at once) and return its future."""

    def wait_first(self, futures: Collection[Submitted]) -> tuple[set[Submitted], set[Submitted]]:
        """Wait for at least one future: (done, not done)."""

    def result(self, future: Submitted) -> Any:
        """The task's value, or its exception raised; a lost executor is an ExecutionError."""

    def lost(self, error: Exception) -> Loss | None:
        """Whether `error` means the process running the task died, and how."""

    def close(self) -> None:
        """Stop what it started."""


class SyncExecutor:
    """Runs each task at once in this process: for debugging and for studies too small to share."""

    name = "sync"
    workers = 1

    def submit(self, fn: Callable[..., Any], *args: Any) -> cf.Future[Any]:
        future: cf.Future[Any] = cf.Future()
        try:
            future.set_result(fn(*args))
        except BaseException as error:  # delivered through the future, as a pool would
            future.set_exception(error)
        return future

    def wait_first(self, futures: Collection[Submitted]) -> tuple[set[Submitted], set[Submitted]]:
        return set(futures), set()

    def result(self, future: Submitted) -> Any:
        return future.result()

    def lost(self, error: Exception) -> Loss | None:
        """Nothing is lost here: a process that dies here is the driver."""
        return None

    def close(self) -> None:
        pass


class ThreadExecutor(SyncExecutor):
    """A thread pool in this process: for models that release the GIL (subprocesses, numpy)."""

    name = "threads"

    def __init__(self, workers: int) -> None:
        self.workers = workers
        self.pool = cf.ThreadPoolExecutor(workers)

    def submit(self, fn: Callable[..., Any], *args: Any) -> cf.Future[Any]:
        return self.pool.submit(fn, *args)

    def wait_first(self, futures: Collection[Submitted]) -> tuple[set[Submitted], set[Submitted]]:
        pool_futures = cast("Collection[cf.Future[Any]]", futures)  # this pool's, submit's
        done, pending = cf.wait(pool_futures, return_when=cf.FIRST_COMPLETED)
        return set(done), set(pending)

    def close(self) -> None:
        self.pool.shutdown(wait=True, cancel_futures=True)


class DaskExecutor:
    """A dask.distributed Client: on a LocalCluster or a batch-system cluster it starts, or on an
    existing scheduler (whose loss it reports as an ExecutionError)."""

    POLL_SECONDS = 5.0  # how often a wait checks that the scheduler is still there
    ANSWER_SECONDS = 5.0  # how long the scheduler may take to answer a check
    ANSWER_TRIES = 3  # checks in a row it must miss to count as lost
    ANSWER_PAUSE = 1.0  # seconds between them

    def __init__(self, client: Client, cluster: SpecCluster | None = None, name: str = "local",
                 planned_workers: int = 0) -> None:
        self.client = client
        self.cluster = cluster
        self.name = name
        self.planned_workers = planned_workers  # a batch-system cluster's workers, once started
        self.scheduler_lost = False
        # the client logs each failed reconnection, and its batched sender each write to a
        # closed connection, with a traceback; this executor reports a lost scheduler itself, in
        # one line (levels restored on close)
        self._quieted = {name: logging.getLogger(name).level
                         for name in ("distributed.client", "distributed.batched")}
        for name in self._quieted:
            logging.getLogger(name).setLevel(logging.CRITICAL)
        logging.getLogger("distributed.scheduler").addFilter(keep_quiet)
        logging.getLogger("tornado.application").addFilter(not_a_cancel_of_an_unstarted_call)

    @property
    def workers(self) -> int:
        info = self.client.scheduler_info()
        live = sum(int(w.get("nthreads", 1)) for w in info.get("workers", {}).values())
        return max(1, live, self.planned_workers)

    def submit(self, fn: Callable[..., Any], *args: Any) -> Submitted:
        future: Submitted = self.client.submit(fn, *args, pure=False)
        return future

    def wait_first(self, futures: Collection[Submitted]) -> tuple[set[Submitted], set[Submitted]]:
        from distributed import wait

        while True:
            try:
                result = wait(list(futures), timeout=self.POLL_SECONDS,
                              return_when="FIRST_COMPLETED")
                return set(result.done), set(result.not_done)
            except TimeoutError:
                self.check_scheduler()
                self.keep_workers()
            except Exception:  # futures cancelled as the connection dropped
                self.check_scheduler()
                raise

    def result(self, future: Submitted) -> Any:
        """The batch's result; a lost scheduler becomes an ExecutionError that says so."""
        try:
            return future.result()
        except Exception:
            self.check_scheduler()
            raise

    def lost(self, error: Exception) -> Loss | None:
        """A batch whose worker died running it (Dask's KilledWorker): how often, and how."""
        from distributed.scheduler import KilledWorker

        if not isinstance(error, KilledWorker):
            return None
        self.keep_workers()
        worker = error.last_worker
        return Loss(error.allowed_failures + 1, None,
                    f"{getattr(worker, 'host', '?')}:{getattr(worker, 'pid', '?')}")

    def keep_workers(self) -> None:
        """Bring a LocalCluster back to its size: it drops a worker whose restarts keep it away
        for distributed.deploy.lost-worker-timeout, as a worker that crashes again and again."""
        cluster = self.cluster
        if self.name == "local" and cluster is not None and len(cluster.workers) < len(
                cluster.worker_spec):
            cluster.scale(len(cluster.worker_spec))

    def check_scheduler(self) -> None:
        """Raise an ExecutionError when the scheduler does not answer ANSWER_TRIES times in a
        row, each within ANSWER_SECONDS: one missed answer may be a busy machine."""
        scheduler = self.client.scheduler  # None once the client is closed
        for attempt in range(self.ANSWER_TRIES):
            if scheduler is None:
                break
            try:
                self.client.sync(scheduler.identity, callback_timeout=self.ANSWER_SECONDS)
                return
            except Exception:  # refused, reset or timed out: gone, if it stays so
                if attempt + 1 < self.ANSWER_TRIES:
                    time.sleep(self.ANSWER_PAUSE)
        address = getattr(scheduler, "address", None) or "its address"
        self.scheduler_lost = True
        raise ExecutionError(
            f"lost the Dask scheduler at {address} (it stopped, or its host or network went "
            "away); the runs finished so far are recorded: start the scheduler again (or use "
            "another) and run the study again to resume")

    def close(self) -> None:
        root = logging.getLogger("distributed")
        root_level = root.level
        if self.scheduler_lost:  # reported already: spare the user distributed's tracebacks
            root.setLevel(logging.CRITICAL)
        try:
            if self.scheduler_lost:
                self.client.close(timeout=2)
            else:
                self.client.close()
            if self.cluster is not None:
                self.cluster.close()
        except Exception:  # closing a client of a lost scheduler may raise; nothing is left to save
            pass
        finally:
            root.setLevel(root_level)
            for name, level in self._quieted.items():
                logging.getLogger(name).setLevel(level)
            logging.getLogger("distributed.scheduler").removeFilter(keep_quiet)
            logging.getLogger("tornado.application").removeFilter(
                not_a_cancel_of_an_unstarted_call)


def keep_quiet(record: logging.LogRecord) -> bool:
    """Drop the scheduler's lines about a batch whose worker died: studyrun handles those."""
    message = record.getMessage()
    return not ("workers died while trying to run it" in message
                or message.startswith("Couldn't gather keys"))


PROBE_SECONDS = 5.0  # how long a scheduler may take to accept a connection and greet


def probe_scheduler(address: str, timeout: float = PROBE_SECONDS) -> None:
    """Connect to a tcp:// scheduler and read its greeting, so an address that is down, or is
    not a Dask scheduler, is a one-line ExecutionError at start, before any run (Dask's own
    client would read another server's bytes as a frame length and try to allocate it)."""
    from studyrun.study.spec.execution import ADDRESS

    match = ADDRESS.match(address)
    scheme = match["scheme"].lower() if match else ""
    if match is None or scheme not in ("tcp", "tls"):
        return  # ucx: left to Dask
    host, port = match["host"].strip("[]"), int(match["port"] or 8786)
    try:
        connection = socket.create_connection((host, port), timeout=timeout)
    except OSError as error:
        reason = "no answer" if isinstance(error, TimeoutError) else error.strerror or error
        raise ExecutionError(f"cannot reach the Dask scheduler at {address}: {reason}; is it "
                             "running (dask scheduler), and is the address right?") from None
    with connection:
        try:
            greeting = read_greeting(connection) if scheme == "tcp" else None  # tls: encrypted
        except OSError:  # silent until the timeout, or reset
            greeting = b""
    if greeting is not None and not is_dask_greeting(greeting):
        raise ExecutionError(f"the server at {address} is not a Dask scheduler (it did not greet "
                             f"as one within {timeout:g} s); check the host and port of `dask "
                             "scheduler`")


def read_greeting(connection: socket.socket) -> bytes | None:
    """The first message a Dask server sends on a new connection: its handshake (a 64-bit
    length, then that many bytes), or the bytes that came instead (at most 64 KiB)."""
    head = receive(connection, 8)
    if len(head) < 8:
        return head
    length = struct.unpack("<Q", head)[0]
    if not 16 <= length <= 65536:
        return head
    return head + receive(connection, length)


def receive(connection: socket.socket, size: int) -> bytes:
    """Up to `size` bytes, fewer when the server closes the connection."""
    data = b""
    while len(data) < size:
        chunk = connection.recv(size - len(data))
        if not chunk:
            break
        data += chunk
    return data


def is_dask_greeting(data: bytes) -> bool:
    """Whether `data` is a Dask comm message: length, frame count, frame lengths that add up,
    and a handshake naming the server's python."""
    if len(data) < 16:
        return False
    length, frames = struct.unpack("<QQ", data[:16])
    if not 1 <= frames <= 64 or len(data) < 16 + 8 * frames:
        return False
    sizes = struct.unpack(f"<{frames}Q", data[16:16 + 8 * frames])
    return length == len(data) - 8 == 8 + 8 * frames + sum(sizes) and b"python" in data


def default_workers() -> int:
    """One worker per core this process may use."""
    return usable_cores()


def is_cluster(scheduler: Scheduler | None) -> TypeIs[Cluster]:
    """Whether the scheduler is a cluster block (`Cluster`), told from the names and addresses
    without importing the study's models, which a Dask worker does not need."""
    return scheduler is not None and not isinstance(scheduler, str)


def scheduler_name(scheduler: Scheduler) -> str:
    """The scheduler as analysis.json and messages name it."""
    return scheduler.cluster if is_cluster(scheduler) else str(scheduler)


def starts_a_cluster(scheduler: Scheduler) -> bool:
    """Whether this scheduler starts workers of its own (worth avoiding for a short study)."""
    return scheduler == "local" or is_cluster(scheduler)


def planned_workers(scheduler: Scheduler, workers: int | None) -> int:
    """How many workers the scheduler will offer, before it starts."""
    if is_cluster(scheduler):
        return scheduler.most_workers
    return workers or default_workers()


# Dask keeps each stream's last 1,000 messages under 1 MB (for debugging): a batch of a
# thousand inputs is one, so the driver held the client's and the scheduler's copies of a
# design's inputs (1.3 GB of a 64,128-run Sobol' study of 1,000 parameters). Ten are enough.
MESSAGES_KEPT = {"distributed.admin.low-level-log-length": 10}


def give_back_memory() -> None:
    """Return to the system the memory this process freed but glibc keeps in its arenas:
    Dask's messages of batches, freed in its threads' arenas, stayed there (0.4 GB after a
    64,128-run study of 1,000 parameters)."""
    if sys.platform.startswith("linux"):
        import ctypes

        try:
            ctypes.CDLL(None).malloc_trim(0)
        except AttributeError:  # a C library without it (musl)
            pass


def start_executor(scheduler: Scheduler, workers: int | None,
                   job_name: str = "studyrun") -> Executor:
    """The executor for `scheduler`: sync, threads, local, tcp://host:port or a cluster block
    (whose batch jobs are called `job_name`)."""
    workers = workers or default_workers()
    if scheduler == "sync":
        return SyncExecutor()
    if scheduler == "threads":
        return ThreadExecutor(workers)
    import dask
    from distributed import Client, LocalCluster  # first: dask's config has its defaults then

    from studyrun.execution.clusters import start_cluster

    with dask.config.set(MESSAGES_KEPT):  # for the streams made as the client and workers connect
        if is_cluster(scheduler):
            client, batch_jobs = start_cluster(scheduler, job_name)
            return DaskExecutor(client, batch_jobs, scheduler.cluster, scheduler.most_workers)
        if scheduler == "local":
            # a batch is given up at its first worker death: studyrun runs it again in parts, in
            # a process of its own, to find the runs that kill their process
            # and each worker's BLAS and OpenMP threads are its share of the cores (Dask's
            # default is one, which leaves cores idle under fewer workers than cores)
            environ = {**dask.config.get("distributed.nanny.pre-spawn-environ"),
                       **pool_environment(share(workers))}
            with dask.config.set({"distributed.scheduler.allowed-failures": 0,
                                  "distributed.nanny.pre-spawn-environ": environ}):
                cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                                       dashboard_address=":0", silence_logs=logging.ERROR,
                                       preload=["studyrun.core.interrupts"])  # Ctrl-C is the driver's
            return DaskExecutor(Client(cluster), cluster, "local")
        try:
            client = Client(scheduler, timeout="10s")
        except (OSError, TimeoutError) as error:
            raise ExecutionError(f"cannot reach the Dask scheduler at {scheduler}: {error}; is "
                                 "it running (dask scheduler) and are its workers started?"
                                 ) from None
        return DaskExecutor(client, None, scheduler)


def not_a_cancel_of_an_unstarted_call(record: logging.LogRecord) -> bool:
    """Drop the NameError traceback distributed's sync() logs when a Ctrl-C interrupts a client
    call whose coroutine had not started yet (its cancel callback reads a future never set,
    distributed 2026.8): the driver reports the interrupt itself, in one line."""
    error = record.exc_info[1] if record.exc_info else None
    if not isinstance(error, NameError) or error.__traceback__ is None:
        return True
    last = error.__traceback__
    while last.tb_next is not None:
        last = last.tb_next
    code = last.tb_frame.f_code
    return not (code.co_name == "cancel" and code.co_filename.endswith(
        os.path.join("distributed", "utils.py")))
