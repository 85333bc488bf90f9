"""Tells an exit a model asks for (sys.exit, a KeyboardInterrupt it raises: that run fails) from a
Ctrl-C of the driver (the study stops), which reaches a model running in the driver's main thread
as the same KeyboardInterrupt. A SIGTERM (what a batch system sends a driver job at its walltime
or on scancel) stops the study the same way, so its clusters and batch jobs are closed too, also
in a driver started with SIGINT ignored (a background job of a script, as batch scripts start it).
A LocalCluster's workers ignore SIGINT (`dask_setup`): a terminal's Ctrl-C reaches them too, and
the driver alone stops the study and closes them.
"""

from __future__ import annotations

import logging
import signal
import threading
from contextlib import contextmanager
from types import FrameType
from typing import Iterator

_DRIVER_INTERRUPTED = threading.Event()


class Terminated(KeyboardInterrupt):
    """A SIGTERM to the driver while a study executes: unwinds as a Ctrl-C does."""


def fails_the_run(error: BaseException) -> bool:
    """Whether an exception escaping the model is that run's failure rather than a stop of the
    study: anything but a KeyboardInterrupt after a SIGINT or SIGTERM to this process."""
    return not (isinstance(error, KeyboardInterrupt) and _DRIVER_INTERRUPTED.is_set())


@contextmanager
def noting_interrupts() -> Iterator[None]:
    """While a study executes, mark a SIGINT to this process before its handler raises, and make
    a SIGTERM raise Terminated; each only where this process handles it (an ignored SIGINT stays
    ignored, a SIGTERM that is not at its default is left as it is)."""
    if threading.current_thread() is not threading.main_thread():
        yield  # only the main thread receives signals
        return
    on_int = signal.getsignal(signal.SIGINT)
    on_term = signal.getsignal(signal.SIGTERM)

    def note(signum: int, frame: FrameType | None) -> None:
        _DRIVER_INTERRUPTED.set()
        if callable(on_int):  # always: note is installed only then
            on_int(signum, frame)

    def terminate(signum: int, frame: FrameType | None) -> None:
        _DRIVER_INTERRUPTED.set()
        raise Terminated()

    _DRIVER_INTERRUPTED.clear()
    if callable(on_int):
        signal.signal(signal.SIGINT, note)
    if on_term is signal.SIG_DFL:
        signal.signal(signal.SIGTERM, terminate)
    try:
        yield
    finally:
        if callable(on_int):
            signal.signal(signal.SIGINT, on_int)
        if on_term is signal.SIG_DFL:
            signal.signal(signal.SIGTERM, on_term)


def dask_setup(worker: object) -> None:
    """Dask's preload hook, run in each LocalCluster worker process as it starts: ignore SIGINT,
    which a terminal's Ctrl-C sends its whole process group (the driver closes the workers), and
    keep the heartbeat that fails while the driver closes the scheduler off the terminal."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    logging.getLogger("distributed.worker").addFilter(not_a_lost_heartbeat)


def not_a_lost_heartbeat(record: logging.LogRecord) -> bool:
    """False for a worker's heartbeat that found no scheduler (a traceback, logged when the driver
    closes the scheduler before this worker, as at Ctrl-C; the driver reports a lost scheduler
    itself)."""
    return not record.getMessage().startswith("Failed to communicate with scheduler during "
                                              "heartbeat")
