"""Gradient matching (docs/methods.md, "Gradient matching"; the practical variant of
identification by direction-field deviation): fit the parameters of an equation model without
integrating it at every trial point.

Each observed state's data are smoothed with a cubic smoothing spline (GCV-chosen penalty,
weights 1/err^2 when the data have errors) and differentiated. On the merged grid of the
observation times (within the range every observed state covers), the model's right-hand side
f(x, p) is evaluated with the smoothed observations for the observed states and the model's
trajectory for the others, and the objective F(p) = sum_i sum_k ((f_i - dx~_i/dt) / scale_i)^2
is minimised over p (scale_i: the root mean square of state i's slopes) in unit-box coordinates
by L-BFGS-B with a logarithmic barrier mu * sum(-log u - log(1 - u)) that keeps p inside its
bounds, for a decreasing sequence of mu, each solution starting the next. The search has
converged when the last stage that converged or lowered F converged: later stages that cannot
lower it at all (L-BFGS-B's line search failing at rounding level, "ABNORMAL") confirm its
answer. f never reads a parameter that only sets initial states; such a parameter is taken from
the smoothed data of the states it sets at the model's start (it must set an observed state whose
data begin there; one that sets only unobserved states is fitted through their trajectories).
When some states are not observed, the model and its finite-difference sensitivities (m + 1
runs, one batch) are computed once per outer step at the current p, and those states enter the
mismatch linearised in p around it (the dissertation's outer loop), until p settles.
`refine: true` then runs an ordinary trajectory fit from the answer.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from studyrun.analyses.calibrate.data import Observations
from studyrun.analyses.initial_states import initial_only
from studyrun.analyses.search.batching import Evaluations
from studyrun.analyses.search.fit import Box, FitResult, Settings, fit, steps
from studyrun.core.errors import Problem, StudyError
from studyrun.models.base import HasEquations

MUS = [10.0 ** -k for k in range(2, 11)]  # barrier weights, decreasing
EDGE = 1e-12  # unit-box coordinates stay in [EDGE, 1 - EDGE]
OUTER = 10  # outer steps at most when some states are not observed
NO_PROGRESS = 1e-12  # a barrier stage that lowers its objective by less (relative) did not move


@dataclass
class Search:
    """How a barrier sequence ended: converged or not, and why in words."""

    converged: bool
    message: str


class DirectionField:
    """The mismatch between the model's right-hand side and the slopes of the smoothed data."""

    def __init__(self, context, data: list[Observations], box: Box) -> None:
        from studyrun.models.equations import CompiledSystem

        model = context.model
        if not isinstance(model, HasEquations):
            raise StudyError("gradient matching evaluates the model's right-hand side: it needs "
                             "an ode or stockflow model", path="analysis.method")
        system = model.to_system()
        self.compiled = CompiledSystem(system)
        self.constants = {**{k: float(v) for k, v in system.constants.items()}, **context.fixed}
        self.box = box
        states = self.compiled.state_names
        merged = merge_by_state(data, states)
        if not merged:
            raise StudyError(f"gradient matching needs observations of at least one state of the "
                             f"model ({', '.join(states)}); the data observe none",
                             path="analysis.data")
        problems = initial_state_problems(system, box.names, data)
        if problems:
            raise StudyError([Problem(p.message, f"analysis.{p.path}") for p in problems])
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
        self.at_start: dict[str, float] = {}
        self.start_time = float(system.grid.start)
        for state, (x, y, err) in merged.items():
            spline = smooth(x, y, err)
            self.values[state] = spline(self.times)
            self.slopes[state] = spline.derivative()(self.times)
            self.at_start[state] = float(spline(self.start_time))
        self.scales = {s: max(float(np.sqrt(np.mean(d ** 2))), 1e-300) for s, d in self.slopes.items()}
        self.from_data = {name: [s for s in states if s in merged]
                          for name, states in initial_only(self.compiled, box.names).items()
                          if any(s in merged for s in states)}
        self.free = np.array([name not in self.from_data for name in box.names])

    def mismatch(self, p: np.ndarray) -> float:
        """F(p): the sum of squared scaled mismatches at parameters p (natural units)."""
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
        return total if math.isfinite(total) else 1e300

    def with_initial_states(self, p: np.ndarray) -> np.ndarray:
        """p with each parameter that only sets observed initial states fitted to the smoothed
        data at the model's start (least squares over the states they set; the others held)."""
        if not self.from_data:
            return p
        from scipy.optimize import least_squares

        names = list(self.from_data)
        index = [self.box.names.index(n) for n in names]
        states = [s for s in self.compiled.state_names
                  if any(s in self.from_data[n] for n in names)]
        rows = [self.compiled.state_names.index(s) for s in states]
        target = np.array([self.at_start[s] for s in states])
        level = np.array([max(float(np.sqrt(np.mean(self.values[s] ** 2))), 1e-300)
                          for s in states])
        env: dict[str, Any] = {**self.constants, **dict(zip(self.box.names, map(float, p))),
                               "time": self.start_time}

        def residuals(q: np.ndarray) -> np.ndarray:
            env.update(zip(names, map(float, q)))
            values = np.array([float(self.compiled.initial[i](env)) for i in rows])
            return (values - target) / level

        lo, hi = self.box.lo[index], self.box.hi[index]
        out = least_squares(residuals, np.clip(p[index], lo, hi), bounds=(lo, hi), xtol=1e-15,
                            ftol=1e-15, gtol=1e-15)
        fitted = np.array(p, dtype=float)
        fitted[index] = np.clip(out.x, lo, hi)
        return fitted

    def use_trajectories(self, p: np.ndarray, h: np.ndarray, time: np.ndarray,
                         series: dict[str, np.ndarray]) -> None:
        """The states without data as x(t, p) + dx/dp (q - p), from the runs at p and at p + h_j
        e_j (series: state -> (m + 1, T))."""
        self.anchor = p
        for s in self.hidden:
            runs = np.array([np.interp(self.times, time, row) for row in series[s]])
            self.linear[s] = (runs[0], ((runs[1:] - runs[0]) / h[:, None]).T)

    def minimise(self, start: np.ndarray, radius: float = 1.0) -> tuple[np.ndarray, Search]:
        """Barrier-penalised quasi-Newton over the parameters f reads, in unit-box coordinates,
        mu decreasing; each coordinate moves at most `radius` from the start."""
        from scipy.optimize import minimize

        free = self.free
        if not free.any():
            return start, Search(True, "every fitted parameter only sets initial states")
        lo, width = self.box.lo[free], (self.box.hi - self.box.lo)[free]
        scale = max(self.mismatch(start), 1e-300)

        def natural(v: np.ndarray) -> np.ndarray:
            p = np.array(start, dtype=float)
            p[free] = lo + np.clip(v, EDGE, 1 - EDGE) * width
            return p

        def objective(v: np.ndarray) -> float:
            return self.mismatch(natural(v)) / scale + mu * barrier(np.clip(v, EDGE, 1 - EDGE))

        v = np.clip((start[free] - lo) / width, 1e-6, 1 - 1e-6)
        limits = list(zip(np.maximum(v - radius, EDGE), np.minimum(v + radius, 1 - EDGE)))
        stages = []
        for mu in MUS:
            before = objective(v)
            out = minimize(objective, v, method="L-BFGS-B", bounds=limits,
                           options={"ftol": 1e-15, "gtol": 1e-12, "maxiter": 2000})
            stages.append((mu, out, bool(out.fun < before - NO_PROGRESS * abs(before))))
            v = out.x
        return natural(v), verdict(stages)


def verdict(stages: list[tuple[float, Any, bool]]) -> Search:
    """Converged when the last stage that converged or moved converged; the stages after it
    could not lower the objective at all (a failed line search at rounding level)."""
    idle = 0
    for mu, out, moved in reversed(stages):
        if not out.success and not moved:
            idle += 1
            continue
        if not out.success:
            return Search(False, f"L-BFGS-B stopped at barrier weight {mu:g} without "
                                 f"converging: {out.message}")
        text = (f"the mismatch is at its minimum within the bounds (L-BFGS-B at barrier weight "
                f"{mu:g}: {out.message})")
        if idle:
            text += (f"; no step at the {idle} smaller weight(s) could lower it (the line search "
                     f"stops at rounding level)")
        return Search(True, text)
    return Search(True, "no step could lower the mismatch from the start (the line search stops "
                        "at rounding level)")


def match_with_hidden_states(evaluate, evaluations: Evaluations, field: DirectionField,
                             box: Box, settings: Settings, start: np.ndarray
                             ) -> tuple[np.ndarray, Search, int, bool]:
    """Outer steps: the trajectory and its sensitivities at p (m + 1 runs, one batch), then the
    direction-field fit with the unobserved states linearised around p, within a trust radius
    that grows when the trajectory cost falls and shrinks (the step undone) when it rises. The
    runs carry those states' series: Calibrate.needs_series asks for them."""
    p, radius, best, search = start, 0.25, np.inf, Search(False, "no outer step was made")
    trial, outer = start, 0
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
                return p, search, outer, True
        else:
            radius /= 4
        trial, search = field.minimise(p, radius)
    return p, search, outer, False


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


def initial_state_problems(system, names: list[str], data: list[Observations]) -> list[Problem]:
    """Parameters that only set initial states are taken from the smoothed data at the model's
    start: each that sets an observed state needs that state's data to begin there."""
    from studyrun.models.equations import CompiledSystem

    compiled = CompiledSystem(system)
    merged = merge_by_state(data, compiled.state_names)
    start = float(system.grid.start)
    slack = 1e-9 * max(1.0, abs(float(system.grid.stop) - start))
    problems = []
    for name, states in initial_only(compiled, names).items():
        late = {s: float(merged[s][0][0]) for s in states
                if s in merged and merged[s][0][0] > start + slack}
        for state, first in late.items():
            problems.append(Problem(
                f"gradient matching fits the right-hand side, which never reads {name!r}: it only "
                f"sets the initial value of {state!r}, so it is taken from the smoothed data of "
                f"{state!r} at the model's start (time {start:g}), but they begin at time "
                f"{first:g}; add an observation at time {start:g}, fix {name} (a bare number), "
                f"or use method: lm or trf, which integrate the model", "method"))
    return problems


def gradient_matching(spec, context, evaluate, evaluations: Evaluations,
                      data: list[Observations], box: Box, settings: Settings
                      ) -> tuple[FitResult, dict[str, Any]]:
    """Gradient matching from the nominal start, then (refine) a trajectory fit from its answer."""
    field = DirectionField(context, data, box)
    start = field.with_initial_states(box.start)
    if field.hidden:
        p, search, outer, settled = match_with_hidden_states(evaluate, evaluations, field, box,
                                                             settings, start)
    else:
        (p, search), outer, settled = field.minimise(start), 1, True
    p = field.with_initial_states(p)  # again: an initial value may read a fitted parameter
    cost = float(evaluations(p[None])["cost"][0])
    integrations = evaluations.runs
    info: dict[str, Any] = {"estimate": dict(zip(box.names, map(float, p))), "cost": cost,
                            "objective": field.mismatch(p), "integrations": integrations,
                            "collocation_points": int(len(field.times)),
                            "outer_iterations": outer, "observed_states": field.observed,
                            "hidden_states": field.hidden, "settled": bool(settled),
                            "from_data_at_start": field.from_data, "refine_integrations": None}
    message = "".join(f"; {n} from the smoothed data of {', '.join(s)} at time "
                      f"{field.start_time:g}" for n, s in field.from_data.items())
    if settled:
        message = f"gradient matching {'converged' if search.converged else 'did not converge'}" \
                  f": {search.message}{message}"
    else:
        message = (f"gradient matching did not converge: the parameters still moved after "
                   f"{OUTER} outer steps (states without data: {', '.join(field.hidden)}); try "
                   f"refine: true. The last direction-field fit: {search.message}{message}")
    result = FitResult(p, cost, search.converged and settled, message, outer)
    if spec.refine:
        refined = fit(evaluations, p, box, Settings(**{**settings.__dict__, "method": spec.fit}))
        info["refine_integrations"] = evaluations.runs - integrations
        refined.message = f"gradient matching, then {spec.fit}: {refined.message}"
        result = refined
    return result, info
