"""Sensitivity coefficients on a reduced set of trajectory points (the dissertation, ch. 2;
docs/methods.md, "Reduced-partition sensitivity coefficients"), for `ode` and `stockflow` models.

The extended trajectory is the nominal run's points (x(t), u(t)) on the integration grid (every
step of a fixed-step method; the output grid of an adaptive one), u the time-varying inputs:
flows and auxiliaries that depend on time but on no state (and time itself when a rate reads
the clock directly). At a point, s_ij = w * p_j df_i/dp_j by directed differences of the
right-hand side (m + 1 evaluations of f per point, no perturbed integration); an input that
reads a parameter moves with it by u(t; p + h) - u(t; p) (at a cluster centre, the mean of its
members' moves). We scale by p_j
(`scale: relative`, the default) so that parameters of different units compare;
`scale: absolute` keeps the formula's df_i/dp_j. A coefficient is the weighted mean
c_ij = sum w |s_ij| / sum w (the formula's 1/N over the partition's points scales every
coefficient of a clustered partition alike, so rankings are the same; dividing by the total
weight makes them estimates of the full-grid ones); the model's coefficient of p_j is sum_i c_ij.
A parameter that only sets initial states has df/dp = 0, so its coefficients are 0 by definition;
`initial_state_only` lists such parameters (with the states they set) so that the results say so.

- uniform: Algorithm 1, a uniform partition of the time span refined by doubling its points
  until no coefficient changes by more than `tolerance` (relative) or every grid point is used.
- clustering: Algorithm 2, one pass in time order; a point joins the nearest centre within
  `radius` (max-norm of differences relative to each coordinate's range over the trajectory),
  moving it to the weighted mean, or starts a new cluster; centres weighted by their counts.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from studyrun.analyses.initial_states import initial_only
from studyrun.analyses.local.agreement import rank
from studyrun.models.equations import (
    FIXED_METHODS,
    CompiledSystem,
    EquationEvaluator,
    EquationSystem,
)

TINY = 1e-12


def nominal_trajectory(system: EquationSystem, values: dict[str, float]
                       ) -> tuple[EquationSystem, np.ndarray, dict[str, np.ndarray]]:
    """The system at the nominal constants, the integration grid and every series on it."""
    constants = {k: float(values.get(k, v)) for k, v in system.constants.items()}
    grid = system.grid
    if system.method in FIXED_METHODS:
        grid = dataclasses.replace(grid, save_every=grid.dt)
    nominal = dataclasses.replace(system, constants=constants, grid=grid)
    output = EquationEvaluator(nominal).integrate({}, n=1)
    if output.errors[0]:
        raise RuntimeError(f"the nominal run failed: {output.errors[0]}")
    return nominal, output.time, {k: v[0] for k, v in output.series.items()}


def input_names(compiled: CompiledSystem) -> tuple[list[str], bool]:
    """Variables that depend on time but on no state; and whether a state-dependent expression
    reads the clock directly (then time is a coordinate too)."""
    states = set(compiled.state_names)
    on_state: dict[str, bool] = {}
    on_time: dict[str, bool] = {}
    for name, expr in compiled.variables:  # dependency order
        on_state[name] = bool(expr.names & states) or any(on_state.get(n) for n in expr.names)
        on_time[name] = "time" in expr.names or any(on_time.get(n) for n in expr.names)
    inputs = [n for n, _ in compiled.variables if on_time[n] and not on_state[n]]
    direct = any("time" in e.names for e in compiled.derivatives) or any(
        "time" in e.names and on_state[n] for n, e in compiled.variables)
    return inputs, direct


class RateSensitivity:
    """p_j df_i/dp_j (or df_i/dp_j) at points of the extended trajectory, by directed
    differences of the compiled right-hand side, all points and parameters in one batch."""

    def __init__(self, system: EquationSystem, parameters: list[str], delta: float,
                 relative: bool):
        self.compiled = CompiledSystem(system)
        self.constants = dict(system.constants)
        self.parameters = parameters
        self.nominal = np.array([self.constants[p] for p in parameters])
        self.steps = np.where(self.nominal != 0, delta * np.abs(self.nominal), delta)
        self.factor = self.nominal if relative else np.ones(len(parameters))
        self.inputs, _ = input_names(self.compiled)

    def __call__(self, points: dict[str, np.ndarray],
                 shifts: dict[str, np.ndarray] | None = None) -> np.ndarray:
        """(P, n, m) from points: state, input and 'time' arrays of length P. `shifts`: how
        each input moves per perturbed parameter, (m + 1, P) (default: input_shifts at the
        points' times)."""
        m, size = len(self.parameters), len(points["time"])
        env: dict[str, Any] = {k: np.tile(np.asarray(v, dtype=float), m + 1)
                               for k, v in points.items()}
        env.update(self.constants)
        for j, name in enumerate(self.parameters):
            values = np.full((m + 1, size), self.nominal[j])
            values[j + 1] += self.steps[j]
            env[name] = values.reshape(-1)
        shifts = self.input_shifts(points["time"]) if shifts is None else shifts
        for name, shift in shifts.items():
            env[name] = env[name] + shift.reshape(-1)
        for name, expr in self.compiled.variables:
            if name not in self.inputs:
                env[name] = expr(env)
        rates = np.array([np.broadcast_to(d(env), ((m + 1) * size,))
                          for d in self.compiled.derivatives]).reshape(-1, m + 1, size)
        slopes = (rates[:, 1:, :] - rates[:, :1, :]) / self.steps[None, :, None]  # (n, m, P)
        return np.transpose(slopes * self.factor[None, :, None], (2, 0, 1))


    def input_shifts(self, times: np.ndarray) -> dict[str, np.ndarray]:
        """u(t; p + h_j e_j) - u(t; p) for each input that reads a parameter, (m + 1, P); the
        inputs are the dissertation's external u(t), but a parameter may drive them."""
        m, size = len(self.parameters), len(times)
        env: dict[str, Any] = {**self.constants, "time": np.tile(np.asarray(times, float), m + 1)}
        for j, name in enumerate(self.parameters):
            values = np.full((m + 1, size), self.nominal[j])
            values[j + 1] += self.steps[j]
            env[name] = values.reshape(-1)
        shifts = {}
        for name, expr in self.compiled.variables:
            if name in self.inputs:
                env[name] = np.broadcast_to(expr(env), env["time"].shape)
                moved = env[name].reshape(m + 1, size)
                if np.any(moved != moved[:1]):
                    shifts[name] = moved - moved[:1]
        return shifts


def coefficients(sensitivities: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """c_ij = sum_k w_k |s_ij(k)| / sum_k w_k, shape (n, m)."""
    return np.tensordot(weights, np.abs(sensitivities), axes=1) / weights.sum()


def largest_change(old: np.ndarray, new: np.ndarray) -> float:
    """The largest relative change of a coefficient (those below 1e-12 of the largest ignored)."""
    size = np.maximum(np.abs(old), np.abs(new))
    keep = size > TINY * max(size.max(initial=0.0), TINY)
    return float(np.max(np.abs(new - old)[keep] / size[keep], initial=0.0))


def refine_uniform(sensitivity: RateSensitivity, points: dict[str, np.ndarray],
                   intervals: int, tolerance: float) -> dict[str, Any]:
    """Algorithm 1: double a uniform partition's points until the coefficients settle."""
    count = len(points["time"])
    known: dict[int, np.ndarray] = {}
    previous, steps = None, 0
    while True:
        chosen = np.unique(np.round(np.linspace(0, count - 1, intervals + 1)).astype(int))
        new = [i for i in chosen.tolist() if i not in known]
        if new:
            found = sensitivity({k: v[new] for k, v in points.items()})
            known.update(zip(new, found))
        current = coefficients(np.array([known[i] for i in chosen.tolist()]),
                               np.ones(len(chosen)))
        steps += 1
        change = None if previous is None else largest_change(previous, current)
        if (change is not None and change < tolerance) or len(chosen) >= count:
            return {"coefficients": current, "points": len(chosen), "evaluated": len(known),
                    "iterations": steps, "converged": change is not None and change < tolerance,
                    "last_change": change, "step": float(np.ptp(points["time"]) / intervals)}
        previous, intervals = current, intervals * 2


def cluster(coordinates: np.ndarray, times: np.ndarray, radius: float
            ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Algorithm 2: centres (C, d), their weights (counts), mean times and each point's
    cluster, in one pass."""
    span = np.ptp(coordinates, axis=0)
    span = np.where(span > 0, span, np.maximum(np.abs(coordinates).max(axis=0), 1.0))
    unit = coordinates / span
    weights, clocks, labels = [1.0], [float(times[0])], [0]
    stack = unit[:1].copy()
    for point, clock in zip(unit[1:], times[1:]):
        distance = np.max(np.abs(stack - point), axis=1)
        k = int(np.argmin(distance))
        labels.append(k if distance[k] <= radius else len(weights))
        if distance[k] <= radius:
            w = weights[k]
            stack[k] = (w * stack[k] + point) / (w + 1)
            clocks[k] = (w * clocks[k] + float(clock)) / (w + 1)
            weights[k] = w + 1
        else:
            stack = np.vstack([stack, point])
            weights.append(1.0)
            clocks.append(float(clock))
    return stack * span, np.array(weights), np.array(clocks), np.array(labels)


def analyse_partition(system: EquationSystem, values: dict[str, float], parameters: list[str],
                      delta: float, relative: bool, intervals: int, tolerance: float,
                      radius: float) -> dict[str, Any]:
    """Coefficients on the full grid, by uniform refinement and by clustering; points used and
    evaluations of the right-hand side saved against the full trajectory."""
    nominal, times, series = nominal_trajectory(system, values)
    sensitivity = RateSensitivity(nominal, parameters, delta, relative)
    inputs, direct = input_names(sensitivity.compiled)
    names = sensitivity.compiled.state_names + inputs + (["time"] if direct else [])
    points = {**{k: series[k] for k in names if k != "time"}, "time": times}
    per_point = len(parameters) + 1
    full_points = len(times)
    full = coefficients(sensitivity(points), np.ones(full_points))

    def entry(c: np.ndarray, used: int, evaluated: int) -> dict[str, Any]:
        model = {p: float(v) for p, v in zip(parameters, c.sum(axis=0))}
        return {"coefficients": {s: {p: float(v) for p, v in zip(parameters, row)}
                                 for s, row in zip(sensitivity.compiled.state_names, c)},
                "model": model, "ranking": rank(model), "points": used,
                "evaluations": evaluated * per_point,
                "saved": (full_points - evaluated) * per_point}

    uniform = refine_uniform(sensitivity, points, intervals, tolerance)
    coords = np.column_stack([points[k] for k in names])
    centres, weights, clocks, labels = cluster(coords, times, radius)
    at = {k: centres[:, i] for i, k in enumerate(names)}
    at["time"] = clocks if "time" not in names else at["time"]
    shifts = {}  # an input's shift at a centre: the mean of its members' shifts
    for name, shift in sensitivity.input_shifts(times).items():
        total = np.zeros((shift.shape[0], len(weights)))
        np.add.at(total.T, labels, shift.T)
        shifts[name] = total / weights
    clustered = coefficients(sensitivity(at, shifts), weights)
    return {
        "scale": "relative" if relative else "absolute", "coordinates": names,
        "initial_state_only": initial_only(sensitivity.compiled, parameters),
        "full": entry(full, full_points, full_points),
        "uniform": entry(uniform["coefficients"], uniform["points"], uniform["evaluated"])
        | {k: uniform[k] for k in ("iterations", "converged", "last_change", "step")}
        | {"tolerance": tolerance},
        "clustering": entry(clustered, len(weights), len(weights)) | {"radius": radius},
    }
