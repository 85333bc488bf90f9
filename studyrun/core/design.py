"""A design of runs and what its runs gave: the data every step of the pipeline passes on."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Protocol

import numpy as np


@dataclass
class Design:
    """The runs an analysis asks for: one row per run, one column per varied parameter."""

    names: list[str]  # varied parameter names, in study order
    matrix: np.ndarray  # shape (runs, len(names)), natural units
    info: dict[str, Any] = field(default_factory=dict)  # extra facts for analysis.json / plan


@dataclass
class Outcome:
    """What the runs of a design gave: quantities by name, in the design's row order."""

    design: Design
    values: dict[str, np.ndarray]  # quantity -> shape (runs,), NaN where the run failed
    ok: np.ndarray  # bool, shape (runs,)
    series: dict[str, np.ndarray] = field(default_factory=dict)  # output -> (runs, T) when asked
    time: np.ndarray | None = None  # the one grid of `series` (see plan/grids.py)
    series_notes: list[str] = field(default_factory=list)  # runs left out of `series`, by id


Evaluate = Callable[[np.ndarray], Outcome]  # rows of parameter values -> their outcome

# The most runs a design may have: its runs.csv would pass 14 GB and its run store 4 GB (1.4 GB
# and 0.41 GB per 10 million runs of three inputs and a quantity, benchmarks/README.md), and a
# design this large is more often a typo than a plan.
MAX_RUNS = 100_000_000


class PlannedRuns(Protocol):
    """The runs of a fixed design as an analysis reads them: whole, or chunk by chunk in plan
    order (the plan step's `plan.runs.PlannedRuns`)."""

    names: list[str]  # the varied parameters
    size: int  # runs in the plan
    chunked: bool  # True when the design was planned in more than one slice
    series: dict[str, str]  # the series the analysis reads: name -> model output
    series_in_chunks: bool  # True when those series are too large to be read whole

    def whole(self, series: bool = True) -> Outcome: ...

    def series_chunks(self, multiple: int = 1) -> Iterator[Outcome]: ...

    def chunks(self) -> Iterator[Outcome]: ...
