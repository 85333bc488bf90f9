"""A child process that runs batches for the driver, so that a model crashing its process (a
segfault, os._exit, a signal) costs that process and its batch, never the driver. The pilot of
`batch_size: auto`, studies too short for a cluster, and the parts of a batch lost on a
LocalCluster run here.
"""

from __future__ import annotations

import concurrent.futures as cf
import os
import pickle
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any, Callable, Iterable

import cloudpickle  # type: ignore[import-untyped]


@dataclass(frozen=True)
class Loss:
    """A batch lost with the process running it: how many times such a process died running
    it, how the last one died (None when not known), and which worker that was."""

    deaths: int
    cause: str | None
    worker: str


class ProcessDied(Exception):
    """The process running a batch died before answering: `cause` says how."""

    def __init__(self, cause: str, worker: str) -> None:
        super().__init__(cause)
        self.cause, self.worker = cause, worker


def death_cause(exitcode: int | None) -> str:
    """How a process ended, from its exit code: 'signal 11, Segmentation fault', 'exit status 1'."""
    if exitcode is None:
        return "it stopped answering"
    if exitcode < 0:
        try:
            return f"signal {-exitcode}, {signal.strsignal(-exitcode) or 'unknown signal'}"
        except ValueError:
            return f"signal {-exitcode}"
    return f"exit status {exitcode}"


class IsolatedExecutor:
    """Runs each task at once, like SyncExecutor, but in a child process that a crash ends; the
    next task starts a new one. The child is forked when this process has no other thread (it
    then starts at once, with everything imported), else a new interpreter (`python -c`, not
    multiprocessing's spawn: it never runs the driver's __main__ again, so a script calling
    studyrun.run without an `if __name__ == "__main__"` guard works)."""

    name = "process"
    workers = 1

    def __init__(self) -> None:
        self.process: subprocess.Popen[bytes] | Forked | None = None
        self.connection: list[Connection] = []  # from the child, to the child
        self.used = False  # whether the running child was given a task

    def start(self) -> subprocess.Popen[bytes] | Forked:
        """Start the child (a new interpreter imports while the driver works on); the child."""
        if self.process is not None:
            return self.process
        from_driver, to_child = os.pipe()
        from_child, to_driver = os.pipe()
        if hasattr(os, "fork") and threading.active_count() == 1:
            self.process = fork(from_driver, to_driver)
        else:
            code = "import sys; from studyrun.core.isolated import serve; serve(*map(int, sys.argv[1:]))"
            self.process = subprocess.Popen(
                [sys.executable, "-c", code, str(from_driver), str(to_driver)],
                pass_fds=(from_driver, to_driver), stdin=subprocess.DEVNULL)
        os.close(from_driver)
        os.close(to_driver)
        self.connection = [Connection(from_child, writable=False),
                           Connection(to_child, readable=False)]
        self.used = False
        self.connection[1].send_bytes(cloudpickle.dumps(sys.path))
        return self.process

    def submit(self, fn: Callable[..., Any], *args: Any) -> cf.Future[Any]:
        future: cf.Future[Any] = cf.Future()
        process = self.start()
        self.used = True
        try:
            self.connection[1].send_bytes(cloudpickle.dumps((fn, args)))
            kind, value = pickle.loads(self.connection[0].recv_bytes())
        except (EOFError, OSError):  # the child died: say how, and start afresh next time
            worker = f"{socket.gethostname()}:{process.pid}"
            future.set_exception(ProcessDied(death_cause(self.stop()), worker))
            return future
        except BaseException:  # interrupted while waiting: the child's batch is abandoned
            self.stop(grace=0)
            raise
        if kind == "ok":
            future.set_result(value)
        else:
            future.set_exception(value)
        return future

    def wait_first(self, futures: Iterable[cf.Future[Any]]
                   ) -> tuple[set[cf.Future[Any]], set[cf.Future[Any]]]:
        return set(futures), set()

    def result(self, future: cf.Future[Any]) -> Any:
        return future.result()

    def lost(self, error: Exception) -> Loss | None:
        """A batch whose process died: once, and how."""
        if isinstance(error, ProcessDied):
            return Loss(1, error.cause, error.worker)
        return None

    def stop(self, grace: float = 5.0) -> int | None:
        """End the child (killing it if it does not exit within `grace` s); its exit code."""
        process, self.process = self.process, None
        if process is None:
            return None
        for end in self.connection:
            end.close()
        try:
            if not grace:
                process.kill()
            return process.wait(grace or None)
        except subprocess.TimeoutExpired:
            process.kill()
            return process.wait()

    def close(self) -> None:
        """Let the child finish (closing its pipe tells it to exit, flushing what the model
        printed); one never used is killed at once, as it may still be importing."""
        self.stop(grace=2.0 if self.used else 0.0)


class Forked:
    """A forked child, as much of subprocess.Popen as IsolatedExecutor uses."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.returncode: int | None = None

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.returncode is None:
            pid, status = os.waitpid(self.pid, 0 if deadline is None else os.WNOHANG)
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
            elif deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(f"studyrun child {self.pid}", timeout or 0.0)
            else:
                time.sleep(0.005)
        return self.returncode

    def kill(self) -> None:
        if self.returncode is None:
            os.kill(self.pid, signal.SIGKILL)


def fork(reading: int, writing: int) -> Forked:
    """Fork a child that serves on the two pipe ends, holding no other file of the driver's (the
    results folder's lock among them)."""
    import faulthandler

    pid = os.fork()
    if pid:
        return Forked(pid)
    try:
        faulthandler.disable()  # a crash of the model is reported by the driver
        kept = [2, *sorted({reading, writing}), os.sysconf("SC_OPEN_MAX")]
        for low, high in zip(kept, kept[1:]):
            os.closerange(low + 1, high)
        serve(reading, writing)
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                pass
        os._exit(0)


def serve(reading: int, writing: int) -> None:
    """The child's loop: run each (fn, args) received and send back its result or exception,
    until the driver closes the pipe."""
    from multiprocessing.connection import Connection

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C is the driver's to handle
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # not the driver's handler, inherited by fork
    try:  # a model out of memory here should be what the kernel kills, not the driver
        with open("/proc/self/oom_score_adj", "w") as adjust:
            adjust.write("1000")
    except OSError:
        pass
    incoming, outgoing = Connection(reading, writable=False), Connection(writing, readable=False)
    sys.path[:] = pickle.loads(incoming.recv_bytes())
    while True:
        try:
            fn, args = pickle.loads(incoming.recv_bytes())
        except EOFError:  # the driver is done, or gone
            return
        try:
            reply = ("ok", fn(*args))
        except BaseException as error:  # delivered through the future, as a pool would
            reply = ("error", error)
        try:
            message = cloudpickle.dumps(reply)
        except Exception as error:  # an unpicklable result or exception
            message = cloudpickle.dumps(("error", RuntimeError(f"{type(error).__name__}: {error}")))
        try:
            outgoing.send_bytes(message)
        except OSError:  # the driver is gone
            return
