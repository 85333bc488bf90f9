"""FORM and SORM in the standard normal space: the design point by the improved HL-RF algorithm
(Zhang and Der Kiureghian 1995) with gradients of g by forward differences or by the model's
adjoint (gradients.py), the curvatures of
the limit state there from a Hessian of central differences (Breitung 1984; Hohenbichler and
Rackwitz 1988; Tvedt 1990), and further searches from other starts that find design points one search
misses. Formulas: docs/methods.md, "Reliability: the probability of failure".
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from studyrun.analyses.reliability.space import GFunction

# converged: |g| <= CLOSE |g(0)| and u's distance from the line of alpha <= ALIGNED max(1, |u|)
# (beta then within about 1e-6 of itself), or, where g's noise stops the search short of that,
# |g| <= NEAR |g(0)| and aligned when a step moves u by under STALLED max(1, |u|)
CLOSE, NEAR, ALIGNED, STALLED = 1e-6, 1e-3, 1e-3, 1e-6
MAX_ITERATIONS = 100
HESSIAN_STEP = 0.05  # in standard deviations: well above the noise of a solver's tolerance
ARMIJO = 1e-4


class RunsExhausted(Exception):
    """The next step would pass max_runs."""


@dataclass
class Search:
    """One design point search: where it went, what it found, the runs it used."""

    u: np.ndarray
    g: float
    gradient: np.ndarray
    converged: bool
    iterations: int
    history: list[dict[str, Any]] = field(default_factory=list)
    message: str = ""

    @property
    def beta(self) -> float:
        norm = float(np.linalg.norm(self.u))
        return norm if self.g_at_origin_safe else -norm

    g_at_origin_safe: bool = True

    @property
    def alpha(self) -> np.ndarray:
        norm = np.linalg.norm(self.gradient)
        return -self.gradient / norm if norm > 0 else np.zeros_like(self.gradient)


class Budget:
    """g through a cap on runs: every call first checks it would not pass `most`."""

    def __init__(self, g: GFunction, most: int) -> None:
        self.g, self.most, self.runs = g, most, 0

    def __call__(self, u: np.ndarray) -> np.ndarray:
        u = np.atleast_2d(u)
        if self.runs + len(u) > self.most:
            raise RunsExhausted
        self.runs += len(u)
        return self.g(u)


def gradient(g: Budget, u: np.ndarray, at: float, step: float) -> np.ndarray:
    """Forward differences of g at u, all d points in one batch."""
    d = len(u)
    values = g(u + step * np.eye(d))
    if np.isnan(values).any():
        raise FloatingPointError("a run next to the point gave no value of g")
    return (values - at) / step


Slope = Callable[[Budget, np.ndarray, float], np.ndarray]  # (g, u, g(u)) -> dg/du


def differences(step: float) -> Slope:
    """Forward differences of runs with this step, as a Slope."""
    return lambda g, u, at: gradient(g, u, at, step)


def search(g: Budget, start: np.ndarray, differentiate: Slope, origin_safe: bool, scale: float) -> Search:
    """iHL-RF from `start`: the HL-RF direction, its step length chosen by Armijo's rule on the
    merit m(u) = |u|^2 / 2 + c |g(u)|, until g is near 0 and u lies along alpha (CLOSE, ALIGNED;
    NEAR where g's noise stalls the search); the gradient of g by `differentiate` at each point
    the search moves to (none at the line search's trials)."""
    u = np.asarray(start, dtype=float).copy()
    value = float(g(u[None])[0])
    if np.isnan(value):
        raise FloatingPointError("the run at the search's start gave no value of g")
    grad = differentiate(g, u, value)
    c = 0.0
    history: list[dict[str, Any]] = []
    moved = np.inf  # the last step's length
    for iteration in range(1, MAX_ITERATIONS + 1):
        norm2 = float(grad @ grad)
        if norm2 == 0:
            return Search(u, value, grad, False, iteration, history,
                          "the gradient of g is zero: g does not change near this point",
                          origin_safe)
        alpha = -grad / np.sqrt(norm2)
        history.append({"runs": g.runs, "beta": float(np.linalg.norm(u)), "g": value})
        size = max(1.0, float(np.linalg.norm(u)))
        aligned = np.linalg.norm(u - (alpha @ u) * alpha) <= ALIGNED * size
        if aligned and (abs(value) <= CLOSE * scale
                        or (abs(value) <= NEAR * scale and moved <= STALLED * size)):
            return Search(u, value, grad, True, iteration, history, "", origin_safe)
        direction = (grad @ u - value) / norm2 * grad - u
        c = max(c, 2 * np.linalg.norm(u) / np.sqrt(norm2) + 1.0)
        merit = u @ u / 2 + c * abs(value)
        slope = (u + c * np.sign(value) * grad) @ direction
        length = 1.0
        for _ in range(30):
            trial = u + length * direction
            found = float(g(trial[None])[0])
            if not np.isnan(found) and trial @ trial / 2 + c * abs(found) <= merit + ARMIJO * length * min(slope, 0.0):
                break
            length /= 2
        else:
            if aligned and abs(value) <= NEAR * scale:  # g's noise: no step lowers the merit
                return Search(u, value, grad, True, iteration, history, "", origin_safe)
            return Search(u, value, grad, False, iteration, history,
                          "the line search found no step that lowers the merit function",
                          origin_safe)
        moved = float(np.linalg.norm(trial - u))
        u, value = trial, found
        grad = differentiate(g, u, value)
    return Search(u, value, grad, False, MAX_ITERATIONS, history,
                  f"no convergence in {MAX_ITERATIONS} iterations", origin_safe)


def starts(first: Search) -> list[np.ndarray]:
    """Other starting points at the first design point's distance: its antipode, and plus and
    minus a direction across alpha (the axis alpha leans on least, made orthogonal to it)."""
    u, d = first.u, len(first.u)
    radius = max(float(np.linalg.norm(u)), 1.0)
    points = [-u if np.linalg.norm(u) > 0 else -radius * first.alpha]
    if d > 1:
        alpha = first.alpha
        axis = np.zeros(d)
        axis[int(np.argmin(np.abs(alpha)))] = 1.0
        across = axis - (axis @ alpha) * alpha
        across /= np.linalg.norm(across)
        points += [radius * across, -radius * across]
    return points


def distinct(searches: list[Search]) -> list[Search]:
    """The converged searches, one per design point (points closer than a tenth of their
    distance from the origin, or 0.05, are the same), by increasing beta."""
    found: list[Search] = []
    for s in sorted((s for s in searches if s.converged), key=lambda s: s.beta):
        if all(np.linalg.norm(s.u - t.u) > max(0.1 * abs(t.beta), 0.05) for t in found):
            found.append(s)
    return found


def hessian(g: Budget, u: np.ndarray, at: float, h: float = HESSIAN_STEP) -> np.ndarray:
    """Central second differences of g at u, every point in one batch."""
    d = len(u)
    eye = np.eye(d)
    pairs = [(i, j) for i in range(d) for j in range(i + 1, d)]
    points = [u + h * eye[i] for i in range(d)] + [u - h * eye[i] for i in range(d)]
    for i, j in pairs:
        points += [u + h * (si * eye[i] + sj * eye[j]) for si, sj in
                   ((1, 1), (1, -1), (-1, 1), (-1, -1))]
    values = g(np.array(points))
    if np.isnan(values).any():
        raise FloatingPointError("a run near the design point gave no value of g")
    plus, minus = values[:d], values[d:2 * d]
    out = np.diag((plus - 2 * at + minus) / h ** 2)
    for k, (i, j) in enumerate(pairs):
        pp, pm, mp, mm = values[2 * d + 4 * k: 2 * d + 4 * k + 4]
        out[i, j] = out[j, i] = (pp - pm - mp + mm) / (4 * h * h)
    return out


def hessian_of_gradients(exact: Callable[[np.ndarray], np.ndarray], u: np.ndarray,
                         h: float = HESSIAN_STEP) -> np.ndarray:
    """Central differences of the model's own gradient at u (2 d gradients, no runs),
    symmetrised; FloatingPointError where a gradient cannot be had."""
    d = len(u)
    try:
        columns = [(exact(u + h * e) - exact(u - h * e)) / (2 * h) for e in np.eye(d)]
    except (RuntimeError, ArithmeticError, ValueError) as error:
        raise FloatingPointError(f"a gradient near the design point failed ({error})") from None
    out = np.column_stack(columns)
    return (out + out.T) / 2


def curvatures(search: Search, hess: np.ndarray) -> np.ndarray:
    """The main curvatures of the limit state at the design point (positive where it bends away
    from the origin): eigenvalues of the Hessian on the tangent plane over |grad g|."""
    d = len(search.u)
    if d < 2:
        return np.zeros(0)
    alpha = search.alpha
    basis = np.linalg.qr(np.column_stack([alpha, np.eye(d)]))[0][:, 1:d]
    tangent = basis.T @ hess @ basis / np.linalg.norm(search.gradient)
    return np.sort(np.linalg.eigvalsh((tangent + tangent.T) / 2))


def sorm(beta: float, kappa: np.ndarray) -> dict[str, float | None]:
    """pf by Breitung's formula, Hohenbichler and Rackwitz's and Tvedt's, None where a factor
    is not positive (the formula does not apply there)."""
    from scipy.special import ndtr

    pf1 = float(ndtr(-beta))
    density = float(np.exp(-beta * beta / 2) / np.sqrt(2 * np.pi))
    psi = density / pf1 if pf1 > 0 else np.inf

    def product(scale: complex) -> complex | None:
        factors = 1 + scale * kappa
        if np.iscomplexobj(factors):
            return complex(np.prod(factors ** -0.5))
        return None if (factors <= 0).any() else float(np.prod(factors ** -0.5))

    tvedt = None
    at_beta, at_next = product(beta), product(beta + 1)
    if at_beta is not None and at_next is not None:
        spare = beta * pf1 - density
        tvedt = float(pf1 * at_beta + spare * (at_beta - at_next) + (beta + 1) * spare
                      * (at_beta - product(beta + 1j).real))
    breitung, rackwitz = product(beta), product(psi)
    return {"breitung": None if breitung is None else pf1 * breitung,
            "hohenbichler_rackwitz": None if rackwitz is None else pf1 * rackwitz,
            "tvedt": tvedt}


def form(g: GFunction, names: list[str], named: Any, step: float, max_runs: int,
         other_starts: bool, curved: bool, slope: Slope | None = None,
         exact: Callable[[np.ndarray], np.ndarray] | None = None,
         formula: str = "hohenbichler_rackwitz") -> dict[str, Any]:
    """FORM's (or with `curved`, SORM's) results: the design point of smallest beta among the
    searches, its importance factors, and warnings where the searches disagree. `slope`: the
    gradient of g (default: forward differences with `step`); `exact`: u -> the model's own
    gradient there (no runs), for SORM's Hessian."""
    from scipy.special import ndtr, ndtri

    from studyrun.analyses.reliability.sampling import estimate

    budget = Budget(g, max_runs)
    d = len(names)
    warnings: list[str] = []
    try:
        at_origin = float(budget(np.zeros((1, d)))[0])
    except RunsExhausted:
        at_origin = np.nan
    if np.isnan(at_origin):
        return failed_form(budget.runs, "the run at the median point gave no value of g")
    scale, safe = max(abs(at_origin), 1e-12), at_origin > 0
    searches: list[Search] = []
    try:
        slope = slope or differences(step)
        searches.append(search(budget, np.zeros(d), slope, safe, scale))
        if other_starts and searches[0].converged:
            for point in starts(searches[0]):
                searches.append(search(budget, point, slope, safe, scale))
    except RunsExhausted:
        warnings.append(f"max_runs ({max_runs:,}) ended the searches")
    except FloatingPointError as error:
        warnings.append(f"{error}; the search stopped there")
    found = distinct(searches)
    if not found:
        why = searches[0].message if searches else "no search finished"
        return failed_form(budget.runs, f"FORM found no design point: {why}", warnings)
    best = found[0]
    beta = best.beta
    pf = float(ndtr(-beta))
    first = searches[0]
    convergence = [{"runs": h["runs"], "pf": float(ndtr(-h["beta"] if safe else h["beta"])),
                    "cov": None, "g": h["g"]} for h in first.history]
    result = estimate(pf, None, None, budget.runs, "sorm" if curved else "form", True,
                      convergence)
    result["beta"] = beta  # exactly FORM's, not through Phi and back
    result["design_point"] = named(best.u)
    result["importance"] = dict(zip(names, map(float, best.alpha ** 2)))
    result["iterations"] = first.iterations
    if len(found) > 1:
        union = float(sum(ndtr(-s.beta) for s in found))
        result["design_points"] = [{"beta": s.beta, **named(s.u)} for s in found]
        warnings.append(
            f"the searches from {len(searches)} starts found {len(found)} design points (beta "
            f"{', '.join(f'{s.beta:.3g}' for s in found)}): FORM's pf rests on the nearest one "
            f"alone and underestimates a failure domain with several; the sum over the points "
            f"is {union:.3g}. Use subset or ak-mcs for this limit state")
    if curved:
        try:
            hess = hessian(budget, best.u, best.g) if exact is None else \
                hessian_of_gradients(exact, best.u)
        except (RunsExhausted, FloatingPointError) as error:
            why = "max_runs reached" if isinstance(error, RunsExhausted) else str(error)
            warnings.append(f"no curvatures: {why}; pf is FORM's")
        else:
            kappa = curvatures(best, hess)
            formulas = sorm(beta, kappa)
            chosen = formulas[formula] if formula != "hohenbichler_rackwitz" else \
                formulas["hohenbichler_rackwitz"] or formulas["breitung"]
            result["sorm"] = {"curvatures": [float(k) for k in kappa], **formulas,
                              "form_pf": pf}
            if chosen is None:
                warnings.append(f"a curvature is below -1/beta: the {formula} formula does "
                                "not apply; pf is FORM's")
            else:
                result.update(pf=chosen, beta=float(-ndtri(chosen)))
            result["runs"] = budget.runs
            if chosen is not None and abs(chosen - pf) > 0.1 * pf:
                warnings.append(f"the limit state is curved at the design point: SORM's pf "
                                f"({chosen:.3g}) differs from FORM's ({pf:.3g}) by more than 10%")
    if not first.converged:
        warnings.append(f"the search from the median point did not converge: {first.message}")
    if warnings:
        result["warnings"] = warnings
    return result


def failed_form(runs: int, why: str, warnings: list[str] | None = None) -> dict[str, Any]:
    """The results of a FORM that found no design point: no pf, the reason as its error."""
    from studyrun.analyses.reliability.sampling import estimate

    result = estimate(None, None, None, runs, "form", False, [])
    result["error"] = why
    if warnings:
        result["warnings"] = warnings
    return result
