"""Gradient matching (docs/methods.md section 5, the practical variant of identification by
direction-field deviation): fit the parameters of an equation model without integrating it at
every trial point.

Each observed state's data are smoothed with a cubic smoothing spline (GCV-chosen penalty,
weights 1/err^2 when the data have errors) and differentiated. On the merged grid of the
observation times (within the range every observed state covers), the model's right-hand side
f(x, p) is evaluated with the smoothed observations for the observed states and the model's
trajectory for the others, and sum_i sum_k ((f_i - dx~_i/dt) / scale_i)^2 is minimised over p
(scale_i: the root mean square of state i's slopes) in unit-box coordinates by L-BFGS-B with a
logarithmic barrier mu * sum(-log u - log(1 - u)) that keeps p inside its bounds, for a
decreasing sequence of mu, each solution starting the next. When some states are not observed,
the model and its finite-difference sensitivities (m + 1 runs, one batch) are computed once per
outer step at the current p, and those states enter the mismatch linearised in p around it (the
dissertation's outer loop), until p settles. `refine: true` then runs an ordinary trajectory fit
from the answer.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ...errors import StudyError
from .batching import Evaluations
from .data import Observations
from .fit import Box, FitResult, Settings, fit, steps

MUS = [10.0 ** -k for k in range(2, 11)]  # barrier weights, decreasing
EDGE = 1e-12  # unit-box coordinates stay in [EDGE, 1 - EDGE]
OUTER = 10  # outer steps at most when some states are not observed


class DirectionField:
    """The mismatch between the model's right-hand side and the slopes of the smoothed data."""

    def __init__(self, spec, data: list[Observations], box: Box) -> None:
        from ...models.equations import CompiledSystem

        model = spec._model
        if model is None or not hasattr(model, "to_system"):
            raise StudyError("gradient matching evaluates the model's right-hand side: it needs "
                             "an ode or stockflow model", path="analysis.method")
        system = model.to_system()
        self.compiled = CompiledSystem(system)
        self.constants = {**{k: float(v) for k, v in system.constants.items()}, **spec._fixed}
        self.box = box
        states = self.compiled.state_names
        merged = merge_by_state(data, states)
        if not merged:
            raise StudyError(f"gradient matching needs observations of at least one state of the "
                             f"model ({', '.join(states)}); the data observe none",
                             path="analysis.data")
        lo = max(x.min() for x, _, _ in merged.values())
        hi = min(x.max() for x, _, _ in merged.values())
        grid = np.unique(np.concatenate([x for x, _, _ in merged.values()]))
        self.times = grid[(grid >= lo) & (grid <= hi)]
        self.observed = list(merged)
        self.hidden = [s for s in states if s not in merged]
        self.linear: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        self.anchor = box.start
        self.values: dict[str, np.ndarray] = {}
        self.slopes: dict[str, np.ndarray] = {}
        for state, (x, y, err) in merged.items():
            spline = smooth(x, y, err)
            self.values[state] = spline(self.times)
            self.slopes[state] = spline.derivative()(self.times)
        self.scales = {s: max(float(np.sqrt(np.mean(d ** 2))), 1e-300) for s, d in self.slopes.items()}

    def mismatch(self, p: np.ndarray) -> float:
        """Mean squared scaled mismatch at parameters p (natural units)."""
        env: dict[str, Any] = dict(self.constants)
        env.update(zip(self.box.names, map(float, p)))
        env.update(self.values)
        for s, (base, sensitivity) in self.linear.items():  # states without data, linearised
            env[s] = base + sensitivity @ (p - self.anchor)
        env["time"] = self.times
        with np.errstate(all="ignore"):
            rates = dict(zip(self.compiled.state_names, self.compiled.evaluate(env)))
        total = 0.0
        for s in self.observed:
            r = (np.broadcast_to(rates[s], self.times.shape) - self.slopes[s]) / self.scales[s]
            total += float(np.sum(r * r))
        value = total / (len(self.times) * len(self.observed))
        return value if math.isfinite(value) else 1e300

    def use_trajectories(self, p: np.ndarray, h: np.ndarray, time: np.ndarray,
                         series: dict[str, np.ndarray]) -> None:
        """The states without data as x(t, p) + dx/dp (q - p), from the runs at p and at p + h_j
        e_j (series: state -> (m + 1, T))."""
        self.anchor = p
        for s in self.hidden:
            runs = np.array([np.interp(self.times, time, row) for row in series[s]])
            self.linear[s] = (runs[0], ((runs[1:] - runs[0]) / h[:, None]).T)

    def minimise(self, start: np.ndarray, radius: float = 1.0) -> tuple[np.ndarray, Any]:
        """Barrier-penalised quasi-Newton in unit-box coordinates, mu decreasing; each
        coordinate moves at most `radius` from the start."""
        from scipy.optimize import minimize

        box = self.box
        scale = max(self.mismatch(start), 1e-300)

        def objective(u):
            u = np.clip(u, EDGE, 1 - EDGE)
            return self.mismatch(box.to_natural(u)) / scale + mu * barrier(u)

        u = np.clip(box.to_unit(start), 1e-6, 1 - 1e-6)
        limits = list(zip(np.maximum(u - radius, EDGE), np.minimum(u + radius, 1 - EDGE)))
        out = None
        for mu in MUS:
            out = minimize(objective, u, method="L-BFGS-B", bounds=limits,
                           options={"ftol": 1e-15, "gtol": 1e-12, "maxiter": 2000})
            u = out.x
        return box.to_natural(np.clip(u, EDGE, 1 - EDGE)), out


def match_with_hidden_states(spec, evaluate, evaluations: Evaluations, field: DirectionField,
                             box: Box, settings: Settings):
    """Outer steps: the trajectory and its sensitivities at p (m + 1 runs, one batch), then the
    direction-field fit with the unobserved states linearised around p, within a trust radius
    that grows when the trajectory cost falls and shrinks (the step undone) when it rises."""
    spec._extra_series = list(field.hidden)
    p, radius, best, out = box.start, 0.25, np.inf, None
    trial, outer = box.start, 0
    for outer in range(1, OUTER + 1):
        h = steps(trial, box, settings.step * 10)
        rows = np.vstack([trial] + [trial + np.eye(len(trial))[j] * h[j] for j in range(len(trial))])
        cost = float(evaluations(rows)["cost"][0])  # counted once; below, the same runs' series
        if cost <= best:
            moved = np.max(np.abs(box.to_unit(trial) - box.to_unit(p)))
            p, best, radius = trial, cost, min(2 * radius, 1.0)
            outcome = evaluate(rows)
            field.use_trajectories(p, h, outcome.time, {s: outcome.series[s] for s in field.hidden})
            if outer > 1 and moved < 1e-6:
                return p, out, outer, True
        else:
            radius /= 4
        trial, out = field.minimise(p, radius)
    return p, out, outer, False


def barrier(u: np.ndarray) -> float:
    return float(-np.sum(np.log(u) + np.log1p(-u)))


def merge_by_state(data: list[Observations], states: list[str]) -> dict[str, tuple]:
    """Observations of each state from every block: sorted x, values (averaged where x repeats)
    and errors (None without an err column)."""
    merged: dict[str, list] = {}
    for block in data:
        for v in block.variables:
            if v.output in states:
                err = v.err if v.err is not None else np.full(len(v.x), np.nan)
                merged.setdefault(v.output, []).append((v.x, v.obs, err))
    out = {}
    for state, parts in merged.items():
        x = np.concatenate([p[0] for p in parts])
        y = np.concatenate([p[1] for p in parts])
        e = np.concatenate([p[2] for p in parts])
        ux, inverse = np.unique(x, return_inverse=True)
        uy = np.bincount(inverse, y) / np.bincount(inverse)
        ue = np.sqrt(np.bincount(inverse, np.nan_to_num(e) ** 2)) / np.bincount(inverse)
        out[state] = (ux, uy, None if np.isnan(e).any() else ue)
    return out


def smooth(x: np.ndarray, y: np.ndarray, err: np.ndarray | None):
    """A cubic smoothing spline (penalty by generalised cross-validation), or the interpolating
    cubic when there are too few points to smooth."""
    from scipy.interpolate import CubicSpline, make_smoothing_spline

    if len(x) < 3:
        raise StudyError(f"gradient matching needs at least 3 observations of a state to estimate "
                         f"its slope; got {len(x)}", path="analysis.data")
    if len(x) < 5:
        return CubicSpline(x, y)
    weights = None if err is None else 1.0 / err ** 2
    return make_smoothing_spline(x, y, w=weights)


def gradient_matching(spec, evaluate, evaluations: Evaluations, data: list[Observations], box: Box,
                      settings: Settings) -> tuple[FitResult, dict[str, Any]]:
    """Gradient matching from the nominal start, then (refine) a trajectory fit from its answer."""
    field = DirectionField(spec, data, box)
    if field.hidden:
        p, out, outer, settled = match_with_hidden_states(spec, evaluate, evaluations, field, box,
                                                          settings)
    else:
        (p, out), outer, settled = field.minimise(box.start), 1, True
    cost = float(evaluations(p[None])["cost"][0])
    integrations = evaluations.runs
    info: dict[str, Any] = {"estimate": dict(zip(box.names, map(float, p))), "cost": cost,
                            "objective": field.mismatch(p), "integrations": integrations,
                            "collocation_points": int(len(field.times)),
                            "outer_iterations": outer, "observed_states": field.observed,
                            "hidden_states": field.hidden, "settled": bool(settled),
                            "refine_integrations": None}
    message = f"gradient matching: {out.message}"
    if not settled:
        message += (f"; the parameters still moved after {OUTER} outer steps (states without "
                    f"data: {', '.join(field.hidden)}); try refine: true")
    result = FitResult(p, cost, bool(out.success) and settled, message, outer)
    if spec.refine:
        refined = fit(evaluations, p, box, Settings(**{**settings.__dict__, "method": spec.fit}))
        info["refine_integrations"] = evaluations.runs - integrations
        refined.message = f"gradient matching, then {spec.fit}: {refined.message}"
        result = refined
    return result, info
