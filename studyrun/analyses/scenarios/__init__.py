"""Scenario discovery: which combinations of inputs lead to the runs of interest (`of_interest`,
a condition on quantities), as PRIM's boxes (peeling and pasting, covering, every step of the
trajectory kept) or a classification tree's leaves (CART), over runs this study makes, another
results folder's runs or a CSV (`from:`).

Formulas, defaults and edge cases: docs/methods.md, "Scenario discovery".
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np
from pydantic import Field, NonNegativeInt, PositiveInt, model_validator

from studyrun.analyses.given import ReadsGiven, not_with_from
from studyrun.analyses.montecarlo import drawn
from studyrun.analyses.scenarios.records import ScenariosResults
from studyrun.blocks.params import sample_unit
from studyrun.core.design import Design, Outcome
from studyrun.core.errors import Problem
from studyrun.core.plugin import Example

MAX_ANALYSED = 1_000_000  # runs PRIM peels (10 parameters: about 20 s of CPU at this size)
PRIM_KEYS = ("threshold", "peel_alpha", "paste_alpha", "boxes", "box")


class Scenarios(ReadsGiven):
    """Draw `samples` parameter sets (or read the runs `from:` names) and find the regions of
    the inputs where `of_interest` holds."""

    type: Literal["scenarios"]
    tutorial = "Scenario discovery"
    example = Example({"analysis": {"type": "scenarios", "of_interest": "final > 0.8",
                                    "samples": 64}}, failing={})
    results_model = ScenariosResults
    without_correlation = None  # every sampling draws correlated inputs

    of_interest: str = Field(description="a condition on quantities that marks a run of "
                                         "interest: comparisons joined by and, or, not, e.g. "
                                         "'cost > 100 and reliability < 0.9'")
    method: Literal["prim", "cart"] = Field("prim", description="prim | cart")
    samples: PositiveInt = Field(1000, le=MAX_ANALYSED, description="number of runs (not with "
                                                                     "from)")
    sampling: Literal["random", "lhs", "sobol"] = "random"
    threshold: float = Field(0.8, gt=0, le=1, description="prim: the density the chosen box "
                                                          "must reach")
    peel_alpha: float = Field(0.05, gt=0, lt=0.5, description="prim: the share of a box's runs "
                                                              "each peel removes")
    paste_alpha: float = Field(0.05, gt=0, lt=0.5, description="prim: the share each paste "
                                                               "adds back")
    mass_min: float = Field(0.05, gt=0, lt=1, description="the smallest share of the runs a box "
                                                          "(a tree's leaf) may hold")
    boxes: PositiveInt = Field(1, le=20, description="prim: boxes to find by covering, each on "
                                                     "the runs outside the earlier ones")
    box: NonNegativeInt | None = Field(None, description="prim: the step of the first box's "
                                                         "peeling trajectory to choose instead "
                                                         "of the threshold's")
    max_depth: PositiveInt = Field(6, le=20, description="cart: the deepest tree the "
                                                         "cross-validation tries")

    @model_validator(mode="after")
    def _keys(self) -> "Scenarios":
        not_with_from(self, "samples", "sampling")
        if self.method == "cart":
            given = [key for key in PRIM_KEYS if key in self.model_fields_set]
            if given:
                raise ValueError(f"{given[0]} is a key of method: prim; method: cart takes "
                                 "max_depth and mass_min")
        elif "max_depth" in self.model_fields_set:
            raise ValueError("max_depth is a key of method: cart")
        return self

    def condition(self):
        from studyrun.analyses.scenarios.condition import condition

        return condition(self.of_interest)

    def check(self, context) -> list[Problem]:
        from studyrun.blocks.expr import ExprError
        from studyrun.core.text import suggest

        problems = ReadsGiven.check(self, context)
        if not context.varied:
            problems.append(Problem("scenario discovery needs at least one varied parameter",
                                    "type"))
        try:
            found = self.condition()
        except ExprError as error:
            return [*problems, Problem(str(error), "of_interest")]
        known = (set(context.quantities) if context.quantities is not None
                 else set(context.model.output_names() or []) or None)
        for name in sorted(found.names - (known or found.names)):
            problems.append(Problem(f"{name!r} is not a quantity of the study"
                                    f"{suggest(name, known or set())} (quantities: "
                                    f"{', '.join(sorted(known or [])) or 'none'})",
                                    "of_interest"))
        rows = self.given(context) if not problems and self.from_ is not None else None
        if rows is not None and rows.size > MAX_ANALYSED:
            problems.append(Problem(f"{rows.size:,} rows, more than the {MAX_ANALYSED:,} "
                                    "scenario discovery analyses; give a sample of them", "from"))
        return problems

    def run_count(self, context) -> tuple[int, str] | None:
        return None if self.from_ is not None else (self.samples, "samples")

    def design(self, context, seed) -> Design:
        rows = self.given(context)
        if rows is not None:
            return rows.design({"sampling": "given"})
        if not context.varied:
            return Design([], np.zeros((self.samples, 0)))
        return drawn(context, sample_unit(self.samples, len(context.varied), self.sampling, seed),
                     self.sampling)  # as montecarlo draws them

    def analyse(self, outcome: Outcome, context) -> dict[str, Any]:
        from studyrun.analyses.scenarios.prim import Data, whole

        condition = self.condition()
        missing = sorted(condition.names - set(outcome.values))
        if missing:  # a model that names no outputs before it runs: known only now
            from studyrun.core.errors import StudyError

            raise StudyError(f"{missing[0]!r} is not a quantity of the runs (quantities: "
                             f"{', '.join(sorted(outcome.values)) or 'none'})",
                             path="analysis.of_interest")
        n = len(outcome.ok)
        hit, decided = condition.evaluate({name: outcome.values[name] for name in condition.names}, n)
        decided &= outcome.ok
        names = outcome.design.names
        x = outcome.design.matrix[decided]
        categorical = frozenset(name for name in names if context.varied[name].kind == "discrete")
        data = Data(list(names), x, hit[decided], categorical)
        dropped = int((~decided).sum())
        results: dict[str, Any] = {
            "method": self.method, "of_interest": self.of_interest, "runs": int(decided.sum()),
            "runs_of_interest": int(data.y.sum()), "dropped_runs": dropped}
        warnings: list[str] = []
        if dropped:
            warnings.append(f"{dropped} runs failed or gave no finite value of a quantity "
                            f"of_interest reads; they count as neither of interest nor not, "
                            f"and the boxes rest on the remaining {int(decided.sum())}")
        if not len(data.y):
            return results | {"warnings": [*warnings, "no run gave the quantities of_interest "
                                                      "reads: there is nothing to analyse"]}
        results["parameters"] = {
            name: ({"values": whole(np.unique(x[:, j]).tolist())} if name in categorical
                   else {"min": float(x[:, j].min()), "max": float(x[:, j].max())})
            for j, name in enumerate(names)}
        if not data.y.any():
            warnings.append("no run is of interest: the boxes restrict nothing")
        if self.method == "cart":
            from studyrun.analyses.scenarios.cart import cart

            found = cart(data, self.max_depth, self.mass_min)
            warnings += found.pop("warnings", [])
            results |= found
        else:
            from studyrun.analyses.scenarios.prim import covering

            results["threshold"] = self.threshold
            boxes, notes = covering(data, self.threshold, self.peel_alpha, self.paste_alpha,
                                    self.mass_min, self.boxes, self.box)
            results["boxes"] = boxes
            if boxes and self.box is not None and self.box >= len(boxes[0]["trajectory"]):
                warnings.append(f"box: {self.box} is beyond the trajectory's last step "
                                f"({len(boxes[0]['trajectory']) - 1}); that step is chosen")
            elif boxes and (boxes[0]["density"] or 0) < self.threshold and self.box is None:
                warnings.append(f"no step reaches the density threshold {self.threshold:g}; "
                                "the densest is chosen")
            if notes:
                results["notes"] = notes
        if warnings:
            results["warnings"] = warnings
        return results

    def report(self, analysis, outcome, figures) -> str:
        from studyrun.analyses.scenarios.report import section

        return section(analysis, outcome, figures, self.box)
