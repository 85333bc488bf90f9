"""Derivative-based global sensitivity measures (plan and analyse steps); docs/methods.md,
"Derivative-based global sensitivity measures (DGSM)".

Sobol' and Kucherenko (2009), Lamboni et al. (2013): nu_i = E[(dy/dx_i)^2], the derivative in
the parameter's own units, estimated by forward differences at N base points (SALib's
unscrambled Sobol' sequence after the 1024 points it skips, mapped through each parameter's
inverse CDF); each is followed by one step h_i = `delta` (b_i - a_i) in each parameter,
[a_i, b_i] its box (its bounds, or its 0.1% and 99.9% quantiles), backward where a forward step
would leave the support. The Poincare inequality Var(g(X_i)) <= C_i E[g'(X_i)^2] bounds the
total Sobol' index:
ST_i <= dgsm_i = C_i nu_i / V, V the variance of y over the base points. C_i is the
distribution's Poincare constant: (b - a)^2 / pi^2 uniform, sigma^2 normal (and truncnormal, by
Bakry-Emery), and for the other log-concave kinds 1 / rho(median)^2 (Cheeger's inequality with
Bobkov's isoperimetric constant), capped by (b - a)^2 / pi^2 on a bounded support
(Payne-Weinberger).
Lognormal (no Poincare inequality), loguniform, discrete and beta or gamma with a shape below 1
are refused: studyrun has no constant for them.

`vi`, `vi_std` (of the squared differences) and `vi_conf` (the bootstrap interval of vi) are
SALib's `dgsm.analyze` on these runs; SALib's own `dgsm` multiplies by the uniform constant of
its `bounds`, so studyrun computes `dgsm` and `dgsm_conf` (vi_conf scaled alike) itself, and
reports each parameter's `poincare` constant.
"""

from __future__ import annotations

import math
from typing import Any, Literal, Mapping

import numpy as np
from pydantic import Field, RootModel

from studyrun.analyses.base import run_bytes
from studyrun.analyses.salib import (
    MIN_BLOCKS,
    Confidence,
    Resamples,
    SalibAnalysis,
    by_factor,
    constant_output,
    dropped_warning,
    error_entry,
    keep_whole_blocks,
    map_to_natural,
    rows_kept,
    salib_side_effects_contained,
    unit_problem,
    with_notes,
)
from studyrun.core.design import Design
from studyrun.core.errors import Problem
from studyrun.core.plugin import Example
from studyrun.core.sizes import Footprint
from studyrun.results.records import STRICT, ByName, Entry

BOOTSTRAP_BYTES = 16  # SALib's bootstrap: bytes x base points x resamples (bench_memory.py)
LOG_CONCAVE = "uniform, bounds, normal, truncnormal, triangular, beta with alpha and beta >= 1, " \
              "gamma with shape >= 1"


class DgsmQuantity(Entry):
    """Derivative-based measures: vi = E[(dy/dx_i)^2] and the bound on ST it gives."""

    vi: ByName = {}
    vi_std: ByName = {}
    vi_conf: ByName = {}
    poincare: ByName = {}  # each parameter's Poincare constant
    dgsm: ByName = {}
    dgsm_conf: ByName = {}


class DgsmResults(RootModel[dict[str, DgsmQuantity]]):
    """Quantity -> its measures."""

    model_config = STRICT


class Dgsm(SalibAnalysis):
    """`analysis: {type: dgsm}`: derivative-based measures; runs = samples x (parameters + 1)."""

    type: Literal["dgsm"]
    tutorial = "DGSM"
    example = Example({"analysis": {"type": "dgsm", "samples": 16, "resamples": 10}},
                      failing={"parameters": {"a": {"bounds": [0.1, 0.95]}}})
    results_model = DgsmResults
    samples: int = Field(1024, ge=MIN_BLOCKS, description="base points N")
    delta: float = Field(0.01, gt=0, lt=0.5, description="finite-difference step as a fraction of "
                         "each parameter's box (its bounds, or 0.1% to 99.9% quantiles)")
    confidence: Confidence = 0.95
    resamples: Resamples = 100

    title = "Derivative-based global sensitivity measures"
    keys = ("vi", "vi_std", "vi_conf", "poincare", "dgsm", "dgsm_conf")
    bars = ("dgsm",)

    def check(self, context) -> list[Problem]:
        problems = []
        for name, parameter in context.varied.items():
            if poincare_constant(parameter) is None:
                problems.append(Problem(
                    f"dgsm bounds each total index by C nu / V, C the Poincare constant of the "
                    f"parameter's distribution; studyrun knows it for {LOG_CONCAVE}, not for "
                    f"parameters.{name} ({describe(parameter)}); give {name} one of those, or "
                    f"use type: sobol, whose total indices need no such constant", "type"))
        return problems

    def base_points(self, dimensions: int) -> np.ndarray:
        """SALib's finite-difference base points on the unit cube (unscrambled Sobol')."""
        from SALib.sample import finite_diff

        names = [f"u{j}" for j in range(dimensions)]
        design = finite_diff.sample(unit_problem(names), self.samples, delta=self.delta)
        return design[::dimensions + 1]

    def run_count(self, context) -> tuple[int, str]:
        return self.samples * (len(context.varied) + 1), "samples"

    def footprint(self, context) -> Footprint:
        """The runs, and SALib's bootstrap: each parameter's base points resampled at once."""
        block, each = len(context.varied) + 1, run_bytes(context)
        return Footprint("samples", self.samples, "base points", lambda n: (
            (each * block + BOOTSTRAP_BYTES * self.resamples) * n),
            f"{each:,} bytes a run x {block} runs a base point; SALib's bootstrap: "
            f"{BOOTSTRAP_BYTES} bytes x {self.resamples:,} resamples a base point",
            ", or fewer resamples")

    def design(self, context, seed: np.random.SeedSequence) -> Design:
        """Each base point, then the point moved by h_j in parameter j, for every j."""
        parameters = context.varied
        names = list(parameters)
        base = map_to_natural(self.base_points(len(names)), parameters, names)
        width = np.array([np.subtract(*parameters[n].bounds()[::-1]) for n in names])
        upper = np.array([float(parameters[n].ppf(1.0)) for n in names])
        h = np.where(base + self.delta * width > upper, -1.0, 1.0) * self.delta * width
        rows = np.repeat(base, len(names) + 1, axis=0).reshape(len(base), len(names) + 1, -1)
        rows[:, 1:, :] += np.einsum("ij,jk->ijk", h, np.eye(len(names)))
        info = {"method": "dgsm", "block": len(names) + 1,
                "analysis_seed": int(seed.generate_state(1)[0]),
                "poincare": {n: poincare_constant(parameters[n]) for n in names}}
        return Design(names, rows.reshape(-1, len(names)), info)

    def analyse_quantity(self, values: np.ndarray, bad: np.ndarray, design: Design) -> dict[str, Any]:
        """Drop base points whose runs failed, then SALib's vi and the Poincare bound."""
        block = design.info["block"]
        keep, dropped = keep_whole_blocks(bad, block)
        kept = self.samples - dropped
        facts: dict[str, Any] = {"effective_N": kept, "dropped_blocks": dropped,
                                 "dropped_runs": dropped * block}
        if kept < MIN_BLOCKS:
            return error_entry(f"only {kept} of {self.samples} base points have every run "
                               f"succeeded; at least {MIN_BLOCKS} are needed", **facts)
        y = values[keep]
        if constant_output(y):
            return error_entry("the quantity is the same in every run: there is nothing to "
                               "apportion", **facts)
        result = self.call_salib(unit_problem(design.names), rows_kept(design.matrix, keep), y,
                                 design.info["analysis_seed"])
        constant = np.array([design.info["poincare"][n] for n in design.names])
        variance = float(np.var(y[::block]))
        vi, vi_conf = np.asarray(result["vi"], float), np.asarray(result["dgsm_conf"], float)
        entry = {"vi": by_factor(design.names, vi),
                 "vi_std": by_factor(design.names, result["vi_std"]),
                 "vi_conf": by_factor(design.names, vi_conf),
                 "poincare": by_factor(design.names, constant),
                 "dgsm": by_factor(design.names, constant * vi / variance),
                 "dgsm_conf": by_factor(design.names, constant * vi_conf / variance)}
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


def poincare_constant(parameter: Any) -> float | None:
    """C with Var g(X) <= C E[g'(X)^2] for X with this distribution; None where studyrun knows
    no constant (see the module docstring for where each comes from)."""
    kind = getattr(parameter, "kind", "")
    lo, hi = (float(v) for v in parameter.ppf(np.array([0.0, 1.0])))
    bounded = math.isfinite(lo) and math.isfinite(hi)
    if kind in ("uniform", "bounds"):
        return (hi - lo) ** 2 / math.pi ** 2
    if kind == "normal":
        return float(parameter.std) ** 2
    candidates = [(hi - lo) ** 2 / math.pi ** 2] if bounded else []
    if kind == "truncnormal":
        candidates.append(float(parameter.std) ** 2)
    elif not (kind == "triangular" or (kind == "beta" and min(parameter.alpha, parameter.beta) >= 1)
              or (kind == "gamma" and parameter.shape >= 1)):
        return None
    density = float(parameter._dist().pdf(parameter.median()))
    candidates.append(1.0 / density ** 2)
    return min(candidates)


def describe(parameter: Any) -> str:
    """The distribution, with the shape that rules it out when that is the reason."""
    kind = getattr(parameter, "kind", "?")
    if kind == "beta":
        return f"beta with alpha={parameter.alpha:g}, beta={parameter.beta:g}"
    if kind == "gamma":
        return f"gamma with shape={parameter.shape:g}"
    return kind
