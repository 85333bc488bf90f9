"""A surrogate's training runs: those it asked for, or those of another study's results folder
(`from:`), read from its runs.csv after its analysis.json is checked against its study.yaml."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ...core.design import Outcome
from ...core.errors import Problem, StudyError, StudyrunError
from ...core.runtable import RESERVED
from ...core.text import suggest
from ...outputs import Finished, read_finished
from ..base import StudyContext

WHERE = "from"


@dataclass(frozen=True)
class Training:
    """Training inputs (natural units, one row per run) and each quantity's values (NaN where
    the run failed); `earlier` of the rows came from another folder."""

    x: np.ndarray
    values: dict[str, np.ndarray]
    earlier: int = 0

    @classmethod
    def of(cls, outcome: Outcome) -> "Training":
        return cls(outcome.design.matrix, {name: np.where(outcome.ok, v, np.nan)
                                           for name, v in outcome.values.items()})

    @property
    def size(self) -> int:
        return len(self.x)

    @property
    def quantities(self) -> list[str]:
        return list(self.values)

    def rows(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        """The inputs and values of the runs that gave the quantity a finite value."""
        values = self.values[name]
        keep = np.isfinite(values)
        return self.x[keep], values[keep]

    def extended(self, outcome: Outcome) -> "Training":
        more = Training.of(outcome)
        return Training(np.vstack([self.x, more.x]),
                        {name: np.concatenate([v, more.values.get(name, np.full(more.size, np.nan))])
                         for name, v in self.values.items()}, self.earlier)


def read_earlier(name: str, context: StudyContext) -> Finished:
    """The folder `from:` names, checked (its analysis.json belongs to its study.yaml), with a
    runs.csv to train on."""
    folder = context.path(name).resolve()
    try:
        earlier = read_finished(folder)
    except (StudyrunError, OSError) as error:
        raise StudyError(str(getattr(error, "strerror", None) or error), path=WHERE) from None
    if not (folder / "runs.csv").is_file():
        raise StudyError(f"{folder} has no runs.csv to train on", path=WHERE)
    return earlier


def _columns(folder: Path) -> list[str]:
    with open(folder / "runs.csv", encoding="utf-8") as handle:
        return handle.readline().rstrip("\r\n").split(",")


def training_problems(name: str, context: StudyContext) -> list[Problem]:
    """The folder exists and holds finished results, with a column for every varied parameter
    and every quantity of this study."""
    try:
        earlier = read_earlier(name, context)
    except StudyError as error:
        return error.problems
    columns = _columns(earlier.folder)
    problems = []
    for parameter in context.varied:
        if parameter not in columns:
            problems.append(Problem(
                f"{earlier.folder}'s runs do not vary {parameter!r}{suggest(parameter, columns)}; "
                "a surrogate trains on runs of the same parameters", WHERE))
    for quantity in context.quantities or {}:
        if quantity not in columns:
            problems.append(Problem(f"{earlier.folder}'s runs have no quantity {quantity!r}"
                                    f"{suggest(quantity, columns)}", WHERE))
    return problems


def earlier_runs(name: str, context: StudyContext) -> Training:
    """The other folder's runs: varied parameters as inputs, this study's quantities (without a
    quantities block, every quantity column there) as values; failed runs count as failed."""
    import pandas

    earlier = read_earlier(name, context)
    table = pandas.read_csv(earlier.folder / "runs.csv", keep_default_na=False, na_values=[""],
                            dtype={"error": object, "worker": object})
    names = list(context.varied)
    quantities = list(context.quantities or [c for c in table.columns
                                             if c not in RESERVED and c not in names
                                             and c not in context.parameters])
    ok = (table["status"] == "ok").to_numpy() if "status" in table else np.ones(len(table), bool)
    values = {}
    for q in quantities:
        column = pandas.to_numeric(table[q], errors="coerce").to_numpy(dtype=float)
        values[q] = np.where(ok, column, np.nan)
    x = table[names].to_numpy(dtype=float)
    return Training(x, values, earlier=len(x))
