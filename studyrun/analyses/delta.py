"""Borgonovo's moment-independent delta indices (plan and analyse steps), through SALib.

Delta (Borgonovo 2007) and first-order S1 estimated from given data (Plischke, Borgonovo and
Smith 2013), as `SALib.analyze.delta`; the result keys are SALib's own (delta_balanced,
delta_raw, ... with `_conf` intervals, and S1). SALib's bootstrap is slow (about 10 s for 512
runs, 3 parameters, 100 resamples): lower `resamples` or set `method: delta` for quick looks.
"""

from __future__ import annotations

from typing import Any, Literal, Mapping

import numpy as np
from pydantic import Field

from .salib import (Confidence, GivenDataAnalysis, Resamples, salib_side_effects_contained,
                    with_notes)


class Delta(GivenDataAnalysis):
    """`analysis: {type: delta}`: delta moment-independent and first-order indices."""

    type: Literal["delta"]
    method: Literal["all", "delta", "sobol"] = Field(
        "all", description="SALib's choice: delta indices, first-order S1, or both")
    confidence: Confidence = 0.95
    resamples: Resamples = 100

    title = "Delta moment-independent indices"
    keys = ("delta_balanced", "delta_balanced_conf", "delta_raw", "delta_raw_conf",
            "delta", "delta_conf", "S1", "S1_conf")
    bars = ("delta_balanced", "delta", "S1")

    def call_salib(self, problem: dict[str, Any], x: np.ndarray, y: np.ndarray,
                   seed: int) -> Mapping[str, Any]:
        from SALib.analyze import delta

        with salib_side_effects_contained() as messages:
            result = delta.analyze(problem, x, y, num_resamples=self.resamples,
                                   conf_level=self.confidence, method=self.method, seed=seed)
        return with_notes(result, messages)
