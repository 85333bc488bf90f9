"""PAWN density-based indices (plan and analyse steps), through SALib.

Pianosi and Wagener (2015, 2018): the Kolmogorov-Smirnov distance between the unconditional
output distribution and the distributions conditional on `S` slices of each input, summarised
over slices (minimum, mean, median, maximum, CV, stdev) as `SALib.analyze.pawn`. Any sample
works, so failed runs are simply left out.

Formulas, defaults and edge cases: docs/methods.md, "PAWN".
"""

from __future__ import annotations

from typing import Any, Literal, Mapping

import numpy as np
from pydantic import Field, RootModel, model_validator

from studyrun.analyses.salib import GivenDataAnalysis, salib_side_effects_contained, with_notes
from studyrun.core.plugin import Example
from studyrun.results.records import STRICT, ByName, Entry


class PawnQuantity(Entry):
    """The Kolmogorov-Smirnov distances over each input's slices, summarised."""

    minimum: ByName = {}
    mean: ByName = {}
    median: ByName = {}
    maximum: ByName = {}
    stdev: ByName = {}
    CV: ByName = {}


class PawnResults(RootModel[dict[str, PawnQuantity]]):
    """Quantity -> its summaries."""

    model_config = STRICT


class Pawn(GivenDataAnalysis):
    """`analysis: {type: pawn}`: KS-distance sensitivity summaries per parameter."""

    type: Literal["pawn"]
    tutorial = "PAWN"
    example = Example({"analysis": {"type": "pawn", "samples": 32, "S": 3}},
                      failing={})
    results_model = PawnResults
    S: int = Field(10, ge=2, description="slices of each input's range (conditioning intervals)")

    without_correlation = None  # its sample is drawn correlated
    title = "PAWN indices (KS distance)"
    keys = ("minimum", "mean", "median", "maximum", "CV", "stdev")
    bars = ("median",)

    @model_validator(mode="after")
    def _enough_samples_per_slice(self) -> "Pawn":
        if self.from_ is None and self.samples < 10 * self.S:
            raise ValueError(f"samples must be at least 10 S = {10 * self.S} for pawn (ten runs "
                             f"per slice); got {self.samples}")
        return self

    def call_salib(self, problem: dict[str, Any], x: np.ndarray, y: np.ndarray,
                   seed: int) -> Mapping[str, Any]:
        from SALib.analyze import pawn

        with salib_side_effects_contained() as messages:  # PAWN draws nothing at random
            result = pawn.analyze(problem, x, y, S=self.S)
        return with_notes(result, messages)
