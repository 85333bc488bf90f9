"""What a run's identity covers beyond its parameter values, and what changed since a last run.

Runs share a context: the model block, the quantities, the fixed inputs and the content (SHA-256)
of every file the model depends on: a python model's imported modules, a command model's program,
the files its argv names and its template, a pysd model's file, and `execution.depends_on`. Files
are named by their path relative to the study folder (outside it: a module by its path in its
package, any other file by its absolute path), so a study folder moved or copied elsewhere keeps
its runs' identities.
"""

from __future__ import annotations

import glob
import hashlib
import json
import os
from pathlib import Path

from studyrun.core.errors import Problem, StudyrunError

_BLOCK = 1 << 20


def file_digest(path: Path) -> str:
    """The SHA-256 of a file's content, read a block at a time (a container image may be large)."""
    digest = hashlib.sha256()
    try:
        with open(path, "rb") as handle:
            for block in iter(lambda: handle.read(_BLOCK), b""):
                digest.update(block)
    except OSError as error:
        raise StudyrunError(f"{path}: cannot read a file the runs depend on: "
                            f"{error.strerror or error}") from None
    return digest.hexdigest()


def text_digest(value) -> str:
    """The SHA-256 of a value's canonical JSON (sorted keys)."""
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()


def file_name(path: Path | str, study_dir: Path) -> str:
    """A file's name in an identity: its path relative to the study folder, else its absolute path."""
    path = Path(os.path.abspath(path))
    for folder in {Path(os.path.abspath(study_dir)), Path(study_dir).resolve()}:
        if path.is_relative_to(folder):
            return path.relative_to(folder).as_posix()
    return str(path)


def matched_files(pattern: str, study_dir: Path) -> list[Path]:
    """The files a `depends_on` entry names: a path or glob relative to the study folder (`**`
    for any depth); folders are skipped (`data/**` names every file under data/)."""
    return sorted(path for path in matches(pattern, study_dir) if path.is_file())


def matches(pattern: str, study_dir: Path):
    """The paths a glob matches, one at a time (none for a pattern no file system takes)."""
    try:
        for match in glob.iglob(pattern, root_dir=study_dir, recursive=True):
            yield Path(study_dir, match)
    except ValueError:  # a NUL byte
        return


def check_depends_on(patterns: list[str], study_dir: Path) -> list[Problem]:
    """A `depends_on` entry that names no file is a mistake (a typo would silently cover nothing)."""
    problems = []
    for index, pattern in enumerate(patterns):
        if not any(path.is_file() for path in matches(pattern, study_dir)):
            folder = any(path.is_dir() for path in matches(pattern, study_dir))
            hint = (f"it names a folder: write {pattern.rstrip('/')}/** for every file in it"
                    if folder else "give the path or glob of files the model reads, e.g. data/*.csv")
            shown = pattern if len(pattern) <= 80 else f"{pattern[:77]}..."
            problems.append(Problem(f"no file matches {shown!r} (relative to the study folder "
                                    f"{study_dir}); {hint}", path=f"depends_on[{index}]"))
    return problems


def dependency_files(study, study_dir: Path, run_code: bool = True) -> dict[str, Path]:
    """Every file the runs depend on, by its name in the identity; without `run_code`, those
    found without running the study's code (a python model's imports read from its source)."""
    model = study.model_spec
    files = dict(model.dependencies(study_dir) if run_code else model.static_dependencies(study_dir))
    for pattern in study.execution.depends_on:
        files.update((file_name(path, study_dir), path) for path in matched_files(pattern, study_dir))
    return files


def dependency_digests(study, study_dir: Path, run_code: bool = True) -> dict[str, str]:
    """name -> SHA-256 of every file the runs depend on, in name order."""
    files = dependency_files(study, study_dir, run_code)
    return {name: file_digest(files[name]) for name in sorted(files)}


def code_digest(digests: dict[str, str]) -> str:
    """One digest of the files' digests; with no files, that of no bytes (what earlier versions
    hashed for a model without files), so such a study's earlier runs are still reused."""
    return hashlib.sha256(text_digest(digests).encode() if digests else b"").hexdigest()


def identity_parts(model, quantities: dict[str, str] | None, fixed: dict[str, float],
                   digests: dict[str, str]) -> dict:
    """What a store remembers of the context its runs were made in, to say later what changed."""
    return {"model": text_digest(model.model_dump(mode="json")),
            "quantities": text_digest(quantities), "fixed": fixed, "files": digests}


def describe_changes(before: dict, now: dict) -> list[str]:
    """What differs between two remembered contexts, in words: 'helpers.py changed', ..."""
    changes = [f"the {part} block changed" if part == "model" else f"the {part} changed"
               for part in ("model", "quantities") if before.get(part) != now.get(part)]
    seeds = before.get("seed"), now.get("seed")  # recorded for models that draw random numbers
    if seeds[0] != seeds[1]:
        changes.append("the seed changed" if None not in seeds else
                       "the runs draw random numbers from the seed now" if seeds[0] is None else
                       "the runs no longer draw random numbers")
    if before.get("quantities") == now.get("quantities") and before.get("meaning") != now.get("meaning"):
        changes.append("what mean() and windowed reductions compute changed (mean() is now the "
                       "time average, and a window's ends are interpolated)")
    old_fixed, new_fixed = before.get("fixed", {}), now.get("fixed", {})
    changes += [f"fixed parameter {name} changed" for name in sorted(set(old_fixed) | set(new_fixed))
                if old_fixed.get(name) != new_fixed.get(name)]
    old, new = before.get("files", {}), now.get("files", {})
    changes += [f"{name} changed" for name in sorted(set(old) & set(new)) if old[name] != new[name]]
    changes += [f"{name} is new" for name in sorted(set(new) - set(old))]
    changes += [f"{name} is no longer used" for name in sorted(set(old) - set(new))]
    return changes
