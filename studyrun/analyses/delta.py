"""Borgonovo's moment-independent delta indices (plan and analyse steps), through SALib.

Delta (Borgonovo 2007) and first-order S1 estimated from given data (Plischke, Borgonovo and
Smith 2013), as `SALib.analyze.delta` (1.6); the result keys are SALib's own: delta_balanced,
delta_raw and delta_step, each with a `_conf` interval, and S1 with S1_conf. delta_step splits a
parameter at 0 (<= 0 against > 0); for a parameter of one sign it is null, with SALib's note.
SALib's bootstrap runs with its densities vectorised and its resamples on the usable cores
(delta_bootstrap.py): about 20 ms of CPU per parameter and resample at 10,000 runs. Delta
indices need at least MIN_RUNS runs (below, SALib gives null indices for some draws), S1 alone
(`method: sobol`) the usual 20.

Formulas, defaults and edge cases: docs/methods.md, "Delta moment-independent indices".
"""

from __future__ import annotations

from typing import Any, Literal, Mapping

import numpy as np
from pydantic import Field, RootModel

from studyrun.analyses.base import StudyContext
from studyrun.analyses.salib import (
    Confidence,
    GivenDataAnalysis,
    Resamples,
    salib_side_effects_contained,
    with_notes,
)
from studyrun.core.errors import Problem
from studyrun.core.plugin import Example
from studyrun.results.records import STRICT, ByName, Entry

# SALib's delta (balanced and step modes) splits a parameter's range into equal bins (10; 5 for
# the step's positive side), merges neighbours holding fewer than 10 runs (5), and draws
# N // bins runs from each, refusing fewer than 10 (5): that parameter's indices, S1 too, are
# then null. From 100 runs no draw can make it refuse; below, it depends on the draw: over 300
# draws at each size from 40 to 110 runs, uniform, normal, lognormal, triangular, gamma and
# exponential parameters gave nulls up to 59 to 79 runs. (A parameter whose runs all but one
# lie in one bin, a heavy tail's outlier, can still leave one bin at any size; SALib says so.)
MIN_RUNS = 100


class DeltaQuantity(Entry):
    """Borgonovo's delta (three estimators) and first-order indices, with half-widths."""

    delta_balanced: ByName = {}
    delta_balanced_conf: ByName = {}
    delta_raw: ByName = {}
    delta_raw_conf: ByName = {}
    delta_step: ByName = {}
    delta_step_conf: ByName = {}
    S1: ByName = {}
    S1_conf: ByName = {}


class DeltaResults(RootModel[dict[str, DeltaQuantity]]):
    """Quantity -> its indices."""

    model_config = STRICT


class Delta(GivenDataAnalysis):
    """`analysis: {type: delta}`: delta moment-independent and first-order indices."""

    type: Literal["delta"]
    tutorial = "Delta"
    example = Example({"analysis": {"type": "delta", "samples": 160, "resamples": 2}},
                      failing={})
    results_model = DeltaResults
    method: Literal["all", "delta", "sobol"] = Field(
        "all", description="SALib's choice: delta indices, first-order S1, or both")
    confidence: Confidence = 0.95
    resamples: Resamples = 100

    without_correlation = None  # its sample is drawn correlated
    title = "Delta moment-independent indices"

    def salib_run_bytes(self) -> float:
        return 18 * self.resamples  # its bootstraps draw resamples x runs indices at once
    keys = ("delta_balanced", "delta_balanced_conf", "delta_raw", "delta_raw_conf",
            "delta_step", "delta_step_conf", "S1", "S1_conf")
    bars = ("delta_balanced", "S1")

    def min_runs(self) -> int:
        return super().min_runs() if self.method == "sobol" else MIN_RUNS

    def check(self, context: StudyContext) -> list[Problem]:
        """Also: fewer runs, to make or `from:`, than delta's bins need."""
        problems = super().check(context)
        why = (f"delta needs at least {MIN_RUNS} runs (SALib's bootstrap draws at least 10 runs "
               "from each of its 10 bins, and gives null indices when it cannot)")
        if self.from_ is None and self.samples < self.min_runs():
            problems.append(Problem(f"{why}; got samples: {self.samples}. For S1 alone, set "
                                    "method: sobol", "samples"))
        rows = self.given(context) if self.from_ is not None and not problems else None
        if rows is not None and rows.size < self.min_runs():
            problems.append(Problem(f"{self.from_} holds {rows.size} runs; {why}; give more "
                                    "runs, or method: sobol for S1 alone", "from"))
        return problems

    def call_salib(self, problem: dict[str, Any], x: np.ndarray, y: np.ndarray,
                   seed: int) -> Mapping[str, Any]:
        """SALib's delta under plain names x0, x1, ... (it refuses names ending in _step, _raw,
        _balanced or _conf); its notes and warnings are given the parameters' names back."""
        from SALib.analyze import delta

        from studyrun.analyses.delta_bootstrap import patched

        names, plain = problem["names"], [f"x{i}" for i in range(len(problem["names"]))]
        with salib_side_effects_contained() as messages, patched():
            result = delta.analyze({**problem, "names": plain}, x, y, num_resamples=self.resamples,
                                   conf_level=self.confidence, method=self.method, seed=seed)
        notes = [f"{name}: {note}" for name, note in zip(names, result.get("notes", [])) if note]
        for old, new in zip(plain, names):
            messages = [m.replace(f"[{old}]", f"[{new}]") for m in messages]
        return with_notes({**result, "notes": notes}, messages)

    def analyse_quantity(self, values: np.ndarray, bad: np.ndarray, design) -> dict[str, Any]:
        """SALib's entry, with a warning where a delta lies above 1, which no delta can."""
        entry = super().analyse_quantity(values, bad, design)
        above = sorted({name for key in ("delta_balanced", "delta_raw", "delta_step")
                        for name, value in entry.get(key, {}).items()
                        if value is not None and value > 1})
        if above:
            entry["warnings"].append(
                f"delta above 1 for {', '.join(above)}: a delta lies between 0 and 1, so these "
                "estimates are unreliable (a very skewed quantity defeats the density estimate); "
                "analyse a transformed quantity such as log(...)")
        return entry
