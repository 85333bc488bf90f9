"""The GPs of one round of Bayesian optimisation and the acquisition they give: expected
improvement (log EI, stable far below the incumbent) or a lower confidence bound, times the
probability that each constraint holds and that the run does not fail; maximised by multi-start
L-BFGS-B in the unit box, a batch chosen by a constant liar.

Formulas: docs/methods.md, "Bayesian optimisation".
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from scipy.special import erfcx, log_ndtr, ndtr

from studyrun.analyses.surrogate import gp

KAPPA = 2.0  # lcb: mean - KAPPA x standard deviation
STARTS = 8  # L-BFGS-B starts: the best of CANDIDATES random points and AROUND near the best
CANDIDATES = 1024
# points near the best feasible runs (the best 5% by the GP's mean), half each a step of standard
# deviation 1e-3 and half 0.1 away (unit box; BoTorch's sample_around_best): the region that
# improves on the incumbent can be a sliver along a constraint's boundary or, in 10 dimensions,
# a small ball that 1,024 random points all miss
AROUND = 256
BEST_SHARE = 0.05
# a round's GPs: from the last round's hyperparameters and this many seeded random starts, each
# stopped after LIKELIHOOD_EVALUATIONS; the restarts are spread over the rounds, so that each
# costs about the same (at 100 runs of 10 parameters, 5 starts every 5th round cost 1.1 CPU s,
# beyond the 1 s a round of issue 34; a random start wandered 223 evaluations, 0.9 s, to the
# warm start's optimum). A warm start stopped early goes on from there the round after.
RESTARTS_WARM = 1
LIKELIHOOD_EVALUATIONS = 25
# the GPs' longest length scale (unit box): at the surrogate module's 1,000 a GP of a 10-parameter
# ellipsoid put one at 406, took that parameter for one that does not matter, and the search
# stopped 2.25% above the minimum, that parameter 0.15 off (benchmarks/bench_bayesopt.py)
LONGEST = 10.0
# each L-BFGS-B start of the acquisition stopped after this many evaluations (of 11 points in
# 10 dimensions): late in a 10-parameter search the line searches took 112 a start, up to 281
ACQUISITION_EVALUATIONS = 40
STEP = 1e-6  # forward-difference step of the acquisition's gradient, unit coordinates
_LOG_ROOT_2PI = 0.5 * math.log(2 * math.pi)


def log_h(z: np.ndarray) -> np.ndarray:
    """log(z Phi(z) + phi(z)), the expected improvement over a unit Gaussian, without underflow:
    phi(z) (1 + z Phi(z) / phi(z)) through the scaled complementary error function."""
    z = np.asarray(z, dtype=float)
    out = np.empty_like(z)
    near = z > -1.0
    zn = z[near]
    out[near] = np.log(zn * ndtr(zn) + np.exp(-0.5 * zn * zn - _LOG_ROOT_2PI))
    far = np.maximum(z[~near], -1e100)  # beyond, its square overflows; EI there is nil anyway
    with np.errstate(all="ignore"):
        ratio = far * erfcx(-far / math.sqrt(2)) * math.sqrt(math.pi / 2)  # -1 + 1/z^2 ...
        tail = np.where(far > -1e3, np.log1p(ratio), -2 * np.log(-far))
    out[~near] = -0.5 * far * far - _LOG_ROOT_2PI + tail
    return out


def log_expected_improvement(mean: np.ndarray, std: np.ndarray, best: float) -> np.ndarray:
    std = np.maximum(std, 1e-12)
    return np.log(std) + log_h((best - mean) / std)


def bilog(gap: np.ndarray) -> np.ndarray:
    """sign(g) log(1 + |g|): a constraint's gap as its GP models it (Eriksson and Poloczek 2021,
    as Ax's BilogY): the same sign, so the same probability of being met, but a stress that spans
    36 to 36,000 MPa spans -5 to 10, and the GP's scale is that of the boundary, not of the runs
    far beyond it."""
    return np.asarray(np.sign(gap) * np.log1p(np.abs(gap)))


def modelled(gaps: np.ndarray, ratios: np.ndarray) -> np.ndarray:
    """Each constraint's column as its GP models it: log(left / right) (`ratios`) while both
    sides were positive in every run, else bilog(left - right); either is <= 0 where it is met."""
    logged = np.isfinite(ratios).all(axis=0)
    return np.where(logged, ratios, bilog(np.where(np.isfinite(gaps), gaps, 0.0)))


@dataclass(frozen=True)
class Data:
    """What the GPs are fitted on, in unit coordinates: the runs that gave every value (their
    objective and constraints as modelled() gives them, <= 0 where met) and every run with
    whether it failed."""

    @property
    def any_failed(self) -> bool:
        return bool((self.failure > 0).any())

    ran: np.ndarray  # (n, m)
    objective: np.ndarray  # (n,)
    gaps: np.ndarray  # (n, constraints): log ratios or bilog(gap), modelled()
    every: np.ndarray  # (N, m)
    failure: np.ndarray  # (N,) +1 failed, -1 ran (labels()); a liar's point: its predicted mean

    def best(self) -> float | None:
        """The incumbent: the least objective of a run that met every constraint."""
        met = (self.gaps <= 0).all(axis=1)
        return float(self.objective[met].min()) if met.any() else None


@dataclass(frozen=True)
class Models:
    """The round's GPs: the objective, each constraint's gap and, once a run failed, the
    failure labels."""

    data: Data
    objective: Any
    constraints: tuple[Any, ...]
    failure: Any | None
    best: float | None  # the incumbent of EI (None: no run met the constraints yet)
    scale: float  # the objective's spread, lcb's unit

    def log_acquisition(self, unit: np.ndarray, kind: str) -> np.ndarray:
        """log EI (or the negated lcb in units of the objective's spread) plus the log
        probabilities that every constraint holds and that the run does not fail."""
        mean, std = gp.predict_with_std(self.objective, unit)
        if kind == "lcb":
            score = -(mean - KAPPA * std) / self.scale
        elif self.best is None:
            score = np.zeros(len(unit))  # no feasible run yet: the probabilities alone
        else:
            score = log_expected_improvement(mean, std, self.best)
        for model in self.constraints:
            m, s = gp.predict_with_std(model, unit)
            score = score + log_ndtr(-m / np.maximum(s, 1e-12))
        if self.failure is not None:
            m, s = gp.predict_with_std(self.failure, unit)
            score = score + log_ndtr(-m / np.maximum(s, 1e-12))
        return np.where(np.isnan(score), -np.inf, score)

    def told(self, unit: np.ndarray) -> "Models":
        """The constant liar: the same GPs (hyperparameters fixed) told that a chosen point gave
        the incumbent (the least objective when none is feasible) and its constraints and failure
        their predicted means, so the next point of the batch goes elsewhere."""
        row = unit[None]
        lie = self.best if self.best is not None else float(self.data.objective.min())
        ran = np.vstack([self.data.ran, row])
        objective = gp.conditioned(self.objective, ran, np.append(self.data.objective, lie))
        gaps = np.array([[float(m.predict(row)[0]) for m in self.constraints]])
        constraints = tuple(gp.conditioned(m, ran, np.append(self.data.gaps[:, j], gaps[0, j]))
                            for j, m in enumerate(self.constraints))
        failure = None
        said = float(self.failure.predict(row)[0]) if self.failure is not None else -1.0
        labelled = np.append(self.data.failure, said)
        if self.failure is not None:
            failure = gp.conditioned(self.failure, np.vstack([self.data.every, row]), labelled,
                                     normalize=False)
        data = replace(self.data, ran=ran, objective=np.append(self.data.objective, lie),
                       gaps=np.vstack([self.data.gaps, gaps]),
                       every=np.vstack([self.data.every, row]), failure=labelled)
        return replace(self, data=data, objective=objective, constraints=constraints,
                       failure=failure)


def labels(failed: np.ndarray) -> np.ndarray:
    """Failure as +1, success as -1: the failure GP's prior mean, 0, is then even odds where no
    run is near (the share of runs that failed would call an unexplored region safe)."""
    return 2.0 * np.asarray(failed, dtype=float) - 1.0


def fit_models(data: Data, seed: int, previous: Models | None = None) -> Models:
    """The objective's GP and each constraint's (on the runs that gave values), fitted by the
    surrogate module's maximum likelihood: the first from seeded restarts, later ones (given the
    last round's models) from their hyperparameters and one seeded random start, the better
    likelihood kept; and once a run failed, the failure labels' GP."""
    def fitted(inputs, y, before):
        if before is None:
            return gp.fit(inputs, y, seed, LONGEST)
        return gp.refit(before, inputs, y, RESTARTS_WARM, seed, LIKELIHOOD_EVALUATIONS)

    was = previous or Models(data, None, (None,) * data.gaps.shape[1], None, None, 1.0)
    objective = fitted(data.ran, data.objective, was.objective)
    constraints = tuple(fitted(data.ran, data.gaps[:, j], was.constraints[j])
                        for j in range(data.gaps.shape[1]))
    # failure is a deterministic function of the inputs, learned as sharply as the objective
    # is: its labels' GP takes the objective's hyperparameters (a fit of its own smooths the step
    # between runs that fail and runs that do not with a large nugget, and steers nowhere)
    failure = (gp.conditioned(objective, data.every, data.failure, normalize=False)
               if data.any_failed else None)
    spread = float(np.std(data.objective))
    best = data.best()
    if best is not None:  # the incumbent by the GP's mean at the feasible runs, not a lucky one
        met = (data.gaps <= 0).all(axis=1)
        best = float(gp.predict(objective, data.ran[met]).min())
    return Models(data, objective, constraints, failure, best, spread if spread > 0 else 1.0)


def around(models: Models, rng: np.random.Generator) -> np.ndarray:
    """AROUND points near the best feasible runs (none while no run met every constraint)."""
    data = models.data
    met = (data.gaps <= 0).all(axis=1)
    if not met.any():
        return np.empty((0, data.ran.shape[1]))
    mean = gp.predict(models.objective, data.ran[met])
    order = np.argsort(mean, kind="stable")[:max(1, math.ceil(BEST_SHARE * met.sum()))]
    picks = data.ran[met][order][rng.integers(len(order), size=AROUND)]
    sigma = np.where(np.arange(AROUND) % 2, 0.1, 1e-3)[:, None]
    return np.clip(picks + sigma * rng.standard_normal(picks.shape), 0.0, 1.0)


def maximise(score, dimension: int, rng: np.random.Generator,
             near: np.ndarray | None = None) -> tuple[np.ndarray, float]:
    """The unit-box point of the largest score: L-BFGS-B from the best STARTS of CANDIDATES
    random points and `near`, each gradient by forward differences in one call of `score`."""
    from scipy.optimize import minimize

    points = rng.random((CANDIDATES, dimension))
    if near is not None:
        points = np.vstack([points, near])
    values = score(points)
    order = np.argsort(-values, kind="stable")[:STARTS]
    best_u, best_v = points[order[0]], float(values[order[0]])
    def negative(u):
        h = np.where(u + STEP <= 1.0, STEP, -STEP)  # into the box
        s = score(np.vstack([u, u + np.diag(h)]))
        if not np.isfinite(s[0]):
            return 1e300, np.zeros(dimension)
        grad = np.where(np.isfinite(s[1:]), (s[1:] - s[0]) / h, 0.0)
        return -float(s[0]), -grad

    for start in points[order]:
        if not np.isfinite(score(start[None])[0]):
            continue
        found = minimize(negative, start, jac=True, method="L-BFGS-B",
                         bounds=[(0.0, 1.0)] * dimension, options={"maxfun": ACQUISITION_EVALUATIONS})
        u = np.clip(found.x, 0.0, 1.0)
        v = float(score(u[None])[0])
        if v > best_v:
            best_u, best_v = u, v
    return best_u, best_v


def propose(models: Models, count: int, kind: str, rng: np.random.Generator
            ) -> tuple[list[np.ndarray], float]:
    """`count` points chosen one by one (the constant liar between them), and the expected
    improvement (times the probabilities) at the first: the convergence measure."""
    dimension = models.data.ran.shape[1]
    chosen: list[np.ndarray] = []
    measure = math.nan
    for i in range(count):
        u, _ = maximise(lambda points, ms=models: ms.log_acquisition(points, kind), dimension, rng,
                        around(models, rng))
        if i == 0:
            measure = float(np.exp(models.log_acquisition(u[None], "ei")[0])) \
                if models.best is not None else math.inf
        chosen.append(u)
        if i + 1 < count:
            models = models.told(u)
    return chosen, measure


def fill(every: np.ndarray, count: int, rng: np.random.Generator) -> list[np.ndarray]:
    """Before two runs gave values there is nothing to fit: the `count` random points farthest
    from every run (maximin), one by one."""
    points = rng.random((CANDIDATES, every.shape[1]))
    taken = every
    chosen = []
    for _ in range(count):
        gap = ((points[:, None, :] - taken[None]) ** 2).sum(-1).min(axis=1) if len(taken) else \
            np.ones(len(points))
        pick = points[int(np.argmax(gap))]
        chosen.append(pick)
        taken = np.vstack([taken, pick]) if len(taken) else pick[None]
    return chosen
