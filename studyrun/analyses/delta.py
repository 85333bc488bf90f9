"""Borgonovo's moment-independent delta indices (plan and analyse steps), through SALib.

Delta (Borgonovo 2007) and first-order S1 estimated from given data (Plischke, Borgonovo and
Smith 2013), as `SALib.analyze.delta` (1.6); the result keys are SALib's own: delta_balanced,
delta_raw and delta_step, each with a `_conf` interval, and S1 with S1_conf. delta_step splits a
parameter at 0 (<= 0 against > 0); for a parameter of one sign it is null, with SALib's note.
SALib's bootstrap is slow (about 10 s for 512 runs, 3 parameters, 100 resamples): lower
`resamples` or set `method: delta` for quick looks.

Formulas, defaults and edge cases: docs/methods.md, "Delta moment-independent indices".
"""

from __future__ import annotations

from typing import Any, Literal, Mapping

import numpy as np
from pydantic import Field

from .salib import (
    Confidence,
    GivenDataAnalysis,
    Resamples,
    salib_side_effects_contained,
    with_notes,
)


class Delta(GivenDataAnalysis):
    """`analysis: {type: delta}`: delta moment-independent and first-order indices."""

    type: Literal["delta"]
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

    def call_salib(self, problem: dict[str, Any], x: np.ndarray, y: np.ndarray,
                   seed: int) -> Mapping[str, Any]:
        """SALib's delta under plain names x0, x1, ... (it refuses names ending in _step, _raw,
        _balanced or _conf); its notes and warnings are given the parameters' names back."""
        from SALib.analyze import delta

        names, plain = problem["names"], [f"x{i}" for i in range(len(problem["names"]))]
        with salib_side_effects_contained() as messages:
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
