"""A surrogate's training runs: those it asked for, or those that exist (`from:` a CSV or another
study's results folder, read by analyses/given.py)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from studyrun.analyses.base import StudyContext
from studyrun.analyses.given import read_given
from studyrun.core.design import Outcome


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


def earlier_runs(name: str, context: StudyContext) -> Training:
    """The runs `from:` names (a CSV or another study's results folder, read by the shared
    reader): varied parameters as inputs, this study's quantities (without a quantities block,
    every output column) as values; failed runs count as failed."""
    rows = read_given(name, context)
    values, errors = rows.quantities(context.quantities, context.fixed)
    failed = np.array([e is not None for e in errors], dtype=bool)
    return Training(rows.inputs, {q: np.where(failed, np.nan, v) for q, v in values.items()},
                    earlier=rows.size)
