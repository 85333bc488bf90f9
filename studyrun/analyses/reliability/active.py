"""AK-MCS (Echard, Gayton and Lemaire 2011): a Gaussian process of g, fitted to the runs made so
far, classifies a Monte Carlo population as failed or safe; the runs go where the
classification is least sure (the smallest U = |mean| / sd), `batch` at a time, until the least
sure point has U >= 2 and the population's cov of pf meets the target, the population growing
when it does not. Formulas: docs/methods.md, "Reliability: the probability of failure".
"""

from __future__ import annotations

from typing import Any

import numpy as np

from studyrun.analyses.reliability.sampling import Fails, binomial_ci, estimate, no_failure, stream
from studyrun.analyses.reliability.space import GFunction

U_STOP = 2.0
SCALE = 10.0  # u / SCALE: the GP's inputs, about within [-0.5, 0.5] as the surrogate's [0, 1]
PREDICTED_CELLS = 1 << 22  # population rows x runs of a kernel matrix at once (32 MB)
POPULATION_CELLS = 1 << 24  # population rows x parameters held at most (128 MB of u)
SPREAD = 2.0  # of the first runs, in standard deviations
REFIT_GROWTH = 1.5  # the hyperparameters are searched from fresh starts when the runs grew so


def population_footprint(context, runs: int, population: int):
    """The memory of ak-mcs at `runs` runs: the GP's (as the surrogate analysis's) and the
    population's at its largest, its points and five numbers a point."""
    from studyrun.analyses.base import run_bytes
    from studyrun.analyses.surrogate.sizes import FIXED_BYTES, LIKELIHOOD_BYTES, SUBSAMPLE
    from studyrun.core.sizes import Footprint

    d = len(context.varied)
    rows = population_sizes(population, d)[-1]
    fixed = 8 * rows * d + 40 * rows + 24 * PREDICTED_CELLS
    each = run_bytes(context)

    def bytes_at(n: int) -> float:
        tuned = min(n, SUBSAMPLE)
        return (LIKELIHOOD_BYTES * (d + 2) * tuned * tuned + FIXED_BYTES * n * n + each * n
                + fixed)

    return Footprint("max_runs", runs, "runs", bytes_at,
                     f"the GP's likelihood gradient and fit ({LIKELIHOOD_BYTES} bytes x runs^2 x "
                     f"{d + 2}, {FIXED_BYTES} bytes x runs^2) and a population of up to "
                     f"{rows:,} points, {8 * d + 40} bytes each")


def population_sizes(start: int, d: int) -> list[int]:
    """The population after each growth: start, 2 start, 4 start... up to the cap on cells."""
    most = max(start, POPULATION_CELLS // max(d, 1))
    out = [start]
    while out[-1] < most:
        out.append(min(out[-1] * 2, most))
    return out


def first_points(seed: np.random.SeedSequence, d: int, start: int) -> np.ndarray:
    """The first runs: draws from N(0, SPREAD^2 I), reaching out to where the population's
    tails (and so its failures) are, so that a GP of them is not sure of safety everywhere."""
    return SPREAD * stream(seed, 4, 1 << 20).standard_normal((start, d))


class Surrogate:
    """The GP of g over u, refitted each round: from fresh starts when the runs have grown by
    REFIT_GROWTH since the last such fit, else from the last round's hyperparameters."""

    def __init__(self, seed: int) -> None:
        self.seed, self.model, self.searched_at = seed, None, 0

    def fit(self, u: np.ndarray, y: np.ndarray) -> None:
        from studyrun.analyses.surrogate import gp

        if self.model is None or len(y) >= REFIT_GROWTH * self.searched_at:
            self.model, self.searched_at = gp.fit(u / SCALE, y, self.seed), len(y)
        else:
            self.model = gp.refit(self.model, u / SCALE, y)

    def predict(self, u: np.ndarray, only_near: bool = True) -> tuple[np.ndarray, np.ndarray]:
        """Posterior mean of g at u, and its sd (of g itself, the noise term left out) where
        the mean is within U_STOP prior sds of 0 (elsewhere U >= U_STOP whatever the data, and
        the prior sd stands in, an upper bound); in slices that bound the kernel matrix."""
        from scipy.linalg import solve_triangular

        from studyrun.analyses.surrogate import gp

        model = self.model
        shift = float(np.atleast_1d(model._y_train_mean)[0])
        scale = float(np.atleast_1d(model._y_train_std)[0])
        signal = model.kernel_.k1
        prior = float(np.sqrt(signal.k1.constant_value)) * scale
        rows = max(1, PREDICTED_CELLS // max(1, len(model.X_train_)))

        def kernel(points: np.ndarray) -> np.ndarray:
            return gp.cross_kernel(model, points / SCALE)

        mean = np.concatenate([kernel(u[i:i + rows]) @ model.alpha_
                               for i in range(0, len(u), rows)]) * scale + shift
        sd = np.full(len(u), prior)
        near = np.flatnonzero(np.abs(mean) < U_STOP * prior) if only_near else np.arange(len(u))
        for i in range(0, len(near), rows):
            part = near[i:i + rows]
            v = solve_triangular(model.L_, kernel(u[part]).T, lower=True)
            sd[part] = np.sqrt(np.clip(1 - (v * v).sum(axis=0) / signal.k1.constant_value,
                                       0, None)) * prior
        return mean, np.maximum(sd, 1e-300)

    def believed_sd(self, trained: np.ndarray, u: np.ndarray) -> np.ndarray:
        """The sd of g at u once `trained` points are run as well (kriging believer: the mean
        does not move, and the sd does not depend on the values)."""
        from scipy.linalg import cholesky, solve_triangular

        signal, noise = self.model.kernel_.k1, self.model.kernel_.k2.noise_level
        x = trained / SCALE
        factor = cholesky(signal(x) + (noise + 1e-10) * np.eye(len(x)), lower=True)
        v = solve_triangular(factor, signal(x, u / SCALE), lower=True)
        prior = signal.k1.constant_value
        scale = float(np.atleast_1d(self.model._y_train_std)[0])
        return np.maximum(np.sqrt(np.clip(prior - (v * v).sum(axis=0), 0, None)) * scale,
                          1e-300)


def choose(surrogate: Surrogate, trained: np.ndarray, candidates: np.ndarray, mean: np.ndarray,
           sd: np.ndarray, count: int, open_: np.ndarray) -> list[int]:
    """`count` rows of the population to run next: the smallest U, then the smallest U once the
    chosen ones count as run (so a batch spreads out instead of crowding one spot)."""
    score = np.where(open_, np.abs(mean) / sd, np.inf)
    unsure = np.flatnonzero(score < U_STOP)  # only these can be chosen before U reaches 2
    if count > 1 and len(unsure) > 0:
        score, rows = score[unsure], unsure
    else:
        rows = np.arange(len(score))
    chosen: list[int] = []
    for _ in range(count):
        pick = int(np.argmin(score))
        if not np.isfinite(score[pick]):
            break
        chosen.append(pick)
        if len(chosen) == count:
            break
        near = np.vstack([trained, candidates[rows[chosen]]])
        score = np.abs(mean[rows]) / surrogate.believed_sd(near, candidates[rows])
        score[~open_[rows]] = np.inf
        score[chosen] = np.inf
    return [int(rows[c]) for c in chosen]


def ak_mcs(g: GFunction, fails: Fails, d: int, seed: np.random.SeedSequence, start: int,
           population: int, batch: int, cov_target: float, max_runs: int) -> dict[str, Any]:
    """pf over the population as the GP classifies it, the runs chosen by U; see the module."""
    from scipy.special import ndtr

    sizes = population_sizes(population, d)
    points = stream(seed, 4, 0).standard_normal((sizes[0], d))
    grown = 0
    initial = first_points(seed, d, min(start, max_runs))
    initial_g = g(initial)
    order: list[int] = []  # population rows run, in order
    values = np.full(len(points), np.nan)  # g of the rows run (NaN: not run, or no value)
    surrogate = Surrogate(int(np.random.SeedSequence(seed.entropy, spawn_key=(
        *seed.spawn_key, 4, 1 << 21)).generate_state(1)[0]))
    convergence: list[dict[str, Any]] = []
    warnings: list[str] = []
    converged = False
    pf = cov = None
    failed = 0
    while True:
        trained = [r for r in order if not np.isnan(values[r])]
        first_ok = ~np.isnan(initial_g)
        inputs = np.vstack([initial[first_ok], points[trained]])
        if len(inputs) < 2:
            warnings.append("fewer than two runs gave a value of g: no surrogate")
            break
        surrogate.fit(inputs, np.concatenate([initial_g[first_ok], values[trained]]))
        mean, sd = surrogate.predict(points)
        known = np.zeros(len(points), bool)
        known[order] = True
        classified = fails(mean)
        classified[trained] = fails(values[trained])  # a row run is classed by its run
        failed, n = int(classified.sum()), len(points)
        pf = failed / n if failed else None
        cov = float(np.sqrt((1 - pf) / (n * pf))) if pf else None
        u_score = np.where(known, np.inf, np.abs(mean) / sd)
        least = float(u_score.min())
        expected_wrong = float(ndtr(-u_score[~known]).sum())
        convergence.append({"runs": len(initial) + len(order), "pf": pf, "cov": cov, "population": n,
                            "min_u": least, "misclassified": expected_wrong})
        if least >= U_STOP:
            if cov is not None and cov <= cov_target:
                converged = True
                break
            if grown + 1 >= len(sizes):
                warnings.append(f"the population reached its largest size ({n:,} points) "
                                f"before the cov of pf reached {cov_target:g}")
                break
            grown += 1
            more = stream(seed, 4, grown).standard_normal((sizes[grown] - n, d))
            points = np.vstack([points, more])
            values = np.concatenate([values, np.full(len(more), np.nan)])
            continue
        room = max_runs - len(initial) - len(order)
        if room <= 0:
            warnings.append(f"max_runs ({max_runs:,}) reached while the least sure point of "
                            f"the population had U = {least:.3g} (below {U_STOP:g})")
            break
        picks = choose(surrogate, inputs, points, mean, sd, min(batch, room), ~known)
        values[picks] = g(points[picks])
        order += picks
    result = estimate(pf, cov, binomial_ci(failed, len(points)) if pf else None,
                      len(initial) + len(order),
                      "ak-mcs", converged, convergence)
    if convergence:
        last = convergence[-1]
        result["surrogate"] = {"population": last["population"], "min_u": last["min_u"],
                               "misclassified": last["misclassified"],
                               "misclassified_share": (last["misclassified"] / failed
                                                       if failed else None)}
    if warnings:
        result["warnings"] = warnings
    if convergence and not failed:
        return no_failure(result, 0, len(points))
    return result

