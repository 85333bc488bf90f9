"""Fitting parameters to data by minimising the model cost (FME's modFit), every model evaluation
batched through `ask` (see batching.py).

Least squares (`lm`, `trf`) use scipy.optimize.least_squares with finite-difference Jacobians
whose m + 1 (forward) or 2m + 1 (central) rows go out as one batch; `lm` has no bounds of its own,
so it works in logistic coordinates that map the real line onto the parameter box (as FME does
for methods without bounds). `nelder-mead`, `lbfgsb` (gradient 2 J^T r from the batched Jacobian,
or the model's own, in-process: `Settings.gradient`) and `differential-evolution` (a whole
population per batch; polished by `trf`) minimise the cost in unit-box coordinates. Standard
errors follow FME's summary.modFit: s^2 (J^T J)^-1 with s^2 = cost / (N - m), t = estimate /
std_error, two-sided p from Student's t with N - m degrees.

Formulas, defaults and edge cases: docs/methods.md, "Calibration fits".
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from studyrun.analyses.search.batching import Ask


@dataclass
class Box:
    """The fitted parameters: names, bounds and the nominal start."""

    names: list[str]
    lo: np.ndarray
    hi: np.ndarray
    start: np.ndarray

    def to_natural(self, u: np.ndarray) -> np.ndarray:
        return self.lo + np.asarray(u) * (self.hi - self.lo)

    def to_unit(self, p: np.ndarray) -> np.ndarray:
        return (np.asarray(p) - self.lo) / (self.hi - self.lo)


def make_box(parameters, defaults: dict[str, float]) -> Box:
    """Bounds and nominal starts of the varied parameters, the start moved into the box."""
    names = list(parameters)
    bounds = np.array([parameters[n].bounds() for n in names], dtype=float).reshape(len(names), 2)
    start = np.array([parameters[n].nominal_value(defaults.get(n)) for n in names], dtype=float)
    return Box(names, bounds[:, 0], bounds[:, 1], np.clip(start, bounds[:, 0], bounds[:, 1]))


@dataclass
class Settings:
    """How to fit: the analysis block's keys that the optimisers read."""

    method: str = "lm"
    max_evaluations: int | None = None
    tolerance: float = 1e-8
    jacobian: str = "forward"
    step: float = 1e-4
    generations: int = 100
    population: int = 15
    polish: bool = True
    exact: Callable[[np.ndarray], np.ndarray] | None = None  # p -> J, for jacobian: exact
    # lbfgsb: (p, the run's summary at p) -> d cost/dp in-process (search/gradients.py)
    gradient: Callable[[np.ndarray, dict[str, Any]], np.ndarray] | None = None


@dataclass
class FitResult:
    """Where a fit stopped and why."""

    estimate: np.ndarray
    cost: float
    converged: bool
    message: str
    iterations: int = 0
    progress: list[float] = field(default_factory=list)  # best cost after each batch


class Recording:
    """`ask` wrapped to keep the best cost seen after each batch (the optimiser's progress)."""

    def __init__(self, ask: Ask) -> None:
        self.ask, self.progress = ask, []

    def __call__(self, rows: np.ndarray) -> dict[str, np.ndarray]:
        answer = self.ask(rows)
        best = float(np.min(answer["cost"])) if len(answer["cost"]) else math.inf
        self.progress.append(min(best, self.progress[-1]) if self.progress else best)
        return answer


def steps(p: np.ndarray, box: Box, relative: float) -> np.ndarray:
    """Finite-difference steps: relative to |p| (to the box width at 0), pointing into the box."""
    h = relative * np.where(p != 0, np.abs(p), box.hi - box.lo)
    return np.where(p + h > box.hi, -h, h)


def jacobian(ask: Ask, p: np.ndarray, box: Box, settings: Settings) -> tuple[np.ndarray, np.ndarray]:
    """(J, r): the Jacobian (N, m) of the residual vector and the vector at p, from one batch."""
    if settings.exact is not None:
        return settings.exact(p), ask(p[None])["vector"][0]
    m = len(p)
    h = steps(p, box, settings.step)
    rows = [p] + [p + np.eye(m)[j] * h[j] for j in range(m)]
    if settings.jacobian == "central":
        rows += [p - np.eye(m)[j] * h[j] for j in range(m)]
    vectors = ask(np.array(rows))["vector"]
    r = vectors[0]
    if settings.jacobian == "central":
        forward, backward = vectors[1:m + 1], vectors[m + 1:]
        inside = (p - h >= box.lo) & (p - h <= box.hi)
        J = np.where(inside[:, None], (forward - backward) / (2 * h[:, None]),
                     (forward - r) / h[:, None]).T
    else:
        J = ((vectors[1:] - r) / h[:, None]).T
    return J, r


def fit(ask: Ask, start: np.ndarray, box: Box, settings: Settings, seed: Any = None) -> FitResult:
    """One fit from `start` by the configured method."""
    record = Recording(ask)
    method = settings.method
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if method in ("lm", "trf"):
            result = fit_least_squares(record, start, box, settings, method)
        elif method == "nelder-mead":
            result = fit_nelder_mead(record, start, box, settings)
        elif method == "lbfgsb":
            result = fit_lbfgsb(record, start, box, settings)
        elif method == "differential-evolution":
            result = fit_evolution(record, start, box, settings, seed)
        else:
            raise ValueError(f"unknown fit method {method!r}")
    result.progress = record.progress
    return result


def fit_least_squares(ask: Ask, start: np.ndarray, box: Box, settings: Settings,
                      method: str) -> FitResult:
    """Levenberg-Marquardt (in logistic coordinates) or trust-region reflective (in the box)."""
    from scipy.optimize import least_squares

    width = box.hi - box.lo
    if method == "lm":
        u = np.clip(box.to_unit(start), 1e-6, 1 - 1e-6)
        # MINPACK's first step is bounded by 100 |x0|: the logits start at 1, not at their own
        # value, or a start at the box's centre (logit ~1e-16) would never move
        shift = np.log(u / (1 - u)) - 1.0

        def to_p(x):
            return box.lo + width / (1 + np.exp(-(np.asarray(x) + shift)))

        def fun(x):
            return ask(to_p(x)[None])["vector"][0]

        def jac(x):
            p = to_p(x)
            J, _ = jacobian(ask, p, box, settings)
            return J * ((p - box.lo) * (box.hi - p) / width)

        kwargs = {"max_nfev": settings.max_evaluations} if settings.max_evaluations else {}
        out = least_squares(fun, np.ones(len(start)), jac=jac, method="lm",
                            xtol=settings.tolerance, ftol=settings.tolerance,
                            gtol=settings.tolerance, **kwargs)
        estimate = to_p(out.x)
    else:
        def fun(p):
            return ask(np.clip(p, box.lo, box.hi)[None])["vector"][0]

        def jac(p):
            return jacobian(ask, np.clip(p, box.lo, box.hi), box, settings)[0]

        out = least_squares(fun, np.clip(start, box.lo, box.hi), jac=jac, bounds=(box.lo, box.hi),
                            method="trf", x_scale=np.where(width > 0, width, 1.0),
                            xtol=settings.tolerance, ftol=settings.tolerance,
                            gtol=settings.tolerance, max_nfev=settings.max_evaluations)
        estimate = np.clip(out.x, box.lo, box.hi)
    cost = float(ask(estimate[None])["cost"][0])
    return FitResult(estimate, cost, bool(out.success), str(out.message), int(out.nfev))


def cost_of(ask: Ask, box: Box) -> Callable[[np.ndarray], float]:
    """The model cost as a function of unit-box coordinates."""
    return lambda u: float(ask(box.to_natural(np.clip(u, 0, 1))[None])["cost"][0])


def fit_nelder_mead(ask: Ask, start: np.ndarray, box: Box, settings: Settings) -> FitResult:
    """Nelder-Mead in the unit box; its first simplex evaluated as one batch."""
    from scipy.optimize import minimize

    m = len(start)
    u0 = np.clip(box.to_unit(start), 0, 1)
    simplex = np.vstack([u0] + [u0 + np.eye(m)[j] * (0.05 if u0[j] <= 0.95 else -0.05)
                                for j in range(m)])
    ask(box.to_natural(simplex))
    options = {"initial_simplex": simplex, "xatol": settings.tolerance,
               "fatol": settings.tolerance, "maxfev": settings.max_evaluations or 400 * m,
               "adaptive": m > 3}
    out = minimize(cost_of(ask, box), u0, method="Nelder-Mead", bounds=[(0, 1)] * m,
                   options=options)
    estimate = box.to_natural(np.clip(out.x, 0, 1))
    return FitResult(estimate, float(out.fun), bool(out.success), str(out.message), int(out.nit))


def fit_lbfgsb(ask: Ask, start: np.ndarray, box: Box, settings: Settings) -> FitResult:
    """L-BFGS-B in the unit box with the model's own gradient, or 2 J^T r of a batched Jacobian."""
    width = box.hi - box.lo

    def cost_and_gradient(p):
        J, r = jacobian(ask, p, box, settings)
        return float(r @ r), 2 * (J.T @ r) * width

    if settings.gradient is not None:
        cost_and_gradient = model_gradient(ask, box, settings.gradient)
    return minimise_lbfgsb(cost_and_gradient, ask, start, box, settings)


def model_gradient(ask: Ask, box: Box, gradient: Callable[[np.ndarray, dict[str, Any]], np.ndarray]
                   ) -> Callable[[np.ndarray], tuple[float, np.ndarray]]:
    """The cost of the run at p and its gradient in unit coordinates, computed once per point; a
    failed run's point is given 1e300 with gradient 0."""
    def cost_and_gradient(p):
        answer = {k: v[0] for k, v in ask(p[None]).items()}
        if not np.isfinite(answer["cost"]):
            return 1e300, np.zeros(len(p))
        return float(answer["cost"]), gradient(p, answer) * (box.hi - box.lo)

    return cost_and_gradient


def minimise_lbfgsb(cost_and_gradient: Callable[[np.ndarray], tuple[float, np.ndarray]], ask: Ask,
                    start: np.ndarray, box: Box, settings: Settings) -> FitResult:
    """L-BFGS-B over the unit box (the one driver of calibrate and optimize): `cost_and_gradient`
    takes natural values and returns the cost and its gradient in unit coordinates."""
    from scipy.optimize import minimize

    options = {"ftol": settings.tolerance, "gtol": settings.tolerance,
               "maxfun": settings.max_evaluations or 15000}
    out = minimize(lambda u: cost_and_gradient(box.to_natural(np.clip(u, 0, 1))),
                   np.clip(box.to_unit(start), 0, 1), jac=True, method="L-BFGS-B",
                   bounds=[(0, 1)] * len(start), options=options)
    estimate = box.to_natural(np.clip(out.x, 0, 1))
    cost = float(ask(estimate[None])["cost"][0])
    return FitResult(estimate, cost, bool(out.success), str(out.message), int(out.nit))


def fit_evolution(ask: Ask, start: np.ndarray, box: Box, settings: Settings, seed: Any) -> FitResult:
    """Differential evolution over the box, a whole population per batch, then a trf polish."""
    from scipy.optimize import differential_evolution

    def costs(U):  # U: (m, S)
        return ask(box.to_natural(np.clip(np.asarray(U).T, 0, 1)))["cost"]

    m = len(start)
    out = differential_evolution(costs, [(0, 1)] * m, x0=np.clip(box.to_unit(start), 0, 1),
                                 maxiter=settings.generations, popsize=settings.population,
                                 tol=settings.tolerance, polish=False, vectorized=True,
                                 updating="deferred", rng=np.random.default_rng(seed))
    estimate = box.to_natural(np.clip(out.x, 0, 1))
    result = FitResult(estimate, float(out.fun), bool(out.success), str(out.message), int(out.nit))
    if settings.polish:
        polished = fit_least_squares(ask, estimate, box, settings, "trf")
        if polished.cost <= result.cost:
            polished.message = f"{result.message}; polished by trf: {polished.message}"
            polished.iterations += result.iterations
            return polished
    return result


def statistics(J: np.ndarray, r: np.ndarray, estimate: np.ndarray, names: list[str]) -> dict:
    """std_error, t, p per parameter and the correlation matrix from s^2 (J^T J)^-1."""
    from scipy.stats import t as student

    n, m = J.shape
    cost = float(r @ r)
    df = n - m
    notes = []
    JtJ = J.T @ J
    try:
        unscaled = np.linalg.inv(JtJ)
        if not np.all(np.isfinite(unscaled)) or np.linalg.cond(JtJ) > 1e14:
            raise np.linalg.LinAlgError
    except np.linalg.LinAlgError:
        unscaled = np.linalg.pinv(JtJ)
        notes.append("J^T J is singular: some parameters are not identifiable from these data "
                     "(their std errors are unreliable)")
    s2 = cost / df if df > 0 else math.nan
    covariance = s2 * unscaled
    se = np.sqrt(np.clip(np.diag(covariance), 0, None))
    with np.errstate(all="ignore"):
        t = estimate / se
        p = 2 * student.sf(np.abs(t), df) if df > 0 else np.full(m, math.nan)
        correlation = covariance / np.outer(se, se)
    if df <= 0:
        notes.append(f"{n} observations for {m} parameters: no degrees of freedom for errors")
    return {"std_error": se, "t": t, "p": p, "covariance": covariance,
            "correlation": correlation, "s2": s2, "df": df, "notes": notes}
