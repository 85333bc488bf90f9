"""Surrogate models: a polynomial chaos expansion (PCE) or a Gaussian process (GP) fitted to a few
hundred runs, validated by cross-validation, and the mean, standard deviation and Sobol' indices
it gives (as Dakota, OpenTURNS, UQLab and EasyVVUQ answer them).

The training runs come from a design (`samples`, `sampling`) or from another study's results
folder (`from:`). With `until:` further runs are added in batches, through the executor and the
store like every run, until every quantity's cross-validated Q2 reaches the target or the runs
reach `max_samples`: a PCE continues its sequence (a Latin hypercube adds a new hypercube per
batch), a GP adds the candidates where its predictive variance is largest. Each batch is derived
from the seed and the runs before it, so a killed study resumes where it was.

Results per quantity: q2, rmse, mean, std, S1, S1_conf, ST, ST_conf (S2, S2_conf with
`second_order`), trusted, samples, validation (observed and cross-validated predictions),
convergence (with `until:`), and the fitted surrogate as JSON: inputs and terms (pce) or kernel
(gp). `studyrun predict` and `open_results(DIR).predict` evaluate it.

With correlated inputs (the study's `correlation:`) the training runs are drawn correlated, mean
and std are the surrogate's over correlated draws, and the Sobol' indices are null.

Formulas, defaults and edge cases: docs/methods.md, "Surrogate models" and "Correlated inputs".
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, PositiveInt, model_validator

from studyrun.analyses.base import IterativeAnalysis, StudyContext
from studyrun.analyses.given import given_problems, read_given
from studyrun.analyses.salib import Confidence, Resamples
from studyrun.analyses.surrogate.gp import MAX_TRAINING
from studyrun.analyses.surrogate.records import SurrogateResults
from studyrun.analyses.surrogate.sizes import gp_footprint, pce_footprint
from studyrun.analyses.surrogate.training import Training, earlier_runs
from studyrun.blocks.params import correlate_unit, map_unit, sample_unit, sample_unit_range
from studyrun.core.design import Design, Outcome
from studyrun.core.errors import Problem, StudyError
from studyrun.core.plugin import Example
from studyrun.core.sizes import Footprint

if TYPE_CHECKING:
    from studyrun.analyses.given import GivenRows
    from studyrun.analyses.surrogate.fitting import Fitted, Settings

DEFAULT_SAMPLES = 400
CANDIDATES = 2048  # Sobol' candidates a GP chooses each batch's runs from


class Until(BaseModel):
    """`until:`: add runs in batches until the cross-validated Q2 of every quantity is reached."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    q2: float = Field(gt=0, le=1, description="the cross-validated Q2 every quantity must reach")
    max_samples: PositiveInt = Field(description="stop at this many training runs in all")
    batch: PositiveInt | None = Field(None, description="runs added each round (default: half "
                                                        "the initial samples)")


class Surrogate(IterativeAnalysis):
    """`analysis: {type: surrogate}`: a PCE or GP surrogate, validated, and its indices."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)
    without_correlation = None  # training runs drawn correlated; moments over correlated draws

    type: Literal["surrogate"]
    tutorial = "Surrogates"
    example = Example({"analysis": {"type": "surrogate", "samples": 24, "resamples": 10,
                                    "validation": 4}},
                      failing={})
    predicts = "studyrun.analyses.surrogate.predict:predict"
    results_model = SurrogateResults
    method: Literal["pce", "gp"] = "pce"
    samples: PositiveInt | None = Field(None, description=f"training runs (default "
                                                          f"{DEFAULT_SAMPLES}; not with from)")
    sampling: Literal["lhs", "sobol", "random"] = "lhs"
    from_: str | None = Field(None, alias="from", description="train on the runs of a CSV (one "
                              "column per varied parameter and per quantity) or of another study's "
                              "results folder (relative to the study file); nothing re-runs")
    degree: Literal["auto"] | PositiveInt = Field(
        "auto", description="pce: the largest total degree; auto: chosen by the corrected "
                            "leave-one-out error")
    q: float = Field(1.0, gt=0, le=1, description="pce: hyperbolic truncation, sum(a_i^q)^(1/q) "
                                                  "<= degree; 1 is total degree")
    fit: Literal["lars", "ols"] = Field("lars", description="pce: how coefficients are chosen "
                                        "(sparse, along a least-angle regression path; or least "
                                        "squares on every term)")
    validation: Annotated[int, Field(ge=2)] | Literal["loo"] = Field(
        5, description="k-fold cross-validation (at least 2 folds), or loo")
    until: Until | None = None
    second_order: bool = False
    confidence: Confidence = 0.95
    resamples: Resamples = Field(100, description="bootstrap resamples (pce) or posterior "
                                                  "draws (gp) for the intervals")

    @model_validator(mode="after")
    def _consistent(self) -> "Surrogate":
        if self.from_ is not None and self.samples is not None:
            raise ValueError("give samples (runs to make) or from (runs that exist), not both")
        if self.method == "gp" and (self.degree != "auto" or self.q != 1.0 or self.fit != "lars"):
            raise ValueError("degree, q and fit belong to method: pce; a gp has none of them")
        if self.until is not None and self.until.max_samples < self.initial_samples:
            raise ValueError(f"until.max_samples ({self.until.max_samples}) is below the "
                             f"initial samples ({self.initial_samples})")
        return self

    @property
    def initial_samples(self) -> int:
        return self.samples or DEFAULT_SAMPLES

    def settings(self) -> "Settings":
        from studyrun.analyses.surrogate.fitting import Settings

        return Settings(self.method, None if self.degree == "auto" else self.degree, self.q,
                        self.fit, None if self.validation == "loo" else self.validation,
                        self.second_order, self.confidence, self.resamples)

    def check(self, context: StudyContext) -> list[Problem]:
        problems = [Problem(f"parameters.{name} is discrete; a surrogate needs continuous inputs "
                            "(fix it, or give it a continuous distribution)", "type")
                    for name, p in context.varied.items() if p.kind == "discrete"]
        if not context.varied:
            problems.append(Problem("a surrogate needs at least one varied parameter", "type"))
        if self.from_ is not None:
            problems += given_problems(self.from_, context)
        if self.until is not None and getattr(context.model, "type", None) == "none":
            problems.append(Problem("until adds runs of the model, and the study has none; add a "
                                    "model: block, or leave until out", "until"))
        training = self.training_runs(context) if self.method == "gp" else None
        if training is not None and training[1] > MAX_TRAINING:
            problems.append(Problem(
                f"a gp is trained on at most {MAX_TRAINING:,} runs (its results folder keeps them "
                f"all, for `studyrun predict`); found {training[1]:,}; use method: pce, or fewer "
                "runs", training[0]))
        return problems

    def run_count(self, context: StudyContext) -> tuple[int, str] | None:
        if self.until is not None:
            return self.until.max_samples, "until.max_samples"
        return (None if self.from_ is not None else (self.initial_samples, "samples"))

    def footprint(self, context: StudyContext) -> Footprint | None:
        """The training runs (`until.max_samples`, `samples`, or the rows of `from`); a GP's
        matrices of every pair of them and its predictions; a PCE's basis at them."""
        training = self.training_runs(context)
        if training is None:
            return None
        key, runs = training
        if self.method == "gp":
            return gp_footprint(key, runs, context, self)
        return pce_footprint(key, runs, context, self)

    def training_runs(self, context: StudyContext) -> tuple[str, int] | None:
        """The key that sets the number of training runs and that number (None: `from` cannot
        be read; check() says why)."""
        if self.until is not None:
            return "until.max_samples", self.until.max_samples
        if self.from_ is None:
            return "samples", self.initial_samples
        try:
            return "from", read_given(self.from_, context).size
        except StudyError:
            return None

    def given(self, context: StudyContext) -> "GivenRows | None":
        return None if self.from_ is None else read_given(self.from_, context)

    def rows_given(self) -> bool:
        return False  # trained on given rows, its moments are over the parameters' distribution

    def provenance(self, context: StudyContext) -> dict[str, Any]:
        if self.from_ is None:
            return {}
        return {"trained_on": read_given(self.from_, context).provenance()}

    def iterate(self, evaluate, context: StudyContext, seed: np.random.SeedSequence) -> dict:
        """Train, validate, and (with `until:`) add batches of runs until Q2 is reached."""
        from studyrun.analyses.surrogate.fitting import Inputs, fit_quantity

        inputs = Inputs(context.varied, context.correlation)
        design_seed, fit_seed, batch_seed = seed.spawn(3)
        training = (earlier_runs(self.from_, context) if self.from_ is not None
                    else Training.of(evaluate(self.initial_design(context, design_seed))))
        history: list[dict[str, Any]] = []
        fit_state = int(fit_seed.generate_state(1)[0])
        while True:
            fitted = {name: fit_quantity(*training.rows(name), inputs, self.settings(), fit_state)
                      for name in training.quantities}
            history.append({"samples": training.size,
                            "q2": {name: f.q2 for name, f in fitted.items()}})
            if not self.more_needed(fitted, training.size):
                break
            batch = self.next_batch(context, training, fitted, design_seed, batch_seed,
                                    len(history))
            training = training.extended(evaluate(batch))
        return self.results(fitted, training, history)

    def design(self, context: StudyContext, seed: np.random.SeedSequence) -> Design:
        """The training runs made first (none with `from:`); `until:` plans the rest as it goes."""
        names = list(context.varied)
        if self.from_ is not None:
            return Design(names, np.zeros((0, len(names))), {"iterative": True})
        return Design(names, self.initial_design(context, seed.spawn(3)[0]),
                      {"iterative": True, "method": self.method})

    def describe_design(self, design: Design, context: StudyContext) -> str:
        first = (f"trains on the runs of {self.from_}" if self.from_ is not None
                 else f"{len(design.matrix)} training runs ({self.sampling})")
        more = "" if self.until is None else (
            f", then batches of {self.until.batch or max(1, self.initial_samples // 2)} until Q2 "
            f"reaches {self.until.q2} or {self.until.max_samples} runs")
        return f"surrogate ({self.method}): {first}{more}"

    def initial_design(self, context: StudyContext, seed: np.random.SeedSequence) -> np.ndarray:
        return self.sequence(context, seed, 0, self.initial_samples)

    def sequence(self, context: StudyContext, seed, start: int, stop: int) -> np.ndarray:
        """Runs start..stop of the design's sequence, in natural units (sobol and random: the
        prefix property; lhs: a hypercube per batch, seeded by its start)."""
        unit = sample_unit_range(start, stop, len(context.varied), self.sampling, seed)
        return map_unit(context.varied, correlate_unit(unit, context.correlation, self.sampling))

    def more_needed(self, fitted: dict[str, "Fitted"], size: int) -> bool:
        if self.until is None or size >= self.until.max_samples or not fitted:
            return False
        return min(f.q2 for f in fitted.values()) < self.until.q2

    def next_batch(self, context: StudyContext, training: "Training", fitted: dict[str, "Fitted"],
                   design_seed, batch_seed, round_: int) -> np.ndarray:
        """The next runs: the sequence continued (pce), or where the GP is least sure (gp)."""
        assert self.until is not None
        size = min(self.until.batch or max(1, self.initial_samples // 2),
                   self.until.max_samples - training.size)
        if self.method == "pce":
            start = training.size if self.from_ is None else training.size - training.earlier
            return self.sequence(context, design_seed if self.from_ is None else batch_seed,
                                 start, start + size)
        from studyrun.analyses.surrogate import gp
        from studyrun.analyses.surrogate.fitting import Inputs

        worst = min(fitted, key=lambda name: fitted[name].q2)
        inputs = Inputs(context.varied)
        x, _ = training.rows(worst)
        candidates = sample_unit(CANDIDATES, len(inputs.names), "sobol",
                                 np.random.SeedSequence(batch_seed.entropy,
                                                        spawn_key=(*batch_seed.spawn_key, round_)))
        natural = inputs.natural(correlate_unit(candidates, context.correlation, "sobol"))
        chosen = gp.greedy_points(fitted[worst].model, inputs.scaled(natural), size,
                                  inputs.scaled(x))
        return natural[chosen]

    def results(self, fitted: dict[str, "Fitted"], training: "Training",
                history: list[dict[str, Any]]) -> dict[str, Any]:
        results = {}
        for name, f in fitted.items():
            block = dict(f.results)
            dropped = training.size - block["samples"]
            block["dropped_runs"] = dropped
            if dropped:
                block["warnings"] = [*block.get("warnings", []), f"{dropped} runs failed or "
                                     f"gave no finite value and were left out; the surrogate is "
                                     f"fitted to the remaining {block['samples']}"]
            if self.until is not None:
                block["convergence"] = [{"samples": h["samples"], "q2": h["q2"][name]}
                                        for h in history]
                if f.q2 < self.until.q2:
                    block.setdefault("warnings", []).append(
                        f"Q2 {f.q2:.4f} has not reached {self.until.q2} at {training.size} runs "
                        "(until.max_samples)")
            results[name] = block
        return results

    def report(self, analysis: dict[str, Any], outcome: Outcome | None, figures) -> str:
        from studyrun.analyses.surrogate.report import surrogate_report

        return surrogate_report(analysis, figures)
