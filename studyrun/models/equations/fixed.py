"""Fixed-step integration (Euler, classical RK4) over a whole ensemble, and the messages
for members whose states stop being finite."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from .compiled import CompiledSystem
from .timegrid import TimeGrid


def integrate_fixed(compiled: CompiledSystem, base: Mapping[str, Any], y0: np.ndarray,
                    grid: TimeGrid, method: str) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """Euler or classical RK4 at step ``grid.dt``; states (S, T, n) and variables (T, n) each,
    variables evaluated from the states at each saved time."""
    bound = compiled.bind(base)
    n = y0.shape[1]
    dt, stride, n_steps = grid.dt, grid.stride, grid.n_steps
    T = n_steps // stride + 1
    S = len(compiled.state_names)
    saved = np.empty((S + len(compiled.variable_names), T, n))  # one block: fewer page faults
    states = saved[:S]
    variables = dict(zip(compiled.variable_names, saved[S:]))
    y = y0.copy()  # (S, n), updated in place
    for k in range(n_steps + 1):
        t = grid.start + k * dt
        d, env = bound.rates(t, y)
        if k % stride == 0:
            j = k // stride
            states[:, j] = y
            for name, value in bound.variables(env).items():
                variables[name][j] = value
        if k == n_steps:
            break
        if method == "euler":
            steps = [dt * di for di in d]
        else:
            half = 0.5 * dt
            k2, _ = bound.rates(t + half, [yi + half * di for yi, di in zip(y, d)])
            k3, _ = bound.rates(t + half, [yi + half * di for yi, di in zip(y, k2)])
            k4, _ = bound.rates(t + dt, [yi + dt * di for yi, di in zip(y, k3)])
            steps = [(dt / 6.0) * (a + 2.0 * (b + c) + e) for a, b, c, e in zip(d, k2, k3, k4)]
        for yi, step in zip(y, steps):  # after every step is computed: a rate may be a state
            yi += step
    return states, variables


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
