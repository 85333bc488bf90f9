"""The planned runs of a fixed design, gathered for the analyse and report steps.

A design of one chunk is gathered in memory as its batches are recorded (runs reused from an
earlier session are read from the store once), so analysis, report and runs.csv never read back
what was just written. A larger design is registered in the store slice by slice and read back
in chunks, so memory does not grow with the number of runs. Series are read back only for an
analysis that reads them, whole when they are small, else a chunk of runs at a time.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import numpy as np

from ..core.design import Design, Outcome
from ..core.runtable import RunTable, Sink
from ..grids import CommonGrid, common_grid, put_on_grid, put_on_one_grid
from ..quantities import Quantities, series_output
from ..runs_csv import write_csv
from ..store import RunStore
from . import Plan

CHUNK_ROWS = 1 << 20  # runs per slice of a design (a fixed number: results never depend on it)
STREAM_ROWS = 1 << 16  # runs per slice of a column streamed from the store
SERIES_CHUNK_BYTES = 128 << 20  # series read back at once, at most, when read in chunks


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
        self._series_read = False  # whether _whole holds the series asked for

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

    def whole(self, series: bool = True) -> Outcome:
        """All runs at once (a design that fit one chunk keeps its Design object and info),
        with the series asked for unless `series` is False (then they may be there or not)."""
        if not self.chunked:
            if self._whole is None:
                self._whole = plan_outcome(self._first, self._table, self.store, {}, self.grid)
            if series and self.series and not self._series_read:
                read_series(self._first.run_ids, self.store, self._whole, self.series, self.grid)
                self._series_read = True
            return self._whole
        outcomes = list(self.chunks())
        design = Design(self.names, np.vstack([o.design.matrix for o in outcomes]), self.info)
        return Outcome(design, {q: np.concatenate([o.values[q] for o in outcomes])
                                for q in self.store.quantities},
                       np.concatenate([o.ok for o in outcomes]))

    def first(self) -> Outcome:
        """The first chunk of runs (all of them for a small design), e.g. for figures (which
        draw no series: they are there only if the analysis read them)."""
        return self.whole(series=False) if not self.chunked else next(self.chunks())

    @property
    def series_in_chunks(self) -> bool:
        """Whether the series asked for, read whole, would take more than a chunk of them."""
        return bool(self.series) and self.series_bytes() > SERIES_CHUNK_BYTES

    def series_bytes(self) -> int:
        """What the series asked for take in memory read whole (the longest stored grid's)."""
        return 8 * self.size * len(self.series) * self.store.series_reader().longest()

    def series_chunks(self, multiple: int = 1) -> Iterator[Outcome]:
        """The runs in plan order with the series asked for on one grid, a chunk of a multiple
        of `multiple` runs at a time, SERIES_CHUNK_BYTES of series at most (a multiple at least)."""
        reader = self.store.series_reader()
        outputs = set(self.series.values())
        common = self._common_grid(reader)
        per_run = 8 * max(1, len(self.series)) * max(1, reader.longest())
        rows = max(1, SERIES_CHUNK_BYTES // per_run // multiple) * multiple
        for _, table in self.tables():
            for offset in range(0, len(table.ids), rows):
                part = table.take(slice(offset, offset + rows))
                outcome = Outcome(Design(self.names, part.inputs, self.info),
                                  columns(part, self.store), part.ok)
                if common is not None:
                    put_on_grid(outcome, reader.read(part.ids, outputs), self.series, common)
                yield outcome

    def _common_grid(self, reader) -> CommonGrid | None:
        """The one grid of every planned run's series, from their grids alone."""
        grids, ok, ids = [], [], []
        for _, table in self.tables():
            grids += reader.grids(table.ids)
            ok.append(table.ok)
            ids.append(table.ids)
        return common_grid(grids, np.concatenate(ok), np.concatenate(ids), self.grid)

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
        read_series(plan.run_ids, store, outcome, series, grid)
    return outcome


def columns(table: RunTable, store: RunStore) -> dict[str, np.ndarray]:
    """A table's quantities by name."""
    return {name: table.values[:, j] for j, name in enumerate(store.quantities)}


def read_series(run_ids: np.ndarray, store: RunStore, outcome: Outcome, wanted: dict[str, str],
                grid: np.ndarray | None = None) -> None:
    """Fill outcome.series[name] (runs, T) from the stored series of each run, on one grid
    (`grid`, when the runs' own grids differ and the analysis declares one); NaN where absent."""
    stored = store.series_reader().read(run_ids, set(wanted.values()))
    put_on_one_grid(outcome, stored, run_ids, wanted, grid)


def series_wanted(quantities: Quantities, analysis, context) -> dict[str, str]:
    """Series to read back per run: the outputs an analysis needs, and the series() quantities
    when it reads them (others keep them in the store only)."""
    wanted = ({name: series_output(quantities.compiled[name]) for name in quantities.series_names}
              if analysis.reads_series_quantities else {})
    wanted.update({name: name for name in analysis.needs_series(context)})
    return wanted


def series_kept(quantities: Quantities, analysis, context) -> tuple[str, ...]:
    """The model outputs whose series the store keeps: those of the series() quantities and
    those the analysis needs."""
    kept = [series_output(quantities.compiled[name]) for name in quantities.series_names]
    return tuple(sorted(set(kept) | set(analysis.needs_series(context))))


def read_outcome(plan: Plan, store: RunStore, quantities: Quantities, analysis,
                 context, series: bool = True) -> Outcome:
    """One plan's quantities from the store, in plan order, with the series asked for (none
    when `series` is False: a report draws none)."""
    wanted = series_wanted(quantities, analysis, context) if series else {}
    return plan_outcome(plan, store.read(plan.run_ids, plan.design.matrix), store, wanted,
                        analysis.series_grid(context))
