"""Reliability analysis: the probability that a failure condition on the quantities holds, pf,
and the reliability index beta = -Phi^-1(pf), by crude Monte Carlo, FORM, SORM, importance
sampling, subset simulation or AK-MCS (a Gaussian process that classifies a Monte Carlo
population), every run through the executor and the store (resumable).

Formulas, defaults and edge cases: docs/methods.md, "Reliability: the probability of failure".
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, PositiveInt

from studyrun.analyses.base import IterativeAnalysis, StudyContext
from studyrun.analyses.reliability.records import ReliabilityResults
from studyrun.core.design import Design
from studyrun.core.errors import Problem
from studyrun.core.plugin import Example

METHODS = ("monte_carlo", "form", "sorm", "importance", "subset", "ak-mcs")
FORMS = ("form", "sorm", "importance")  # the methods that search for a design point
EXACT = ("adjoint", "forward")
SAMPLERS = {"monte_carlo": 1000, "importance": 1000, "subset": 2000, "ak-mcs": 12}  # start
AK_MAX_RUNS, AK_DEFAULT_RUNS = 5000, 1000  # ak-mcs fits a GP on every run (n^3)
DEFAULT_COV = 0.1


class Cov(BaseModel):
    """`until: {cov}`: the coefficient of variation of pf to reach."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    cov: float = Field(gt=0, lt=1, description="the target coefficient of variation of pf")


class Reliability(IterativeAnalysis):
    """The probability of failure of the model, where `failure` holds, over the parameters'
    joint distribution."""

    type: Literal["reliability"]
    tutorial = "Reliability"
    results_model = ReliabilityResults
    example = Example({"analysis": {"type": "reliability", "failure": "final < 0.6", "start": 32,
                                    "max_runs": 64, "until": {"cov": 0.05}}})
    without_correlation = None  # the Nataf transform works through the study's copula

    failure: str = Field(description="a condition on quantities that means failure, e.g. "
                                     "'g < 0' or 'peak > 5'")
    method: Literal["monte_carlo", "form", "sorm", "importance", "subset", "ak-mcs"] = Field(
        "monte_carlo", description="monte_carlo | form | sorm | importance | subset | ak-mcs")
    until: Cov | None = Field(None, description="monte_carlo, importance, ak-mcs: {cov: c}, the "
                                                "cov of pf to reach (default 0.1)")
    max_runs: PositiveInt = Field(100_000, description="never more model runs than this "
                                                       "(ak-mcs: default 1000, at most 5000)")
    start: PositiveInt | None = Field(
        None, description="monte_carlo, importance: runs in the first round (default 1000; "
                          "then rounds grown to the runs the cov needs, at most doubling); "
                          "subset: runs per level (default 2000); ak-mcs: the first runs, "
                          "before the GP chooses (default 12)")
    batch: PositiveInt = Field(4, le=64, description="ak-mcs: runs the GP chooses at a time, "
                                                       "for parallel workers")
    population: int = Field(10_000, ge=100, le=1 << 24,
                            description="ak-mcs: the Monte Carlo points the GP classifies at "
                                        "first; doubled while the cov of pf is above the target")
    sorm: Literal["hohenbichler_rackwitz", "breitung", "tvedt"] = Field(
        "hohenbichler_rackwitz", description="sorm: the formula pf comes from")
    check_runs: int = Field(200, ge=0, le=100_000,
                       description="form, sorm: importance-sampling runs around the design "
                                   "points that check pf (0: none); a warning when they disagree")
    p0: float = Field(0.1, gt=0, lt=0.5, description="subset: the conditional probability of "
                                                      "each level")
    gradient: Literal["auto", "adjoint", "forward", "differences"] = Field(
        "auto", description="form, sorm, importance: the gradient of g at each step: adjoint or "
                            "forward (sensitivities of an ode or stockflow model, in-process: "
                            "no extra runs, whatever the number of parameters), differences "
                            "(forward differences of runs, one per parameter), or auto (the "
                            "adjoint where it applies, else differences)")
    step: float = Field(1e-3, gt=0, le=0.1, description="form, sorm, importance: the "
                                                         "differences' step, in standard "
                                                         "deviations")
    design_points: bool = Field(True, description="form, sorm: search again from three other "
                                                  "starts, and warn when they find other design "
                                                  "points")

    def condition(self):
        from studyrun.analyses.reliability.space import failure

        return failure(self.failure)

    @property
    def most_runs(self) -> int:
        """max_runs as the study sets it, or the method's default."""
        if self.method == "ak-mcs" and "max_runs" not in self.model_fields_set:
            return AK_DEFAULT_RUNS
        return self.max_runs

    @property
    def first_round(self) -> int:
        return min(self.start or SAMPLERS.get(self.method, 1), self.most_runs)

    def check(self, context: StudyContext) -> list[Problem]:
        """The condition parses and names quantities; the parameters are continuous."""
        from studyrun.blocks.expr import ExprError
        from studyrun.core.text import suggest

        problems = [Problem(f"parameters.{name} is discrete; a reliability analysis works in a "
                            "continuous standard normal space (fix it, or give it a continuous "
                            "distribution)", "type")
                    for name, p in context.varied.items() if p.kind == "discrete"]
        if not context.varied:
            problems.append(Problem("a reliability analysis needs at least one varied "
                                    "parameter", "type"))
        try:
            condition = self.condition()
        except ExprError as error:
            return [*problems, Problem(str(error), "failure")]
        known = (set(context.quantities) if context.quantities is not None
                 else set(context.model.output_names() or []) or None)
        for name in sorted(condition.names - (known or condition.names)):
            problems.append(Problem(f"{name!r} is not a quantity of the study"
                                    f"{suggest(name, known or set())} (quantities: "
                                    f"{', '.join(sorted(known or [])) or 'none'})", "failure"))
        if self.method in FORMS and self.gradient in EXACT:
            try:
                choice = self.gradients(context, condition)
            except Exception:  # an invalid model: its own check reports it
                choice = None
            if choice and choice.problem:
                problems.append(Problem(choice.problem, "gradient"))
        elif "gradient" in self.model_fields_set and self.method not in FORMS:
            problems.append(Problem(f"gradient applies to method: {' | '.join(FORMS)}, not "
                                    f"{self.method}", "gradient"))
        if self.method == "ak-mcs" and self.most_runs > AK_MAX_RUNS:
            problems.append(Problem(f"ak-mcs fits a Gaussian process on every run: at most "
                                    f"{AK_MAX_RUNS:,} (found {self.max_runs:,}; it needs tens "
                                    "to hundreds); for more runs use subset", "max_runs"))
        if self.method == "subset" and self.first_round * self.p0 < 1:
            problems.append(Problem(f"start ({self.first_round}) times p0 ({self.p0:g}) is "
                                    "below one run: no level would have a seed", "start"))
        return problems

    def run_count(self, context: StudyContext) -> tuple[int, str] | None:
        return self.most_runs, "max_runs"

    def footprint(self, context: StudyContext):
        """ak-mcs: its GP on every run and the population at its largest; else the runs."""
        from studyrun.analyses.base import runs_footprint

        if self.method != "ak-mcs":
            return runs_footprint(context, (self.most_runs, "max_runs"))
        from studyrun.analyses.reliability.active import population_footprint

        return population_footprint(context, self.most_runs, self.population)

    def design(self, context: StudyContext, seed) -> Design:
        """The first round: a Monte Carlo round or level 0 of subset (the same points the
        analysis runs first), or the median point where FORM starts."""
        from studyrun.analyses.reliability.sampling import stream

        names, d = list(context.varied), len(context.varied)
        if self.method in ("monte_carlo", "subset"):
            u = (stream(seed, 1, 0) if self.method == "monte_carlo" else stream(seed, 3)) \
                .standard_normal((self.first_round, d))
        elif self.method == "ak-mcs":
            from studyrun.analyses.reliability.active import first_points

            u = first_points(seed, d, self.first_round)
        else:
            u = np.zeros((1, d))
        return Design(names, self.transform(context).to_physical(u),
                      {"iterative": True, "method": self.method})

    def gradients(self, context: StudyContext, condition=None):
        """The gradient of g this study gets (gradients.Choice)."""
        from studyrun.analyses.reliability.gradients import choose

        return choose(self.gradient, context, condition or self.condition())

    def transform(self, context: StudyContext):
        from studyrun.analyses.reliability.space import Transform

        return Transform(dict(context.varied), context.correlation)

    def describe_design(self, design: Design, context: StudyContext) -> str:
        target = (self.until or Cov(cov=DEFAULT_COV)).cov
        bound = f"at most {self.most_runs:,} runs"
        if self.method == "monte_carlo":
            return (f"reliability (monte_carlo): {self.first_round:,} runs, then rounds grown "
                    f"to the runs the cov so far says a cov of pf of {target:g} needs (at most "
                    f"doubling), {bound}")
        if self.method == "subset":
            return (f"reliability (subset): {self.first_round:,} runs, then levels of "
                    f"{self.first_round - round(self.p0 * self.first_round):,} runs (p0 "
                    f"{self.p0:g}) until a level reaches the failure domain, {bound}")
        if self.method == "ak-mcs":
            return (f"reliability (ak-mcs): {self.first_round:,} runs, then {self.batch} at a "
                    f"time where a Gaussian process is least sure how it classifies "
                    f"{self.population:,} Monte Carlo points (more while the cov of pf is above "
                    f"{target:g}), {bound}")
        choice = self.gradients(context)
        used = choice.method
        hessian = "differences of the model's gradients" if used in EXACT and choice.smooth \
            else "differences"
        check = (f", then {self.check_runs} importance-sampling runs that check pf"
                 if self.check_runs else "")
        also = {"form": check, "sorm": f", then a Hessian of {hessian} there{check}",
                "importance": f", then importance sampling around it in rounds from "
                              f"{self.first_round:,} runs until the cov of pf is {target:g}"}
        gradient = (f"its gradient by the model's {used} (in-process, no runs)"
                    if used in EXACT else f"{len(context.varied)} more for its gradient")
        return (f"reliability ({self.method}): the median point and {gradient}, then iHL-RF "
                f"steps to the design point{also[self.method]}, {bound}")

    def iterate(self, evaluate, context: StudyContext, seed) -> dict[str, Any]:
        from studyrun.analyses.reliability import form as form_
        from studyrun.analyses.reliability import sampling
        from studyrun.analyses.reliability.gradients import ExactSlope
        from studyrun.analyses.reliability.space import LimitState

        condition = self.condition()
        transform = self.transform(context)
        limit = LimitState(evaluate, transform, condition)
        d, names = len(context.varied), list(context.varied)
        target = (self.until or Cov(cov=DEFAULT_COV)).cov
        if self.method == "monte_carlo":
            results = sampling.monte_carlo(limit, condition.failed, d, seed, self.first_round,
                                           target, self.max_runs)
        elif self.method == "subset":
            results = sampling.subset(limit, condition.failed, d, seed, self.first_round,
                                      self.p0, self.max_runs)
        elif self.method == "ak-mcs":
            from studyrun.analyses.reliability.active import ak_mcs

            results = ak_mcs(limit, condition.failed, d, seed, self.first_round,
                             self.population, self.batch, target, self.most_runs)
        else:
            choice = self.gradients(context, condition)
            slope = None if choice.gradient is None else ExactSlope(
                choice.gradient, transform, form_.differences(self.step))
            results = form_.form(limit, names, transform.named, self.step, self.max_runs,
                                 self.design_points and self.method != "importance",
                                 self.method == "sorm", slope,
                                 slope.exact if slope and choice.smooth else None, self.sorm)
            if self.method == "importance":
                results = self.sampled_around(results, limit, seed, target)
            else:
                results = self.checked(results, limit, seed)
            results["gradient"] = slope.summary() if slope else {"method": "differences"}
            if slope and slope.failures:
                results.setdefault("warnings", []).append(
                    f"the {choice.method} gradient failed at {len(slope.failures)} points "
                    f"({slope.failures[0]}); forward differences of runs stood in there")
            if choice.notes:
                results.setdefault("notes", []).extend(choice.notes)
        results["runs"] = limit.runs  # points evaluated, a point asked for twice counted twice
        if limit.plane() is not None:
            results["plane"] = limit.plane()
        results["dropped_runs"] = limit.dropped
        if limit.dropped:
            results.setdefault("warnings", []).append(
                f"{limit.dropped} runs failed or gave no finite value of the condition; "
                "they count as neither failed nor safe")
        correlated = context.correlation is not None and "importance" in results
        if correlated:
            results.setdefault("notes", []).append(
                "with correlated inputs, importance holds alpha^2 of the independent standard "
                "variables in the parameters' order (each given those before it)")
        return results

    def checked(self, found: dict[str, Any], limit, seed) -> dict[str, Any]:
        """FORM's or SORM's results, checked by importance sampling around the design points
        where check_runs and max_runs leave room."""
        from studyrun.analyses.reliability import sampling

        point = found.get("design_point")
        runs = min(self.check_runs, self.max_runs - limit.runs)
        if point is None or runs < 2:
            return found
        centres = [list(p["standard"].values()) for p in found.get("design_points", [])] \
            or [list(point["standard"].values())]
        return sampling.checked(found, limit, limit.condition.failed, np.array(centres), seed,
                                runs)

    def sampled_around(self, found: dict[str, Any], limit, seed, target: float) -> dict[str, Any]:
        """Importance sampling around FORM's design point, with what FORM found beside it."""
        from studyrun.analyses.reliability import sampling

        if found.get("design_point") is None:
            found["method"] = "importance"
            return found
        centre = np.array(list(found["design_point"]["standard"].values()))
        used = limit.runs
        results = sampling.importance(limit, limit.condition.failed, centre, seed,
                                      min(self.first_round, self.max_runs - used), target,
                                      self.max_runs - used) \
            if used < self.max_runs else sampling.estimate(None, None, None, 0, "importance",
                                                           False, [])
        results["runs"] = limit.runs
        results["design_point"] = found["design_point"]
        results["importance"] = found["importance"]
        results["form_pf"] = found["pf"]
        results["warnings"] = found.get("warnings", []) + results.get("warnings", [])
        if not results["warnings"]:
            del results["warnings"]
        return results

    def report(self, analysis, outcome, figures) -> str:
        from studyrun.analyses.reliability.report import section

        return section(analysis, figures)
