"""RBD-FAST first-order indices (plan and analyse steps), through SALib.

Random balance designs (Tarantola et al. 2006) with Plischke's (2010) given-data estimator and
Tissot and Prieur's (2012) bias correction, as `SALib.analyze.rbd_fast`. Any sample works, so
failed runs are simply left out.

Formulas, defaults and edge cases: docs/methods.md, "RBD-FAST".
"""

from __future__ import annotations

from typing import Any, Literal, Mapping

import numpy as np
from pydantic import Field, RootModel, model_validator

from studyrun.analyses.salib import Confidence, GivenDataAnalysis, Resamples
from studyrun.core.plugin import Example
from studyrun.results.records import STRICT, ByName, Entry


class RbdFastQuantity(Entry):
    """RBD-FAST's first-order indices with their half-widths."""

    S1: ByName = {}
    S1_conf: ByName = {}


class RbdFastResults(RootModel[dict[str, RbdFastQuantity]]):
    """Quantity -> its indices."""

    model_config = STRICT


class RbdFast(GivenDataAnalysis):
    """`analysis: {type: rbd_fast}`: first-order indices from one sample of `samples` runs."""

    type: Literal["rbd_fast"]
    tutorial = "RBD-FAST"
    example = Example({"analysis": {"type": "rbd_fast", "samples": 32, "M": 2, "resamples": 10}},
                      failing={})
    results_model = RbdFastResults
    M: int = Field(10, ge=1, description="harmonics summed (interference factor)")
    confidence: Confidence = 0.95
    resamples: Resamples = 100

    title = "RBD-FAST first-order indices"
    keys = ("S1", "S1_conf")
    bars = ("S1",)

    @model_validator(mode="after")
    def _enough_samples_for_harmonics(self) -> "RbdFast":
        if self.from_ is None and self.samples <= 2 * self.M:
            raise ValueError(f"samples must exceed 2 M = {2 * self.M} for rbd_fast; "
                             f"got {self.samples}")
        return self

    def call_salib(self, problem: dict[str, Any], x: np.ndarray, y: np.ndarray,
                   seed: int) -> Mapping[str, Any]:
        from SALib.analyze import rbd_fast

        return rbd_fast.analyze(problem, x, y, M=self.M, num_resamples=self.resamples,
                                conf_level=self.confidence, seed=seed)
