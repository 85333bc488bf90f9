"""Bayesian calibration: adaptive Metropolis with delayed rejection, as FME's modMCMC (Soetaert &
Petzoldt 2010, after Haario et al. 2006, DRAM), started from the fitted estimate.

The target is exp(-SS/2) times the parameters' prior densities (their distributions in the study;
`bounds` alone is flat), zero outside the parameters' box. SS is the model cost when the error
variance is `fixed` (the data's errors are trusted), or sum_j SSR_j / sigma2_j when it is
`sample`d: each variable's sigma2_j is drawn every iteration from its inverse-gamma full
conditional with prior variance var0_j = SSR_j / N_j at the fit and prior weight wvar0 (FME's
var0, wvar0). Proposals are Gaussian with covariance 2.4^2 / m times the fit's covariance at the
start, adapted every `update_cov` iterations to 2.4^2 / m times the covariance of the samples so
far (Haario's adaptive Metropolis); after a rejection a second proposal, dr_scale times shorter,
is accepted with Mira's delayed-rejection probability. The chains advance side by side, and
each iteration's first and second proposals of every chain go out as one batch.

Formulas, defaults and edge cases: docs/methods.md, "Bayesian calibration".
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from studyrun.analyses.calibrate.cost import CostFunction
from studyrun.analyses.search.batching import Evaluations
from studyrun.analyses.search.fit import Box

SD = 2.4 ** 2  # Gelman, Roberts & Gilks' scale, divided by m below
EPS = 1e-10  # added to the adapted covariance's diagonal (relative), as Haario et al.


def run_mcmc(settings, evaluate, evaluations: Evaluations, costs: CostFunction, box: Box,
             parameters, estimate: np.ndarray, stats: dict, seed, data) -> dict[str, Any]:
    """Run the chains; return the `mcmc` block of the results."""
    rng = np.random.default_rng(seed)
    mode = settings.error_variance
    if mode == "auto":
        mode = "fixed" if all(obs.block.err for obs in data) else "sample"
    runs_before = evaluations.runs
    sampler = Sampler(settings, evaluations, costs, box, parameters, estimate, stats, mode, rng)
    n, m = settings.iterations, len(box.names)
    chain = np.empty((n, settings.chains, m))
    sig_chain = np.empty((n, settings.chains, len(costs.terms)))
    for it in range(n):
        sampler.step()
        chain[it], sig_chain[it] = sampler.x, sampler.sig2
        if settings.update_cov and (it + 1) % settings.update_cov == 0:
            sampler.R = adapted_root(chain[:it + 1].reshape(-1, m), sampler.R, m)
    runs = evaluations.runs - runs_before
    block = summarise_chains(settings, chain, sig_chain, sampler.accepted, box, costs, mode, runs)
    block["prediction"] = prediction_band(settings, evaluate, evaluations, costs, chain, rng)
    return block


class Sampler:
    """C chains side by side: their points, SSR and cost, error variances and proposal."""

    def __init__(self, settings, evaluations: Evaluations, costs: CostFunction, box: Box,
                 parameters, estimate: np.ndarray, stats: dict, mode: str, rng) -> None:
        self.settings, self.evaluations, self.box, self.mode, self.rng = (
            settings, evaluations, box, mode, rng)
        self.sizes = np.array([t.n for t in costs.terms], float)
        at_fit = evaluations(estimate[None])
        self.var0 = np.maximum(at_fit["ssr"][0] / self.sizes, 1e-300)
        self.n0 = settings.wvar0 * self.sizes
        self.priors = [prior_of(parameters[name]) for name in box.names]
        self.R = proposal_root(stats["covariance"] * SD / len(box.names), box)
        self.x = starting_points(rng, estimate, self.R, box, settings.chains)
        now = evaluations(self.x)
        self.ssr, self.cost = now["ssr"], now["cost"]
        self.sig2 = np.tile(self.var0, (settings.chains, 1))
        self.accepted = np.zeros(settings.chains)

    def log_target(self, ssr, cost, s2, points) -> np.ndarray:
        like = -0.5 * cost if self.mode == "fixed" else -0.5 * np.sum(ssr / s2, axis=1)
        return like + log_prior(self.priors, points, self.box)

    def proposals(self, y: np.ndarray, mask: np.ndarray, answer, part: slice):
        """Log target, SSR and cost of proposals y (-inf where outside the box)."""
        C = len(y)
        lp, cost = np.full(C, -np.inf), np.full(C, np.inf)
        ssr = np.full((C, len(self.sizes)), np.inf)
        if mask.any():
            ssr[mask], cost[mask] = answer["ssr"][part], answer["cost"][part]
            lp[mask] = self.log_target(ssr[mask], cost[mask], self.sig2[mask], y[mask])
        return np.where(np.isfinite(cost), lp, -np.inf), ssr, cost

    def step(self) -> None:
        """One iteration: both stages' proposals of every chain in one batch, then Mira's
        delayed-rejection acceptance, then (sample) the error variances."""
        rng, settings, x, R = self.rng, self.settings, self.x, self.R
        C, m = x.shape
        z1, z2 = rng.standard_normal((C, m)), rng.standard_normal((C, m))
        u1, u2 = rng.random(C), rng.random(C)
        y1, y2 = x + z1 @ R, x + (z2 @ R) / settings.dr_scale
        in1 = inside(y1, self.box)
        in2 = inside(y2, self.box) & settings.delayed_rejection
        rows = np.vstack([y1[in1], y2[in2]])
        answer = self.evaluations(rows) if len(rows) else None
        lp1, ssr1, cost1 = self.proposals(y1, in1, answer, slice(0, in1.sum()))
        lp2, ssr2, cost2 = self.proposals(y2, in2, answer, slice(in1.sum(), len(rows)))
        lpx = self.log_target(self.ssr, self.cost, self.sig2, x)
        with np.errstate(divide="ignore", invalid="ignore"):
            a1 = np.exp(np.minimum(0.0, np.nan_to_num(lp1 - lpx, nan=-np.inf)))
            back = np.exp(np.minimum(0.0, np.nan_to_num(lp1 - lp2, nan=-np.inf)))  # a1(y2, y1)
            log_a2 = (lp2 + log_q(y2, y1, R) + np.log1p(-back)
                      - lpx - log_q(x, y1, R) - np.log1p(-a1))
        a2 = np.exp(np.minimum(0.0, np.nan_to_num(log_a2, nan=-np.inf)))
        take1 = u1 < a1
        take2 = ~take1 & in2 & (u2 < a2)
        for take, y, s, c in ((take1, y1, ssr1, cost1), (take2, y2, ssr2, cost2)):
            x[take], self.ssr[take], self.cost[take] = y[take], s[take], c[take]
        self.accepted += take1 | take2
        if self.mode == "sample":
            shape = 0.5 * (self.n0 + self.sizes)
            self.sig2 = (0.5 * (self.n0 * self.var0 + self.ssr)
                         / rng.gamma(shape, 1.0, size=(C, len(self.sizes))))


def prior_of(parameter):
    """The log density of a parameter's distribution (flat for `bounds`)."""
    dist = parameter._dist()
    return dist.logpdf


def log_prior(priors, points: np.ndarray, box: Box) -> np.ndarray:
    total = np.where(inside(points, box), 0.0, -np.inf)
    for j, logpdf in enumerate(priors):
        with np.errstate(all="ignore"):
            total = total + np.where(np.isfinite(total), logpdf(points[:, j]), 0.0)
    return total


def inside(points: np.ndarray, box: Box) -> np.ndarray:
    return np.all((points >= box.lo) & (points <= box.hi), axis=1)


def log_q(a: np.ndarray, b: np.ndarray, R: np.ndarray) -> np.ndarray:
    """Log density (up to a constant) of the first-stage proposal from a to b: N(a, R^T R)."""
    v = np.linalg.solve(R.T, (b - a).T).T
    return -0.5 * np.sum(v * v, axis=1)


def proposal_root(covariance: np.ndarray, box: Box) -> np.ndarray:
    """Upper Cholesky factor of the starting proposal covariance; a box-based guess when the
    fit's covariance is unusable."""
    try:
        if not np.all(np.isfinite(covariance)):
            raise np.linalg.LinAlgError
        return np.linalg.cholesky(covariance).T
    except np.linalg.LinAlgError:
        return np.diag(0.01 * (box.hi - box.lo))


def adapted_root(samples: np.ndarray, R: np.ndarray, m: int) -> np.ndarray:
    """Haario's adaptive proposal from every sample so far (kept when degenerate)."""
    if len(samples) < 2 * m + 2:
        return R
    cov = np.atleast_2d(np.cov(samples.T))
    cov = SD / m * (cov + EPS * np.diag(np.maximum(np.abs(np.diag(cov)), 1e-300)))
    try:
        return np.linalg.cholesky(cov).T
    except np.linalg.LinAlgError:
        return R


def starting_points(rng, estimate: np.ndarray, R: np.ndarray, box: Box, C: int) -> np.ndarray:
    """Chains start near the estimate: one proposal step away, inside the box (the first chain at
    the estimate itself)."""
    x = np.tile(estimate, (C, 1))
    if C > 1:
        y = estimate + rng.standard_normal((C - 1, len(estimate))) @ R
        x[1:] = np.where(inside(y, box)[:, None], y, estimate)
    return x


def summarise_chains(settings, chain, sig_chain, accepted, box: Box, costs: CostFunction,
                     mode: str, runs: int) -> dict[str, Any]:
    n, C, m = chain.shape
    post = chain[settings.burnin:]
    pooled = post.reshape(-1, m)
    thin = max(1, n // 500)
    intervals = {}
    for j, name in enumerate(box.names):
        lower, median, upper = np.percentile(pooled[:, j], [2.5, 50, 97.5])
        intervals[name] = {"mean": float(pooled[:, j].mean()), "sd": float(pooled[:, j].std(ddof=1)),
                           "lower": float(lower), "median": float(median), "upper": float(upper),
                           "rhat": rhat(post[:, :, j]) if C > 1 else None}
    block = {"iterations": n, "burnin": settings.burnin, "chains": C, "thin": thin, "runs": runs,
             "acceptance_rate": float(accepted.sum() / (n * C)),
             "acceptance_by_chain": (accepted / n).tolist(), "error_variance": mode,
             "delayed_rejection": settings.delayed_rejection, "intervals": intervals,
             "trace": {name: [chain[::thin, c, j].tolist() for c in range(C)]
                       for j, name in enumerate(box.names)}}
    if mode == "sample":
        s = sig_chain[settings.burnin:].reshape(-1, sig_chain.shape[2])
        block["sigma2"] = {t.key: float(s[:, j].mean()) for j, t in enumerate(costs.terms)}
    return block


def rhat(draws: np.ndarray) -> float | None:
    """Gelman and Rubin's potential scale reduction factor over chains (draws: (n, C))."""
    n = draws.shape[0]
    if n < 4:
        return None
    within = draws.var(axis=0, ddof=1).mean()
    between = n * draws.mean(axis=0).var(ddof=1)
    if not within > 0:
        return None
    return float(math.sqrt(((n - 1) / n * within + between / n) / within))


def prediction_band(settings, evaluate, evaluations: Evaluations, costs: CostFunction,
                    chain: np.ndarray, rng) -> dict[str, Any]:
    """2.5, 50 and 97.5% of each observed output over time, from posterior draws run as one batch."""
    pooled = chain[settings.burnin:].reshape(-1, chain.shape[2])
    count = min(settings.prediction_draws, len(pooled))
    rows = pooled[np.sort(rng.choice(len(pooled), count, replace=False))]
    evaluations(rows)  # counted once; the call below reads the same runs' series back
    outcome = evaluate(rows)
    if outcome.time is None:
        return {}
    band = {}
    for output in costs.outputs:
        series = outcome.series[output][np.asarray(outcome.ok, bool)]
        if not len(series):
            continue
        lower, median, upper = np.nanpercentile(series, [2.5, 50, 97.5], axis=0)
        band[output] = {"time": outcome.time.tolist(), "lower": lower.tolist(),
                        "median": median.tolist(), "upper": upper.tolist()}
    return band
