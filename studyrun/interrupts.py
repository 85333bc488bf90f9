"""Tells an exit a model asks for (sys.exit, a KeyboardInterrupt it raises: that run fails) from a
Ctrl-C of the driver (the study stops), which reaches a model running in the driver's main thread
as the same KeyboardInterrupt.
"""

from __future__ import annotations

import signal
import threading
from contextlib import contextmanager
from typing import Iterator

_DRIVER_INTERRUPTED = threading.Event()


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

    _DRIVER_INTERRUPTED.clear()
    signal.signal(signal.SIGINT, note)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
