"""Errors a user can cause, each carrying where in which file it was found.

`StudyError` gathers every problem of a file so the command line can print them all at once as
``FILE:LINE:COL: path.to.key: message`` and exit with status 2.
"""

from __future__ import annotations

import os
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from studyrun.core.paths import within
from studyrun.core.text import cut_values


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


def outside(file: str | Path, folder: Path) -> bool:
    """True when `file` exists and lies outside `folder` once links are followed (a study's
    `../x.csv`, or a link to /etc/passwd): an error may name such a file, never quote it."""
    try:
        path = Path(file).resolve()
        return path.exists() and not within(path, folder)
    except (OSError, RuntimeError, ValueError):  # a loop of links, a name too long
        return True


class NamedOnly(Problem):
    """The mistakes of a file outside the study's folder, named and never quoted."""


def named_only(problems: list[Problem], folder: Path) -> list[Problem]:
    """`problems` with those located in a file outside `folder` replaced by one line per file
    that names it and where, never what it holds (it may be a private file a study links to)."""
    kept: list[Problem] = []
    hidden: dict[str, list[Problem]] = {}
    for problem in problems:
        if problem.file and not isinstance(problem, NamedOnly) and outside(problem.file, folder):
            hidden.setdefault(problem.file, []).append(problem)
        else:
            kept.append(problem)
    for file, found in hidden.items():
        first, count = found[0], len(found)
        try:
            real = Path(file).resolve()
            target = f" ({real})" if real != Path(os.path.abspath(file)) else ""
        except (OSError, RuntimeError):
            target = ""
        kept.append(NamedOnly(
            f"{'a mistake' if count == 1 else f'{count} mistakes'} in this file{target}, not "
            f"shown: it lies outside the study's folder {folder}, and an error never quotes such "
            "a file (it may be private); open it at this line to see what is wrong",
            file=file, line=first.line, col=first.col))
    return kept


@contextmanager
def named_only_outside(study: str | Path) -> Iterator[None]:
    """Within it, a StudyError's problems in files outside the study file's folder are named
    only (`named_only`): what the command line and the Python API raise for a study."""
    try:
        yield
    except StudyError as error:
        raise StudyError(named_only(error.problems, Path(study).resolve().parent)) from None
