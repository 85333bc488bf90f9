"""The analysis plug-in point: plan a design of runs, then analyse the quantities they gave.

A fixed-design analysis implements `design()` and `analyse()`. Iterative analyses (calibrate,
optimize) implement `iterate()` instead, asking for runs through an `evaluate` callback that goes
through the same executor and store. `report()` turns the analysis results into Markdown and
figures; it computes nothing new.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Iterator

import numpy as np
from pydantic import BaseModel, ConfigDict

from ..core.design import MAX_RUNS, Design, Evaluate, Outcome, PlannedRuns

if TYPE_CHECKING:
    from ..core.errors import Problem
    from ..params import ParameterSpec
    from ..report.figures import Figures


def search_runs(analysis: Any, dimensions: int) -> tuple[int, str]:
    """The runs an iterative analysis's own numbers ask for at least: one per start, and a
    differential evolution's population in every generation."""
    counts = [(analysis.multistart + 1, "multistart")]
    if analysis.method == "differential-evolution":
        counts.append(((analysis.generations + 1) * analysis.population * max(dimensions, 1),
                       "generations"))
    return max(counts)


class AnalysisSpec(BaseModel):
    """Base of every `analysis:` block. Subclasses add `type: Literal[...]` and their own keys."""

    model_config = ConfigDict(extra="forbid")

    iterative: ClassVar[bool] = False  # True for calibrate/optimize, which use iterate()

    def check(self, parameters: dict[str, "ParameterSpec"]) -> list["Problem"]:
        """Problems that need the study's varied parameters (paths relative to `analysis`)."""
        return []

    def run_count(self, parameters: dict[str, "ParameterSpec"]) -> tuple[int, str] | None:
        """The number of runs the design will have and the key that sets it, known before
        planning; None where it is small by construction or only planning can tell."""
        return None

    def check_size(self, parameters: dict[str, "ParameterSpec"]) -> list["Problem"]:
        """A design beyond MAX_RUNS is refused at its key, before anything is allocated."""
        from ..core.errors import Problem

        count = self.run_count(parameters)
        if count is None or count[0] <= MAX_RUNS:
            return []
        runs, key = count
        size = f"{runs:,}" if runs < 10**15 else f"{float(runs):.3g}"
        has = "asks for at least" if self.iterative else "has"
        return [Problem(f"the design {has} {size} runs, more than {MAX_RUNS:,}, the most a study "
                        "may have (its run store and runs.csv would pass 10 GB each); lower "
                        f"{key}, or split the study into several", path=key)]

    def resolve_paths(self, folder: Path) -> None:
        """Make the block's file names (a design or data file) relative to the study's folder."""
        name = getattr(self, "file", None)
        if isinstance(name, str) and not Path(name).is_absolute():
            self.file = str(folder / name)

    def prepare(self, study: Any) -> Any:
        """The study as this analysis runs it, seen whole before planning (the model, its
        defaults); most analyses return it unchanged. Called by load_study before the checks."""
        return study

    def needs_series(self) -> list[str]:
        """Model outputs whose whole time series the analysis needs from every run."""
        return []

    def series_grid(self) -> np.ndarray | None:
        """The times at which to compare runs whose grids differ; None: the first run's."""
        return None

    def design(self, parameters: dict[str, "ParameterSpec"], seed: np.random.SeedSequence) -> Design:
        """The runs to make, derived only from the parameters and the seed."""
        raise NotImplementedError

    def design_chunks(self, parameters: dict[str, "ParameterSpec"], seed: np.random.SeedSequence,
                      rows: int) -> Iterator[Design]:
        """The design in slices of at most `rows` runs (by default all of it at once), so a very
        large design never has to be held whole."""
        yield self.design(parameters, seed)

    def analyse_runs(self, runs: "PlannedRuns", parameters: dict[str, "ParameterSpec"]) -> dict[str, Any]:
        """Results from the planned runs in the store; by default read whole and `analyse()`d."""
        return self.analyse(runs.whole(), parameters)

    def analyse(self, outcome: Outcome, parameters: dict[str, "ParameterSpec"]) -> dict[str, Any]:
        """The `results` block of analysis.json, keyed by quantity (see the study format)."""
        raise NotImplementedError

    def iterate(self, evaluate: Evaluate, parameters: dict[str, "ParameterSpec"],
                seed: np.random.SeedSequence) -> dict[str, Any]:
        """Iterative analyses: ask for runs through `evaluate` and return the results block."""
        raise NotImplementedError

    def report(self, analysis: dict[str, Any], outcome: Outcome | None, figures: "Figures") -> str:
        """Markdown sections (with figures) for report.md, from analysis.json and the runs."""
        return ""
