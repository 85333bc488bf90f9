"""Extended FAST first-order and total indices (plan and analyse steps), through SALib.

Saltelli, Tarantola and Chan (1999): one search curve per parameter, `samples` runs each
(`SALib.sample.fast_sampler`), analysed by `SALib.analyze.fast` with interference factor `M`.
The curves must be complete, so a quantity with any failed run gets an error entry, not
numbers; RBD-FAST (`rbd_fast`) tolerates failures. SALib itself flags its bootstrap intervals
for FAST as indicative only.

Formulas, defaults and edge cases: docs/methods.md, "Extended FAST (eFAST)".
"""

from __future__ import annotations

from typing import Any, Literal, Mapping

import numpy as np
from pydantic import Field, RootModel, model_validator

from studyrun.analyses.salib import (
    Confidence,
    Resamples,
    SalibAnalysis,
    error_entry,
    map_to_natural,
    salib_side_effects_contained,
    unit_problem,
    with_notes,
)
from studyrun.core.design import Design
from studyrun.core.plugin import Example
from studyrun.results.records import STRICT, ByName, Entry


class FastQuantity(Entry):
    """eFAST's first-order and total indices with their half-widths."""

    S1: ByName = {}
    S1_conf: ByName = {}
    ST: ByName = {}
    ST_conf: ByName = {}


class FastResults(RootModel[dict[str, FastQuantity]]):
    """Quantity -> its indices."""

    model_config = STRICT


class Fast(SalibAnalysis):
    """`analysis: {type: fast}`: eFAST S1 and ST; runs = samples x number of parameters."""

    type: Literal["fast"]
    tutorial = "eFAST"
    example = Example({"analysis": {"type": "fast", "samples": 24, "M": 2, "resamples": 10}},
                      failing={},
                      failures="refuses")
    results_model = FastResults
    samples: int = Field(1024, description="runs per parameter's search curve (> 4 M^2)")
    M: int = Field(4, ge=1, description="interference factor (harmonics)")
    confidence: Confidence = 0.95
    resamples: Resamples = 100

    title = "eFAST indices"
    keys = ("S1", "S1_conf", "ST", "ST_conf")
    bars = ("S1", "ST")

    @model_validator(mode="after")
    def _enough_samples_for_harmonics(self) -> "Fast":
        if self.samples <= 4 * self.M**2:
            raise ValueError(f"samples must exceed 4 M^2 = {4 * self.M**2} for fast; "
                             f"got {self.samples}")
        return self

    def run_count(self, context) -> tuple[int, str]:
        return self.samples * len(context.varied), "samples"

    def design(self, context, seed: np.random.SeedSequence) -> Design:
        from SALib.sample import fast_sampler

        parameters = context.varied
        names = list(parameters)
        sample_seed, analysis_seed = (int(s) for s in seed.generate_state(2))
        unit = fast_sampler.sample(unit_problem(names), self.samples, M=self.M, seed=sample_seed)
        info = {"method": "fast", "analysis_seed": analysis_seed or 1}
        return Design(names, map_to_natural(unit, parameters, names), info)

    def analyse_quantity(self, values: np.ndarray, bad: np.ndarray, design: Design) -> dict[str, Any]:
        if bad.any():
            return error_entry(f"{int(bad.sum())} of {len(values)} runs failed, and FAST needs "
                               f"every run of its search curves; rerun them, or use rbd_fast, "
                               f"which tolerates failures",
                               effective_N=int((~bad).sum()), dropped_runs=int(bad.sum()))
        return super().analyse_quantity(values, bad, design)

    def call_salib(self, problem: dict[str, Any], x: np.ndarray, y: np.ndarray,
                   seed: int) -> Mapping[str, Any]:
        from SALib.analyze import fast

        with salib_side_effects_contained() as messages:
            result = fast.analyze(problem, y, M=self.M, num_resamples=self.resamples,
                                  conf_level=self.confidence, seed=seed)
        # SALib's notice that FAST bootstrap intervals are indicative only is in the docstring
        return with_notes(result, [m for m in messages if "FAST confidence" not in m])
