"""The planned runs of a fixed design, gathered for the analyse and report steps.

Each slice of the plan, once executed, is registered by where the store recorded each of its
runs (its seq): analyses, the report and runs.csv then read the runs back from the store, all at
once for a design of one slice, chunk by chunk or a column at a time for a larger one, so memory
follows the chunk (and a few numbers per run), not the width of every run times their number.
Series are read back only for an analysis that reads them: whole when they are small, else
a chunk of runs at a time.
"""

from __future__ import annotations

from typing import Iterator

import numpy as np

from studyrun.blocks.quantities import Quantities, series_output
from studyrun.core.design import Design, Outcome
from studyrun.core.runtable import RunTable
from studyrun.plan import Plan
from studyrun.plan.grids import CommonGrid, common_grid, put_on_grid, put_on_one_grid
from studyrun.store.run_store import RunStore

CHUNK_ROWS = 1 << 20  # runs per slice of a design (a fixed number: results never depend on it)
SERIES_CHUNK_BYTES = 64 << 20  # series read back at once, at most, when read in chunks


class PlannedRuns:
    """Every run of a study's plan, in plan order, with what the store recorded for it."""

    def __init__(self, store: RunStore, names: list[str], series: dict[str, str],
                 grid: np.ndarray | None = None) -> None:
        self.store, self.names, self.series, self.grid = store, names, series, grid
        self.size = self.slices = 0
        self.info: dict = {}
        self._first: Plan | None = None  # the first slice, kept while it is the only one
        self._seqs: list[np.ndarray] = []  # each slice's records, 0 where the store has none
        self._ok: list[np.ndarray] = []
        self._whole: Outcome | None = None
        self._series_read = False  # whether _whole holds the series asked for

    def add(self, plan: Plan, located: tuple[np.ndarray, np.ndarray] | None = None) -> None:
        """Register the next slice of the plan, after it ran (where the store recorded each of
        its runs and whether it succeeded: RunStore.locate's answer, given or found here)."""
        seqs, ok = located if located is not None else self.store.locate(plan.run_ids)
        if not self.slices:
            self.info, self._first = dict(plan.design.info), plan
        else:
            self._first = None
        self._seqs.append(seqs)
        self._ok.append(ok)
        self.size += plan.size
        self.slices += 1

    @property
    def chunked(self) -> bool:
        return self.slices > 1

    def seqs(self) -> np.ndarray:
        """Each planned run's record in the store (0: none), in plan order."""
        if len(self._seqs) > 1:
            self._seqs = [np.concatenate(self._seqs)]
        return self._seqs[0] if self._seqs else np.zeros(0, np.int64)

    def whole(self, series: bool = True) -> Outcome:
        """All runs at once (a design of one slice keeps its Design object and info), with the
        series asked for unless `series` is False (then they may be there or not)."""
        if not self.chunked:
            if self._whole is None:
                table = self.store.read_seqs(self.seqs())
                self._whole = plan_outcome(self._first, table, self.store, {}, self.grid)
            if series and self.series and not self._series_read:
                read_series(self._first.run_ids, self.store, self._whole, self.series, self.grid)
                self._series_read = True
            return self._whole
        design = np.empty((self.size, len(self.names)))
        values = np.empty((self.size, len(self.store.quantities)))
        ok = np.empty(self.size, bool)
        for start, table in self.tables():  # a chunk at a time: one copy of the runs in memory
            stop = start + len(table)
            design[start:stop], values[start:stop], ok[start:stop] = (table.inputs, table.values,
                                                                      table.ok)
        return Outcome(Design(self.names, design, self.info),
                       {q: values[:, j] for j, q in enumerate(self.store.quantities)}, ok)

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
                del outcome  # before the next chunk is read: one chunk in memory at a time

    def _common_grid(self, reader) -> CommonGrid | None:
        """The one grid of every planned run's series, from their grids alone."""
        grids, ok, ids = [], [], []
        for _, table in self.tables():
            grids += reader.grids(table.ids)
            ok.append(table.ok)
            ids.append(table.ids)
        return common_grid(grids, np.concatenate(ok), np.concatenate(ids), self.grid)

    def chunks(self) -> Iterator[Outcome]:
        """The runs chunk by chunk, from the store."""
        for _, table in self.tables():
            yield Outcome(Design(self.names, table.inputs, self.info), columns(table, self.store), table.ok)

    def tables(self) -> Iterator[tuple[int, RunTable]]:
        """(first position, runs as recorded) chunk by chunk."""
        for start, seqs in self.parts():
            yield start, self.store.read_seqs(seqs)

    def parts(self) -> list[tuple[int, np.ndarray]]:
        """(first position, records in the store) chunk by chunk."""
        seqs = self.seqs()
        return [(start, seqs[start:start + CHUNK_ROWS]) for start in range(0, self.size, CHUNK_ROWS)]

    def succeeded(self) -> int:
        return int(sum(ok.sum() for ok in self._ok))


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
