"""The runs of a finished results folder, read exactly: inputs as its store recorded them (bit for
bit, not re-read from text), in the order of its plan (runs.csv's `run.index` column), for a study that
grows the earlier one's design."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from studyrun.core.csv_table import read_table
from studyrun.core.errors import StudyrunError
from studyrun.core.runtable import CSV_FIXED, LEGACY_FIXED
from studyrun.core.text import quote
from studyrun.store.run_store import RunStore

_INTEGER = re.compile(r"[-+]?[0-9]{1,19}")


@dataclass(frozen=True)
class FinishedRuns:
    """Every planned run of a finished study: its identity, inputs and whether it succeeded."""

    names: list[str]  # the varied parameters, in the store's order
    ids: np.ndarray  # int64, plan order
    inputs: np.ndarray  # (runs, parameters), natural units
    ok: np.ndarray  # bool


def read_finished_runs(folder: Path) -> FinishedRuns:
    """The runs of a results folder in plan order; StudyrunError where the folder lacks them, a
    StudyError located in runs.csv where it is damaged."""
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
    """The run identities of runs.csv, sorted by their position in the plan; a StudyError at
    the line and column of a cell that is not what studyrun writes."""
    table = read_table(path, check_separators=False)
    if table.header[:2] not in (list(CSV_FIXED[:2]), list(LEGACY_FIXED[:2])):
        raise table.fail(table.header_line, 1, "not a runs.csv of studyrun: its header starts "
                         f"{', '.join(map(repr, table.header[:2]))}, not 'run.index', 'run.id'")
    pairs = []
    for line, row in table.rows:
        if len(row) < 2:
            raise table.fail(line, 1, "a run's line without its `run.index` and `run.id` cells")
        (run, _), (run_id, col) = row[0], row[1]
        for text, where, what in ((run, 1, "run.index"), (run_id, col, "run.id")):
            if not _INTEGER.fullmatch(text) or not -2**63 <= int(text) < 2**63:
                raise table.fail(line, where, f"`{what}` is {quote(text)}, not an integer "
                                 "(runs.csv of studyrun holds a run's plan position and identity "
                                 "there)")
        pairs.append((int(run), int(run_id)))
    return [run_id for _, run_id in sorted(pairs)]
