"""The planned runs of a fixed design, gathered for the analyse and report steps.

A design of one chunk is gathered in memory as its batches are recorded (runs reused from an
earlier session are read from the store once), so analysis, report and runs.csv never read back
what was just written. A larger design is registered in the store slice by slice and read back
in chunks, so memory does not grow with the number of runs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import numpy as np

from ..core.design import Design, Outcome
from ..core.runtable import RunTable, Sink
from ..grids import put_on_one_grid
from ..quantities import Quantities, series_output
from ..runs_csv import write_csv
from ..store import RunStore
from . import Plan

CHUNK_ROWS = 1 << 20  # runs per slice of a design (a fixed number: results never depend on it)
STREAM_ROWS = 1 << 16  # runs per slice of a column streamed from the store


class PlannedRuns:
    """Every run of a study's plan, in plan order, with what the store recorded for it."""

    def __init__(self, store: RunStore, names: list[str], series: dict[str, str],
                 grid: np.ndarray | None = None) -> None:
        self.store, self.names, self.series, self.grid = store, names, series, grid
        self.size = 0
        self._start = 0  # position of the latest slice
        self.info: dict = {}
        self._first: Plan | None = None  # the first slice, while it is the only one
        self._table: RunTable | None = None  # its runs, gathered in memory
        self._whole: Outcome | None = None

    def add(self, plan: Plan) -> Sink | None:
        """Register the next slice of the plan; returns where the runner puts its records."""
        if self.size == 0:
            self.info = dict(plan.design.info)
            self._first = plan
            self._table = RunTable.blank(plan.run_ids, plan.design.matrix, len(self.store.quantities))
            sink = self._table.put
        else:
            if self._first is not None:  # a second slice: the design is read back in chunks
                self.store.add_planned(0, self._first.run_ids)
                self._first = self._table = None
            sink = None
        self._start = self.size
        self.size += plan.size
        return sink

    def settle(self, plan: Plan) -> None:
        """After the slice ran: fill in the runs recorded before, or register the slice."""
        if self._first is plan:
            missing = np.flatnonzero(~self._table.found)
            if len(missing):
                self._table.put(missing, self.store.read(plan.run_ids[missing]))
        else:
            self.store.add_planned(self._start, plan.run_ids)

    @property
    def chunked(self) -> bool:
        return self._first is None

    def whole(self) -> Outcome:
        """All runs at once (a design that fit one chunk keeps its Design object and info)."""
        if not self.chunked:
            if self._whole is None:
                self._whole = plan_outcome(self._first, self._table, self.store, self.series,
                                           self.grid)
            return self._whole
        outcomes = list(self.chunks())
        design = Design(self.names, np.vstack([o.design.matrix for o in outcomes]), self.info)
        return Outcome(design, {q: np.concatenate([o.values[q] for o in outcomes])
                                for q in self.store.quantities},
                       np.concatenate([o.ok for o in outcomes]))

    def first(self) -> Outcome:
        """The first chunk of runs (all of them for a small design), e.g. for figures."""
        return self.whole() if not self.chunked else next(self.chunks())

    def chunks(self) -> Iterator[Outcome]:
        """The runs slice by slice, from the store."""
        for _, table in self.tables():
            yield Outcome(Design(self.names, table.inputs, self.info), columns(table, self.store), table.ok)

    def tables(self) -> Iterator[tuple[int, RunTable]]:
        """(first position, runs) slice by slice: the whole table when it is in memory."""
        if not self.chunked:
            yield 0, self._table
            return
        rows = CHUNK_ROWS
        for start in range(0, self.size, rows):
            yield start, self.store.read_planned(start, min(start + rows, self.size))

    def succeeded(self) -> int:
        return int(self._table.ok.sum()) if not self.chunked else self.store.planned_succeeded()

    def stream(self, names: list[str], order_by: str | None = None) -> Iterator[np.ndarray]:
        """Columns of a chunked design's runs, a slice at a time, in plan order or ordered by one
        of them (see RunStore.stream_planned)."""
        return self.store.stream_planned(names, order_by, rows=min(CHUNK_ROWS, STREAM_ROWS))

    def write_csv(self, path: Path) -> None:
        write_csv(path, self.names, self.store.quantities, self.tables())


def plan_outcome(plan: Plan, table: RunTable, store: RunStore, series: dict[str, str],
                 grid: np.ndarray | None = None) -> Outcome:
    """A plan's quantities (and the series asked for, on one grid), in plan order."""
    outcome = Outcome(design=plan.design, ok=table.ok, values=columns(table, store))
    if series:
        read_series(plan, store, outcome, series, grid)
    return outcome


def columns(table: RunTable, store: RunStore) -> dict[str, np.ndarray]:
    """A table's quantities by name."""
    return {name: table.values[:, j] for j, name in enumerate(store.quantities)}


def read_series(plan: Plan, store: RunStore, outcome: Outcome, wanted: dict[str, str],
                grid: np.ndarray | None = None) -> None:
    """Fill outcome.series[name] (runs, T) from the stored series of each run, on one grid
    (`grid`, when the runs' own grids differ and the analysis declares one); NaN where absent."""
    stored = [store.read_series(run_id) for run_id in plan.run_ids.tolist()]
    put_on_one_grid(outcome, stored, plan.run_ids, wanted, grid)


def series_wanted(quantities: Quantities, analysis, context) -> dict[str, str]:
    """Series to read back per run: series() quantities and the outputs an analysis needs."""
    wanted = {name: series_output(quantities.compiled[name]) for name in quantities.series_names}
    wanted.update({name: name for name in analysis.needs_series(context)})
    return wanted


def read_outcome(plan: Plan, store: RunStore, quantities: Quantities, analysis,
                 context) -> Outcome:
    """One plan's quantities from the store, in plan order, with the series asked for."""
    return plan_outcome(plan, store.read(plan.run_ids, plan.design.matrix), store,
                        series_wanted(quantities, analysis, context), analysis.series_grid(context))
