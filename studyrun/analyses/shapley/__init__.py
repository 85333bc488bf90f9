"""Shapley effects and Kucherenko's indices (plan and analyse steps), for independent or
correlated inputs.

Three ways to them. `permutations`: Song, Nelson and Staum's (2016) estimator on runs of the
model, every subset's cost once (exact, up to 8 inputs by default) or the prefixes of random
orders; inputs drawn by exact conditional sampling under the study's Gaussian copula
(estimator.py). `knn`: Broto, Bachoc and Depecker's (2020) nearest-neighbour estimator on given
rows (`from:`) or on a correlated sample (knn.py). `surrogate`: a PCE or GP fitted to a
correlated sample (analyses/surrogate), then the permutation estimator on it.

Results per quantity: shapley (parameter -> effect; they sum to 1), shapley_conf, variance,
kucherenko (S1, S1_conf, ST, ST_conf), dropped_runs, warnings; q2 with `surrogate`.

Formulas, defaults and edge cases: docs/methods.md, "Shapley effects".
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

import numpy as np
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PositiveInt,
    ValidationInfo,
    field_validator,
    model_validator,
)

from studyrun.analyses.base import StudyContext
from studyrun.analyses.given import ReadsGiven, not_with_from
from studyrun.analyses.salib import MIN_RUNS, Confidence, Resamples, failed_rows, map_to_natural
from studyrun.analyses.shapley.estimator import EXACT_UP_TO
from studyrun.analyses.shapley.records import ShapleyResults
from studyrun.core.design import Design, Outcome
from studyrun.core.errors import Problem
from studyrun.core.numbers import finite_or_none
from studyrun.core.plugin import Example

if TYPE_CHECKING:
    from studyrun.results.report.figures import Figures

RANDOM_PERMUTATIONS = 100  # permutations: auto beyond EXACT_UP_TO inputs
KNN_SAMPLES, SURROGATE_SAMPLES = 1000, 400
WIDE_INTERVAL = 0.1
RESAMPLES = 100  # permutations: bootstrap resamples


class Sizes(BaseModel):
    """Song et al.'s sample sizes for `method: permutations`. The defaults cost 2,300 runs at 3
    inputs (N_V + 6 N_O N_I) and leave effects within about 0.03 (half-widths about 0.06); an
    expensive model is better served by `method: surrogate` (400 runs)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    total: PositiveInt = Field(500, ge=2, description="N_V: independent runs for the output's "
                               "variance")
    outer: PositiveInt = Field(100, ge=2, description="N_O: draws of the other inputs for each "
                               "subset's cost")
    inner: PositiveInt = Field(3, ge=2, description="N_I: conditional draws of the subset for "
                               "each outer draw (Song et al. advise 3)")
    permutations: Literal["auto", "exact"] | PositiveInt = Field(
        "auto", description=f"exact (every subset once), a number of random orders, or auto: "
        f"exact up to {EXACT_UP_TO} inputs, else {RANDOM_PERMUTATIONS} random orders")


class Shapley(ReadsGiven):
    """`analysis: {type: shapley}`: Shapley effects and Kucherenko's indices, inputs
    correlated or not."""

    without_correlation = None  # conditional sampling under the study's copula

    type: Literal["shapley"]
    tutorial = "Shapley effects"
    example = Example({"analysis": {"type": "shapley",
                                    "samples": {"total": 16, "outer": 4, "inner": 2},
                                    "resamples": 10}},
                      failing={})
    results_model = ShapleyResults
    method: Literal["permutations", "knn", "surrogate"] = Field(
        "permutations", description="permutations: conditional sampling of the model (Song et "
        "al.); knn: nearest neighbours in given rows (Broto et al.); surrogate: a PCE or GP, "
        "then conditional sampling of it")
    samples: Sizes | PositiveInt | None = Field(
        None, description=f"permutations: {{total, outer, inner, permutations}}; knn: runs to "
        f"draw (default {KNN_SAMPLES}; not with from); surrogate: training runs (default "
        f"{SURROGATE_SAMPLES})")
    neighbours: int = Field(3, ge=2, le=50, description="knn: the neighbours whose variance "
                            "estimates a conditional variance")
    surrogate: Literal["pce", "gp"] = Field("pce", description="surrogate: which one")
    confidence: Confidence = 0.95
    resamples: Resamples | None = Field(
        None, description="permutations: bootstrap resamples for the intervals (default 100); "
        "knn: splits of the rows into halves, each estimated again (default 10)")

    @model_validator(mode="after")
    def _consistent(self) -> "Shapley":
        not_with_from(self, "samples")
        if self.from_ is not None and self.method != "knn":
            raise ValueError(f"from (runs that exist) needs method: knn; method "
                             f"{self.method} makes its own runs")
        return self

    @field_validator("samples")
    @classmethod
    def _samples_fit_the_method(cls, value: Sizes | int | None,
                                info: ValidationInfo) -> Sizes | int | None:
        method = info.data.get("method", "permutations")
        if method == "permutations" and isinstance(value, int):
            raise ValueError("method permutations takes samples: {total, outer, inner, "
                             f"permutations}}; got the number {value}")
        if method != "permutations" and isinstance(value, Sizes):
            raise ValueError(f"method {method} takes samples: a number of runs; "
                             "{total, outer, inner, permutations} is for method permutations")
        return value

    @property
    def sizes(self) -> Sizes:
        return self.samples if isinstance(self.samples, Sizes) else Sizes()

    def orders(self, d: int) -> int | None:
        """Random orders to draw; None: exact."""
        chosen = self.sizes.permutations
        if chosen == "exact" or (chosen == "auto" and d <= EXACT_UP_TO):
            return None
        return RANDOM_PERMUTATIONS if chosen == "auto" else int(chosen)

    def runs(self) -> int:
        if isinstance(self.samples, int):
            return self.samples
        return KNN_SAMPLES if self.method == "knn" else SURROGATE_SAMPLES

    def check(self, context: StudyContext) -> list[Problem]:
        from studyrun.analyses.shapley.knn import MOST_INPUTS, MOST_SEARCHES, SPLITS

        problems = super().check(context)
        d = len(context.varied)
        if self.method == "knn" and d > MOST_INPUTS:
            problems.append(Problem(f"method knn searches the neighbours of every subset of the "
                                    f"inputs: at most {MOST_INPUTS} varied parameters; got {d}; "
                                    "use method: surrogate or permutations", "method"))
        if self.method == "permutations" and self.sizes.permutations == "exact" and d > 16:
            problems.append(Problem(f"exact permutations estimate 2^d - 2 costs: {d} inputs are "
                                    "too many; give a number of random permutations",
                                    "samples.permutations"))
        if self.method == "surrogate":
            problems += [Problem(f"parameters.{name} is discrete; a surrogate needs continuous "
                                 "inputs (fix it, or use method: permutations)", "method")
                         for name, p in context.varied.items() if p.kind == "discrete"]
        rows = self.given(context) if self.from_ is not None and not problems else None
        if rows is not None and rows.size < MIN_RUNS:
            problems.append(Problem(f"{self.from_} holds {rows.size} runs; knn needs at least "
                                    f"{MIN_RUNS}", "from"))
        size = rows.size if rows is not None else self.runs()
        rounds = 1 + (self.resamples or SPLITS)  # the whole, then each split's two halves
        if self.method == "knn" and not problems and rounds * size * ((1 << d) - 2) > MOST_SEARCHES:
            problems.append(Problem(
                f"knn searches the neighbours of {size:,} rows in each of {(1 << d) - 2:,} "
                f"subsets of the inputs, {rounds} times (the rows, then each of {rounds - 1} "
                f"splits into halves), more than {MOST_SEARCHES:,} searches (about ten minutes "
                "of CPU); use fewer rows, fewer resamples, or method: surrogate",
                "from" if rows is not None else "samples"))
        return problems

    def run_count(self, context: StudyContext) -> tuple[int, str] | None:
        d = len(context.varied)
        if self.from_ is not None:
            return None
        if self.method != "permutations":
            return self.runs(), "samples"
        s, m = self.sizes, self.orders(d)
        if d < 2:
            return s.total, "samples.total"
        blocks = (1 << d) - 2 if m is None else m * (d - 1) + 2 * d
        return s.total + blocks * s.outer * s.inner, "samples.outer"

    def design(self, context: StudyContext, seed: np.random.SeedSequence) -> Design:
        """Permutations: N_V runs drawn from the joint distribution, then each subset's
        outer x inner conditional draws; knn and surrogate: a correlated Latin hypercube (or the
        rows of `from:`)."""
        from studyrun.blocks.params import correlate_unit, design_facts, sample_unit

        names = list(context.varied)
        design_seed, analysis_seed = (int(s) for s in seed.generate_state(2))
        info: dict[str, Any] = {"method": self.method, "analysis_seed": analysis_seed}
        rows = self.given(context)
        if rows is not None:
            return rows.design(info | {"sampling": "given"})
        if self.method == "permutations":
            from scipy.special import ndtr

            from studyrun.analyses.shapley.estimator import design_scores, scheme

            rng = np.random.default_rng(design_seed)
            s, m = self.sizes, self.orders(len(names))
            plan = scheme(len(names), m, rng)
            z = design_scores(plan, s.total, s.outer, s.inner, context.correlation, rng)
            info |= {"total": s.total, "outer": s.outer, "inner": s.inner,
                     "permutations": "exact" if m is None else m, "design_seed": design_seed,
                     "blocks": len(plan.blocks)}
            x = map_to_natural(ndtr(z), context.varied, names)
            return Design(names, x, info | design_facts(context.correlation, names, x[:s.total]))
        unit = correlate_unit(sample_unit(self.runs(), len(names), "lhs",
                                          np.random.SeedSequence(design_seed)),
                              context.correlation, "lhs")
        x = map_to_natural(unit, context.varied, names)
        info["sampling"] = "lhs"
        return Design(names, x, info | design_facts(context.correlation, names, x))

    def describe_design(self, design: Design, context: StudyContext) -> str:
        info = design.info
        if info.get("method") != "permutations":
            return ""
        orders = ("every subset's cost once (exact permutations)" if info["permutations"] == "exact"
                  else f"{info['permutations']} random permutations")
        runs = info["total"] + info["blocks"] * info["outer"] * info["inner"]
        return (f"shapley: {info['total']} runs for the variance, then {info['blocks']} costs of "
                f"{info['outer']} x {info['inner']} conditional runs: {orders}; {runs:,} runs in "
                f"all (for an expensive model, method: surrogate fits {SURROGATE_SAMPLES})")

    def analyse(self, outcome: Outcome, context: StudyContext) -> dict[str, Any]:
        return {name: self.analyse_quantity(values, failed_rows(outcome, name, values),
                                            outcome.design, context)
                for name, values in outcome.values.items()}

    def analyse_quantity(self, y: np.ndarray, bad: np.ndarray, design: Design,
                         context: StudyContext) -> dict[str, Any]:
        from studyrun.analyses.shapley.estimator import Constant, TooFew

        names, info = design.names, design.info
        facts: dict[str, Any] = {"dropped_runs": int(bad.sum())}
        try:
            if self.method == "permutations":
                found = self.by_permutations(y, bad, info, len(names))
            elif self.method == "knn":
                found = self.by_neighbours(design.matrix, y, bad, info)
            else:
                found = self.by_surrogate(design.matrix, y, bad, info, context)
        except TooFew as few:
            return {"error": f"too few usable runs: {few.fewest} where at least 2 are needed for "
                             "each variance (failed runs and NaN values are left out)", **facts}
        except Constant:
            zeros = dict.fromkeys(names, 0.0)
            return {"shapley": zeros, "shapley_conf": zeros, "variance": 0.0,
                    "kucherenko": {k: zeros for k in ("S1", "S1_conf", "ST", "ST_conf")},
                    **facts, "warnings": ["the quantity is the same in every run: no parameter "
                                          "changes it, so every effect is 0"]}
        return self.entry(found, names, facts)

    def by_permutations(self, y: np.ndarray, bad: np.ndarray, info: dict[str, Any],
                        d: int) -> dict[str, Any]:
        from studyrun.analyses.shapley.estimator import Sizes as Counts
        from studyrun.analyses.shapley.estimator import estimate, scheme

        m = None if info["permutations"] == "exact" else int(info["permutations"])
        plan = scheme(d, m, np.random.default_rng(info["design_seed"]))
        counts = Counts(info["total"], info["outer"], info["inner"])
        return estimate(y, bad, plan, counts, self.resamples or RESAMPLES, self.confidence,
                        info["analysis_seed"])

    def by_neighbours(self, x: np.ndarray, y: np.ndarray, bad: np.ndarray,
                      info: dict[str, Any]) -> dict[str, Any]:
        from studyrun.analyses.shapley.estimator import TooFew
        from studyrun.analyses.shapley.knn import SPLITS, knn_indices

        keep = ~bad
        if keep.sum() < max(MIN_RUNS, 2 * (self.neighbours + 1)):  # the halves need neighbours
            raise TooFew(int(keep.sum()))
        found = knn_indices(x[keep], y[keep], self.neighbours, self.resamples or SPLITS,
                            self.confidence, info["analysis_seed"])
        return found | {"effective_N": int(keep.sum())}

    def by_surrogate(self, x: np.ndarray, y: np.ndarray, bad: np.ndarray, info: dict[str, Any],
                     context: StudyContext) -> dict[str, Any]:
        from studyrun.analyses.shapley.estimator import TooFew, on_surrogate
        from studyrun.analyses.surrogate.fitting import Inputs, Settings, fit_quantity

        keep = ~bad
        if keep.sum() < MIN_RUNS:
            raise TooFew(int(keep.sum()))
        inputs = Inputs(context.varied)  # fitted as a regression; the copula enters below
        settings = Settings(self.surrogate, None, 1.0, "lars", 5, False, self.confidence, 10)
        fitted = fit_quantity(x[keep], y[keep], inputs, settings, info["analysis_seed"])
        found = on_surrogate(fitted.surrogate, inputs.natural, len(inputs.names),
                             context.correlation, self.confidence, info["analysis_seed"])
        missing = max(0.0, 1.0 - fitted.q2) if np.isfinite(fitted.q2) else 1.0
        for key in ("shapley_conf", "S1_conf", "ST_conf"):
            found[key] = np.minimum(1.0, found[key] + missing)
        found["q2"] = fitted.q2
        found["effective_N"] = int(keep.sum())
        if fitted.q2 < 0.9:
            found["notes"] = [f"the surrogate's cross-validated Q2 is {fitted.q2:.3f}, below 0.9: "
                              "it misses part of the model, so the effects are rough; use more "
                              "samples or the other surrogate"]
        return found

    def entry(self, found: dict[str, Any], names: list[str], facts: dict[str, Any]) -> dict[str, Any]:
        def named(values: Any) -> dict[str, float | None]:
            return {n: finite_or_none(v) for n, v in zip(names, values)}

        entry: dict[str, Any] = {"shapley": named(found["shapley"]),
                                 "shapley_conf": named(found["shapley_conf"]),
                                 "variance": finite_or_none(found["variance"]),
                                 "kucherenko": {k: named(found[k])
                                                for k in ("S1", "S1_conf", "ST", "ST_conf")}}
        if "q2" in found:
            entry["q2"] = finite_or_none(found["q2"])
        if "effective_N" in found:
            facts = {"effective_N": found["effective_N"], **facts}
        entry |= facts
        notes = list(found.get("notes", []))
        if found.get("dropped_outer"):
            notes.append(f"{found['dropped_outer']} outer draws left out because a run in them "
                         "failed or gave no finite value; if failures depend on the inputs, the "
                         "effects describe only the region where the model runs")
        elif facts["dropped_runs"]:
            notes.append(f"{facts['dropped_runs']} runs failed or gave no finite value and were "
                         "left out")
        widths = {n: w for n, w in entry["shapley_conf"].items() if w is not None}
        if widths and max(widths.values()) > WIDE_INTERVAL:
            worst = max(widths, key=widths.__getitem__)
            notes.append(f"wide confidence intervals: shapley_conf is {widths[worst]:.3g} for "
                         f"{worst} (above {WIDE_INTERVAL}); increase samples")
        entry["warnings"] = notes
        return entry

    def report(self, analysis: dict[str, Any], outcome: Outcome | None, figures: "Figures") -> str:
        from studyrun.analyses.shapley.report import write_report

        return write_report(analysis, figures)
