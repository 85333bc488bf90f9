"""Derivative-based global sensitivity measures (plan and analyse steps), through SALib.

Sobol' and Kucherenko (2009): v_i = E[(dy/du_i)^2] by forward differences on a Sobol' sequence
(`SALib.sample.finite_diff`: N base points, each followed by one step of `delta` (relative) in
each parameter), and dgsm_i = v_i / (pi^2 V), an upper bound of the total index ST_i
(`SALib.analyze.dgsm`).

Studyrun differentiates with respect to the unit (quantile) coordinate u_i of each parameter,
x_i = ppf_i(u_i), which is uniform on [0, 1] whatever the distribution: so the bound
ST_i <= dgsm_i holds for every distribution, and v_i is in (quantity units)^2 per whole
quantile range. SALib 1.6 reports the bootstrap interval of v_i as `dgsm_conf`; studyrun
reports it as `vi_conf` and rescales it to dgsm's units for `dgsm_conf`.
"""

from __future__ import annotations

from typing import Any, Literal, Mapping

import numpy as np
from pydantic import Field

from .base import Design
from .salib import (MIN_BLOCKS, Confidence, Resamples, SalibAnalysis, by_factor,
                    constant_output, dropped_warning, error_entry, keep_whole_blocks,
                    map_to_natural, salib_side_effects_contained, unit_problem,
                    with_notes)


class Dgsm(SalibAnalysis):
    """`analysis: {type: dgsm}`: derivative-based measures; runs = samples x (parameters + 1)."""

    type: Literal["dgsm"]
    samples: int = Field(1024, ge=MIN_BLOCKS, description="base points N")
    delta: float = Field(0.01, gt=0, lt=1, description="relative finite-difference step")
    confidence: Confidence = 0.95
    resamples: Resamples = 100

    title = "Derivative-based global sensitivity measures"
    keys = ("vi", "vi_std", "vi_conf", "dgsm", "dgsm_conf")
    bars = ("dgsm",)

    def unit_design(self, dimensions: int) -> np.ndarray:
        """SALib's finite-difference design on the unit cube (deterministic: no scrambling)."""
        from SALib.sample import finite_diff

        names = [f"u{j}" for j in range(dimensions)]
        return finite_diff.sample(unit_problem(names), self.samples, delta=self.delta)

    def run_count(self, parameters) -> tuple[int, str]:
        return self.samples * (len(parameters) + 1), "samples"

    def design(self, parameters, seed: np.random.SeedSequence) -> Design:
        names = list(parameters)
        unit = self.unit_design(len(names))
        info = {"method": "dgsm", "block": len(names) + 1,
                "analysis_seed": int(seed.generate_state(1)[0])}
        return Design(names, map_to_natural(unit, parameters, names), info)

    def analyse_quantity(self, values: np.ndarray, bad: np.ndarray, design: Design) -> dict[str, Any]:
        """Drop base points whose runs failed, then SALib's DGSM on the unit-cube steps."""
        keep, dropped = keep_whole_blocks(bad, design.info["block"])
        kept = self.samples - dropped
        facts: dict[str, Any] = {"effective_N": kept, "dropped_blocks": dropped}
        if kept < MIN_BLOCKS:
            return error_entry(f"only {kept} of {self.samples} base points have every run "
                               f"succeeded; at least {MIN_BLOCKS} are needed", **facts)
        y = values[keep]
        if constant_output(y):
            return error_entry("the quantity is the same in every run: there is nothing to "
                               "apportion", **facts)
        unit = self.unit_design(len(design.names))[keep]
        result = self.call_salib(unit_problem(design.names), unit, y,
                                 design.info["analysis_seed"])
        entry = {key: by_factor(design.names, result[key]) for key in ("vi", "vi_std", "dgsm")}
        vi_conf = np.asarray(result["dgsm_conf"], dtype=float)
        with np.errstate(invalid="ignore", divide="ignore"):
            dgsm_conf = vi_conf * np.asarray(result["dgsm"]) / np.asarray(result["vi"])
        entry["vi_conf"] = by_factor(design.names, vi_conf)
        entry["dgsm_conf"] = by_factor(design.names, dgsm_conf)
        notes = [dropped_warning(dropped, "base points", kept)] if dropped else []
        notes += [f"SALib: {n}" for n in dict.fromkeys(result.get("notes", []))]
        return entry | facts | {"warnings": notes}

    def call_salib(self, problem: dict[str, Any], x: np.ndarray, y: np.ndarray,
                   seed: int) -> Mapping[str, Any]:
        from SALib.analyze import dgsm

        with salib_side_effects_contained() as messages:  # its bootstrap draws from np.random
            np.random.seed(seed)
            result = dgsm.analyze(problem, x, y, num_resamples=self.resamples,
                                  conf_level=self.confidence)
        return with_notes(result, messages)
