"""The runs of a finished results folder, read exactly: inputs as its store recorded them (bit for
bit, not re-read from text), in the order of its plan (runs.csv's `run` column), for a study that
grows the earlier one's design."""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .core.errors import StudyrunError
from .store import RunStore


@dataclass(frozen=True)
class FinishedRuns:
    """Every planned run of a finished study: its identity, inputs and whether it succeeded."""

    names: list[str]  # the varied parameters, in the store's order
    ids: np.ndarray  # int64, plan order
    inputs: np.ndarray  # (runs, parameters), natural units
    ok: np.ndarray  # bool


def read_finished_runs(folder: Path) -> FinishedRuns:
    """The runs of a results folder in plan order; StudyrunError where the folder lacks them."""
    folder = Path(folder)
    order = _plan_order(folder / "runs.csv")
    path = folder / "runs.sqlite"
    if not path.is_file():
        raise StudyrunError(f"{folder}: no runs.sqlite here to read the earlier runs from")
    ids = np.array(order, dtype=np.int64)
    with RunStore.open_readonly(path) as store:
        table = store.read(ids)
    if not table.found.all():
        raise StudyrunError(f"{folder}: runs.csv lists {int((~table.found).sum())} runs its "
                            "runs.sqlite does not hold; run the earlier study again to finish it")
    return FinishedRuns(list(store.parameters), ids, table.inputs, table.ok)


def _plan_order(path: Path) -> list[int]:
    """The run identities of runs.csv, sorted by their position in the plan."""
    try:
        with open(path, newline="", encoding="utf-8") as handle:
            reader = csv.reader(handle)
            header = next(reader, [])
            if header[:2] != ["run", "id"]:
                raise StudyrunError(f"{path}: not a runs.csv of studyrun (its header does not "
                                    "start with run,id)")  # never quoted: it may be any file
            pairs = sorted((int(row[0]), int(row[1])) for row in reader if row)
    except OSError as error:
        raise StudyrunError(f"{path}: cannot read it ({error.strerror})") from None
    return [run_id for _, run_id in pairs]
