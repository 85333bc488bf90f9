"""Errors a user can cause, each carrying where in which file it was found.

`StudyError` gathers every problem of a file so the command line can print them all at once as
``FILE:LINE:COL: path.to.key: message`` and exit with status 2.
"""

from __future__ import annotations

import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .text import cut_values


@dataclass(frozen=True)
class Problem:
    """One mistake in a study: where it is and what is wrong."""

    message: str
    path: str = ""
    file: str | None = None
    line: int | None = None
    col: int | None = None

    def __post_init__(self) -> None:  # a 5,000-digit value or a 1 MB key is cut, wherever it came from
        object.__setattr__(self, "message", cut_values(self.message))
        object.__setattr__(self, "path", cut_values(self.path))

    def __str__(self) -> str:
        where = ":".join(str(part) for part in (self.file, self.line, self.col) if part is not None)
        head = f"{where}: " if where else ""
        key = f"{self.path}: " if self.path else ""
        return f"{head}{key}{self.message}"


class StudyrunError(Exception):
    """Base of the errors studyrun reports to a user without a traceback (exit status 1)."""


class StudyError(StudyrunError):
    """A study file (or its data or model file) is invalid; holds every problem found (exit 2)."""

    def __init__(self, problems: list[Problem] | str, **where: Any) -> None:
        if isinstance(problems, str):
            problems = [Problem(problems, **where)]
        self.problems = list(problems)
        super().__init__("\n".join(str(p) for p in self.problems))


class StoreError(StudyrunError):
    """The run store cannot be used: locked by another process, corrupted, or of another study."""


class ExecutionError(StudyrunError):
    """The study could not be executed: a lost scheduler, an aborted study, an unwritable folder."""


def describe(error: BaseException) -> str:
    """A one-line message for a failed run: the exception and where in user code it came from."""
    frames = traceback.extract_tb(error.__traceback__)
    where = f" (at {Path(frames[-1].filename).name}:{frames[-1].lineno})" if frames else ""
    if isinstance(error, SystemExit):
        code = "" if error.code is None else repr(error.code)
        return f"the model called sys.exit({code}){where}"
    if isinstance(error, KeyboardInterrupt):
        return f"the model raised KeyboardInterrupt{where}"
    return f"{type(error).__name__}: {error}{where}"
