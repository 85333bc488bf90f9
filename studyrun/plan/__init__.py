"""The plan step: a study's design of runs and the identity of every run.

`identity` hashes runs, `runs` gathers the runs of a plan for the analyse and report steps (on
one time grid: `grids`), and `describe` is what `studyrun plan` prints.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Iterator

import numpy as np

from studyrun.core.design import Design
from studyrun.plan.identity import Occurrences, context_bytes, hash_rows


@dataclass
class Plan:
    """Which runs a study makes: the design, the fixed inputs and each run's identity."""

    design: Design
    fixed: dict[str, float]  # inputs every run shares (fixed parameters)
    run_ids: np.ndarray  # int64, one per design row
    info: dict = field(default_factory=dict)

    @property
    def size(self) -> int:
        return len(self.run_ids)

    def inputs(self, rows: np.ndarray | slice) -> dict[str, np.ndarray]:
        """The model inputs of some rows: varied columns, then fixed values broadcast."""
        matrix = self.design.matrix[rows]
        inputs = {name: np.ascontiguousarray(matrix[:, j]) for j, name in enumerate(self.design.names)}
        n = len(matrix)
        for name, value in self.fixed.items():
            inputs[name] = np.full(n, value)
        return inputs


def make_plan(design: Design, fixed: dict[str, float], context: dict,
              earlier: Occurrences | None = None, content: np.ndarray | None = None) -> Plan:
    """A plan from an analysis's design, the study's fixed inputs and its run context; `earlier`
    counts the rows of the design's slices planned before this one; `content`, one row per run,
    is hashed with the design's (what given runs gave: their identity is their whole row)."""
    matrix = np.asarray(design.matrix, dtype=float).reshape(-1, len(design.names))
    design.matrix = matrix
    run_ids = hash_rows(matrix, context_bytes({**context, "fixed": fixed, "names": design.names}),
                        earlier, more=content)
    return Plan(design=design, fixed=fixed, run_ids=run_ids)


def plan_slices(designs: Iterable[Design], fixed: dict[str, float], context: dict) -> Iterator[Plan]:
    """The plans of a design's slices, with the identities the design has whole: repeated rows
    are numbered across slices, counted from the second slice on (a design of one slice, the
    usual case, pays nothing for it)."""
    earlier: Occurrences | None = None
    first: Design | None = None
    for design in designs:
        if first is not None:  # a second slice: count the first's rows, then every slice's
            earlier = Occurrences()
            make_plan(first, fixed, context, earlier)
            first = None
        plan = make_plan(design, fixed, context, earlier)
        if earlier is None:
            first = design
        yield plan
