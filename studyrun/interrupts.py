"""Tells an exit a model asks for (sys.exit, a KeyboardInterrupt it raises: that run fails) from a
Ctrl-C of the driver (the study stops), which reaches a model running in the driver's main thread
as the same KeyboardInterrupt. A SIGTERM (what a batch system sends a driver job at its walltime
or on scancel) stops the study the same way, so its clusters and batch jobs are closed too.
"""

from __future__ import annotations

import signal
import threading
from contextlib import contextmanager
from typing import Iterator

_DRIVER_INTERRUPTED = threading.Event()


class Terminated(KeyboardInterrupt):
    """A SIGTERM to the driver while a study executes: unwinds as a Ctrl-C does."""


def fails_the_run(error: BaseException) -> bool:
    """Whether an exception escaping the model is that run's failure rather than a stop of the
    study: anything but a KeyboardInterrupt after a SIGINT to this process."""
    return not (isinstance(error, KeyboardInterrupt) and _DRIVER_INTERRUPTED.is_set())


@contextmanager
def noting_interrupts() -> Iterator[None]:
    """While a study executes, mark a SIGINT to this process before its handler raises."""
    previous = signal.getsignal(signal.SIGINT)
    if threading.current_thread() is not threading.main_thread() or not callable(previous):
        yield  # only the main thread receives signals; an ignored SIGINT raises nothing
        return

    def note(signum, frame):
        _DRIVER_INTERRUPTED.set()
        previous(signum, frame)

    def terminate(signum, frame):
        _DRIVER_INTERRUPTED.set()
        raise Terminated()

    _DRIVER_INTERRUPTED.clear()
    signal.signal(signal.SIGINT, note)
    on_term = signal.getsignal(signal.SIGTERM)
    if on_term is signal.SIG_DFL:
        signal.signal(signal.SIGTERM, terminate)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        if on_term is signal.SIG_DFL:
            signal.signal(signal.SIGTERM, on_term)
