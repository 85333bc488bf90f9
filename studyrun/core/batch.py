"""What a model returns for a batch of runs, and where the batch runs.

A model evaluates a *batch* of runs at once: it receives a mapping from input name to a numpy
array (one entry per run) and returns scalars as 1-D arrays and time series as 2-D arrays on a
shared time grid, with a per-run error message (None for a run that succeeded). Runs whose grids
differ (a simulation that stops on an event) keep their own: the batch's series are then held in
groups of runs sharing a grid (`SeriesGroup`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

import numpy as np


@dataclass
class SeriesGroup:
    """The series of some runs of a batch that share one time grid."""

    rows: np.ndarray | slice  # the runs' positions in the batch (slice(None): all of them)
    time: np.ndarray | None  # shape (T,)
    series: dict[str, np.ndarray]  # name -> shape (runs, T)


@dataclass
class ModelOutput:
    """What a model returns for a batch of n runs."""

    n: int
    scalars: dict[str, np.ndarray] = field(default_factory=dict)  # name -> shape (n,)
    series: dict[str, np.ndarray] = field(default_factory=dict)  # name -> shape (n, T)
    time: np.ndarray | None = None  # shape (T,), the grid shared by every series
    errors: list[str | None] = field(default_factory=list)  # len n; None where the run succeeded
    groups: list[SeriesGroup] = field(default_factory=list)  # when grids differ (then `series`
    # and `time` are unset): the runs with series, by grid; a failed run may be in none

    def __post_init__(self) -> None:
        if not self.errors:
            self.errors = [None] * self.n

    def fail(self, index: int, message: str) -> None:
        """Mark one run failed, keeping the first message it got."""
        if self.errors[index] is None:
            self.errors[index] = message

    def series_groups(self) -> list[SeriesGroup]:
        """The runs' series by grid: one group of the whole batch when it shares `time`."""
        return self.groups or [SeriesGroup(slice(None), self.time, self.series)]

    def put_runs(self, runs: dict[int, tuple[np.ndarray, dict[str, np.ndarray]]]) -> None:
        """Set the series of per-run models from {run position: (time, {name: values})}: on one
        shared grid when every run has the same (NaN rows for the others), else by grid."""
        by_grid: dict[bytes, list[int]] = {}
        for i, (time, _) in runs.items():
            by_grid.setdefault(np.ascontiguousarray(time, dtype=float).tobytes(), []).append(i)
        names = list(dict.fromkeys(k for _, series in runs.values() for k in series))
        if len(by_grid) == 1:
            self.time = next(iter(runs.values()))[0]
            self.series = {k: stack(runs, range(self.n), k, len(self.time)) for k in names}
            return
        self.groups = [SeriesGroup(np.array(rows), runs[rows[0]][0],
                                   {k: stack(runs, rows, k, len(runs[rows[0]][0])) for k in names})
                       for rows in by_grid.values()]


def stack(runs: dict[int, tuple[np.ndarray, dict[str, np.ndarray]]], rows: Iterable[int], name: str,
          length: int) -> np.ndarray:
    """One output's rows for these runs; NaN for a run without it."""
    blank = np.full(length, np.nan)
    return np.array([runs[i][1].get(name, blank) if i in runs else blank for i in rows])


@dataclass(frozen=True)
class RunContext:
    """Where a batch runs: its runs' ids and the folder under which runs may keep working files."""

    run_ids: np.ndarray  # int64, shape (n,)
    workdir: Path | None = None  # results/<name>/work, or None when runs need no files


class Evaluator:
    """Base of a model's batch evaluator: a picklable callable built in the driver and shipped
    to workers. Its hooks tell the executor what the model needs without probing its type."""

    runs_user_code = False  # True when a crash of the user's code could end the calling process

    def __call__(self, inputs: dict[str, np.ndarray], context: RunContext) -> ModelOutput:
        raise NotImplementedError

    def prepare(self) -> None:
        """Import what the runs need, in the process where they run (before a pilot times runs)."""

    def with_code(self, digest: str) -> "Evaluator":
        """This evaluator for the user's files at `digest` (a new digest makes a long-lived
        worker import them afresh); itself when it imports none."""
        return self
