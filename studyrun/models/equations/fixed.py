"""Fixed-step integration (Euler, classical RK4) over a whole ensemble, and the messages
for members whose states stop being finite."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

import numpy as np

from studyrun.models.equations.compiled import CompiledSystem
from studyrun.models.equations.timegrid import TimeGrid


def integrate_fixed(compiled: CompiledSystem, base: Mapping[str, Any], y0: np.ndarray,
                    grid: TimeGrid, method: str) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """Euler or classical RK4 at step ``grid.dt``; states (S, T, n) and variables (T, n) each,
    variables evaluated from the states at each saved time."""
    bound = compiled.bind(base)
    S, n = len(compiled.state_names), y0.shape[1]
    saved = np.empty((S + len(compiled.variable_names), grid.n_steps // grid.stride + 1, n))
    states = saved[:S]  # one block: fewer page faults
    variables = dict(zip(compiled.variable_names, saved[S:]))
    y = y0.copy()  # (S, n), updated in place
    for j, env in fixed_steps(bound.rates, y, grid, method):
        states[:, j] = y
        for name, value in bound.variables(env).items():
            variables[name][j] = value
    return states, variables


def fixed_steps(rates: Callable[[float, Any], tuple[list[Any], Any]], y: Any, grid: TimeGrid,
                method: str) -> Iterator[tuple[int, Any]]:
    """Step the rows of ``y`` (one array per state, updated in place) by Euler or classical RK4
    at ``grid.dt``; at each saved time yield its index on the output grid and what ``rates(t,
    y)`` returned there besides the derivatives. The one fixed-step scheme: the models and their
    exact sensitivities integrate with it, operation for operation."""
    dt, stride, n_steps = grid.dt, grid.stride, grid.n_steps
    for k in range(n_steps + 1):
        t = grid.start + k * dt
        d, extra = rates(t, y)
        if k % stride == 0:
            yield k // stride, extra
        if k == n_steps:
            return
        if method == "euler":
            steps = [dt * di for di in d]
        else:
            half = 0.5 * dt
            k2, _ = rates(t + half, [yi + half * di for yi, di in zip(y, d)])
            k3, _ = rates(t + half, [yi + half * di for yi, di in zip(y, k2)])
            k4, _ = rates(t + dt, [yi + dt * di for yi, di in zip(y, k3)])
            steps = [(dt / 6.0) * (a + 2.0 * (b + c) + e) for a, b, c, e in zip(d, k2, k3, k4)]
        for yi, step in zip(y, steps):  # after every step is computed: a rate may be a state
            yi += step


def nonfinite_errors(names: list[str], states: np.ndarray, times: np.ndarray,
                     method: str) -> list[str | None]:
    """One message per member whose states stopped being finite, naming the first such state."""
    n = states.shape[2]
    errors: list[str | None] = [None] * n
    bad = ~np.isfinite(states)  # (S, T, n)
    members = np.flatnonzero(bad.any(axis=(0, 1)))
    for m in members:
        first = bad[:, :, m].argmax(axis=1)  # per state: first bad index (0 if none)
        has = bad[:, :, m].any(axis=1)
        i = min(np.flatnonzero(has), key=lambda s: first[s])
        errors[m] = (f"{method}: state {names[i]!r} is not finite at time "
                     f"{times[first[i]]:g} (overflow or invalid operation; try a smaller step)")
    return errors
