"""A model's own prints reach the terminal escaped, as other model text does (`terminal_safe`).

Python models run in the driver (sync, threads), in its child process and in Dask workers, all
writing to the terminal the driver was started from; `escaped_prints` makes what the model's
thread writes to sys.stdout and sys.stderr show control characters as escapes, while the
driver's own output (its progress bar redraws with a carriage return) passes as it is. Output
written below Python's streams (a C library's printf, a program the model starts) is not seen.
"""

from __future__ import annotations

import sys
import threading
from contextlib import contextmanager
from typing import Any, Iterable, Iterator, TextIO

from studyrun.core.text import terminal_safe

_INSIDE = threading.local()  # .depth: how many escaped_prints blocks this thread is in
_LOCK = threading.Lock()
_BLOCKS = 0  # escaped_prints blocks open in all threads: the streams are wrapped while any is


class _Escaping:
    """sys.stdout or sys.stderr, escaping what a thread inside escaped_prints writes."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        if getattr(_INSIDE, "depth", 0) and isinstance(text, str):
            self._stream.write(terminal_safe(text))
            return len(text)
        return self._stream.write(text)

    def writelines(self, lines: Iterable[str]) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> Any:  # flush, fileno, isatty, encoding, ...
        return getattr(self._stream, name)


@contextmanager
def escaped_prints() -> Iterator[None]:
    """While the block runs, what this thread prints to sys.stdout and sys.stderr has its
    control characters (ESC, BEL, \\r, ...) shown as escapes; newlines and tabs are kept."""
    global _BLOCKS
    with _LOCK:
        if _BLOCKS == 0:
            for name in ("stdout", "stderr"):
                stream = getattr(sys, name)
                if stream is not None and not isinstance(stream, _Escaping):
                    setattr(sys, name, _Escaping(stream))
        _BLOCKS += 1
    _INSIDE.depth = getattr(_INSIDE, "depth", 0) + 1
    try:
        yield
    finally:
        _INSIDE.depth -= 1
        with _LOCK:
            _BLOCKS -= 1
            if _BLOCKS == 0:
                for name in ("stdout", "stderr"):
                    stream = getattr(sys, name)
                    if isinstance(stream, _Escaping):
                        setattr(sys, name, stream._stream)
