"""The files of a results folder besides the store: each written whole or not at all, cleared when
they would no longer belong to the folder's study.yaml, and checked against it when read back.

analysis.json records the sha256 of the study.yaml it was computed for (`study_yaml_sha256`), so
a reader can tell results of the study in the folder from leftovers of another one.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from studyrun.core.errors import StudyrunError

# What every run writes next to runs.sqlite; an analysis type declares its own files
# (`results_files`), which `claim` is given.
RESULTS = ("analysis.json", "report.md", "report.html", "runs.csv", "runs.parquet", "series.parquet",
           "figures")
# the report step's files, drawn from analysis.json and the runs (an analysis's own files too)
REPORT = ("report.md", "report.html", "figures")
PARTIAL = ".partial"  # the suffix of a file being written; its name starts with a dot
DIGEST_KEY = "study_yaml_sha256"


@contextmanager
def replacing(path: Path) -> Iterator[Path]:
    """A temporary file beside `path` to write, renamed onto `path` once the block ends without
    an error: a reader, a kill or a full disk never leaves half a file under the final name."""
    path = Path(path)
    temporary = path.with_name(f".{path.name}.{os.getpid()}{PARTIAL}")
    try:
        yield temporary
        with open(temporary, "rb+") as handle:
            os.fsync(handle.fileno())  # the bytes reach the disk before the name does
        os.replace(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)


def write_text(path: Path, text: str) -> None:
    """Write a text file atomically (see `replacing`)."""
    with replacing(path) as temporary:
        temporary.write_text(text)


def study_text(folder: Path) -> str | None:
    """The folder's study.yaml, or None when it has none."""
    try:
        return (Path(folder) / "study.yaml").read_text()
    except FileNotFoundError:
        return None


def study_digest(text: str) -> str:
    """The sha256 of a study copy's YAML: its `# run from PATH` line does not count, so the
    same study run from another place is the same study."""
    first, _, rest = text.partition("\n")
    body = rest if first.startswith("# run from ") else text
    return hashlib.sha256(body.encode()).hexdigest()


def clear(folder: Path, *, work: bool = False, files: tuple[str, ...] = (),
          only: tuple[str, ...] = RESULTS) -> None:
    """Remove the results of an earlier run, or `only` those of them, `files` (the analyses'
    own) too (and with `work`, the runs' working directories)."""
    folder = Path(folder)
    for name in (*only, *files, *(("work",) if work else ())):
        path = folder / name
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink(missing_ok=True)


def remove_partials(folder: Path) -> None:
    """Files a killed writer left half-written (they never had their final names)."""
    for partial in [*Path(folder).glob(f".*{PARTIAL}"), *Path(folder).glob(f"figures/.*{PARTIAL}")]:
        partial.unlink(missing_ok=True)


def claim(folder: Path, text: str, *, fresh: bool, files: tuple[str, ...] = ()) -> None:
    """Make the folder the study's before its runs: the results of another study there (with
    `fresh`, of any; `files`: the analyses' own besides RESULTS) are removed first, then
    study.yaml is written. Only a folder holding a study.yaml is a results folder: nothing is
    removed from any other."""
    old = study_text(folder)
    if old is not None and (fresh or study_digest(old) != study_digest(text)):
        clear(folder, work=fresh, files=files)
    remove_partials(folder)
    write_text(Path(folder) / "study.yaml", text)


def check(folder: Path, analysis: dict) -> None:
    """Refuse results whose analysis.json was not computed for the folder's study.yaml."""
    folder = Path(folder)
    text = study_text(folder)
    if text is None:
        return
    if analysis.get(DIGEST_KEY) != study_digest(text):  # (none recorded: not studyrun's)
        raise StudyrunError(
            f"{folder / 'analysis.json'}: belongs to another study than {folder / 'study.yaml'} "
            f"(left over from an earlier run); `studyrun run STUDY --out {folder}` writes the "
            "results of STUDY again (--fresh forgets its runs too)")


def read_analysis(folder: Path) -> dict:
    """analysis.json of a results folder, validated (results/analysis_file.py) and checked against its
    study.yaml: every reader of analysis.json comes here."""
    return _read(folder)[0]


def _read(folder: Path) -> tuple[dict, str]:
    """analysis.json as read_analysis gives it, and the sha256 of the bytes read."""
    from studyrun.results.analysis_file import parse

    folder = Path(folder)
    path = folder / "analysis.json"
    if folder.is_file():
        raise StudyrunError(f"{folder}: a file, not a results folder; give the folder a study's "
                            "run wrote (results/NAME, or the --out of its run)")
    if not path.is_file():
        finished = "" if study_text(folder) is None else (
            " (study.yaml is here: its run did not finish; run it again to resume)")
        raise StudyrunError(f"{folder}: no analysis.json here{finished}; is it a results folder "
                            "of a finished `studyrun run`?")
    analysis, digest = parse(folder)
    check(folder, analysis)
    return analysis, digest


@dataclass(frozen=True)
class Finished:
    """A finished results folder that another study builds on, and what identifies it."""

    folder: Path
    analysis: dict[str, Any]
    analysis_sha256: str

    def provenance(self) -> dict[str, str]:
        """The folder as analysis.json's provenance names what a study rests on."""
        return {"folder": str(self.folder), "study": str(self.analysis.get("study", "")),
                "study_yaml_sha256": str(self.analysis.get("study_yaml_sha256", "")),
                "analysis_json_sha256": self.analysis_sha256}


def read_finished(folder: Path) -> Finished:
    """A results folder's checked analysis.json and its digest (StudyrunError or OSError)."""
    analysis, digest = _read(folder)
    return Finished(Path(folder), analysis, digest)
