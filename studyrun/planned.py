"""The planned runs of a fixed design, read back from the store for the analyse step.

A design of at most one chunk stays in memory whole; a larger one is registered in the store
slice by slice and read back in chunks, so memory does not grow with the number of runs.
"""

from __future__ import annotations

from typing import Iterator

import numpy as np

from .analyses.base import Design, Outcome
from .plan import Plan
from .store import RunStore

CHUNK_ROWS = 1 << 20  # runs per slice of a design (a fixed number: results never depend on it)


class PlannedRuns:
    """Every run of a study's plan, in plan order, with what the store recorded for it."""

    def __init__(self, store: RunStore, names: list[str], series: dict[str, str]) -> None:
        self.store, self.names, self.series = store, names, series
        self.size = 0
        self.plans: list[Plan] = []  # only while the design fits one chunk
        self.info: dict = {}
        self._whole: Outcome | None = None

    def add(self, plan: Plan) -> None:
        """Register the next slice of the plan."""
        self.store.add_planned(self.size, plan.run_ids)
        if not self.plans:
            self.info = dict(plan.design.info)
        self.plans = self.plans + [plan] if self.size == 0 else []
        self.size += plan.size

    @property
    def chunked(self) -> bool:
        return not self.plans

    def whole(self) -> Outcome:
        """All runs at once (a design that fit one chunk keeps its Design object and info)."""
        if not self.chunked:
            if self._whole is None:  # read once, for the analysis and the report alike
                self._whole = self.read_plan(self.plans[0])
            return self._whole
        outcomes = list(self.chunks())
        design = Design(self.names, np.vstack([o.design.matrix for o in outcomes]), self.info)
        return Outcome(design, {q: np.concatenate([o.values[q] for o in outcomes])
                                for q in self.store.quantities},
                       np.concatenate([o.ok for o in outcomes]))

    def first(self) -> Outcome:
        """The first chunk of runs (all of them for a small design), e.g. for figures."""
        return self.whole() if not self.chunked else next(self.chunks())

    def chunks(self, rows: int = CHUNK_ROWS) -> Iterator[Outcome]:
        """The runs slice by slice, from the store."""
        for start in range(0, self.size, rows):
            stop = min(start + rows, self.size)
            ok, inputs, values = self.store.read_planned(start, stop, self.names)
            yield Outcome(Design(self.names, inputs, self.info),
                          {q: values[:, j] for j, q in enumerate(self.store.quantities)}, ok)

    def read_plan(self, plan: Plan) -> Outcome:
        """One plan's quantities (and the series asked for) from the store, in plan order."""
        found, ok, values = self.store.read(plan.run_ids)
        outcome = Outcome(design=plan.design, ok=ok,
                          values={name: values[:, j] for j, name in enumerate(self.store.quantities)})
        if self.series:
            read_series(plan, self.store, outcome, self.series)
        return outcome

    def succeeded(self) -> int:
        return self.store.db.execute("SELECT count(*) FROM planned JOIN runs ON runs.id = planned.id "
                                     "WHERE runs.status = 'ok'").fetchone()[0]

    def sorted_values(self, quantity: str) -> Iterator[float]:
        return self.store.sorted_planned(quantity)

    def rank_sums(self, quantity: str) -> dict[str, tuple[float, ...]]:
        return self.store.rank_sums(quantity, self.names)


def read_series(plan: Plan, store: RunStore, outcome: Outcome, wanted: dict[str, str]) -> None:
    """Fill outcome.series[name] (runs, T) from the stored series of each run; NaN where absent."""
    rows = [store.read_series(run_id) for run_id in plan.run_ids.tolist()]
    first = next((r for r in rows if r is not None and "time" in r), None)
    if first is None:
        return
    outcome.time = first["time"]
    blank = np.full(len(outcome.time), np.nan)
    for name, output in wanted.items():
        outcome.series[name] = np.array([r[output] if r is not None and output in r else blank
                                         for r in rows])
