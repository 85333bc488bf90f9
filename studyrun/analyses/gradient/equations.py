"""The gradient of a weighted sum of an equation model's outputs on its grid,
J = sum_k sum_o w_ok h_o(x(t_k), p, t_k), by the adjoint or the forward sensitivity equations
(docs/methods.md, "Adjoint gradients"), with the exact Jacobians of local/exact.py.

Adjoint: integrate the model forward with dense output, then lambda backward from the last
weighted point. At each weighted t_k, lambda += (dh/dx)^T w_k; between them
-dlambda/dt = (df/dx)^T lambda, with mu' = -(df/dp)^T lambda beside it, by LSODA (Adams while
the equations are not stiff, BDF with their exact Jacobian once they are; on these linear
equations at rtol 1e-10 it took some 25 times fewer evaluations than Radau). The right-hand
side is the vector-Jacobian products, compiled (local/exact.py), never the Jacobians. At t0,
dJ/dp = mu + sum_k (dh/dp)^T w_k + (dx0/dp)^T lambda(t0): n + m equations backward, whatever
m; a grid of weighted points (an integral) restarts them at each. Forward: the n(m + 1) forward
sensitivity equations, dJ/dp = sum_k w_k dh/dp(t_k).

The weights come from `weigh(times, outputs on the grid)` once the forward pass knows the
outputs, so an objective may depend on them (the grid point of a maximum, a residual).
"""

from __future__ import annotations

import time as clock
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from studyrun.analyses.local.exact import SymbolicModel, constant_values, exact_functions
from studyrun.models.equations import FIXED_METHODS, EquationSystem

Weigh = Callable[[np.ndarray, dict[str, np.ndarray]], dict[str, np.ndarray]]


@dataclass
class Found:
    """J as integrated in-process, dJ/dp (m,) and what it cost."""

    value: float
    gradient: np.ndarray
    cost: dict[str, Any] = field(default_factory=dict)


def adjoint_gradient(model: SymbolicModel, system: EquationSystem, values: dict[str, float],
                     weigh: Weigh, rtol: float, atol: float) -> Found:
    """dJ/dp by one forward and one backward pass; RuntimeError when a pass fails."""
    from scipy.integrate import solve_ivp

    c = constant_values(model, system, values)
    times = system.grid.times
    n, m = len(model.states), len(model.parameters)
    started = clock.perf_counter()
    x0, dx0 = (np.asarray(a, dtype=float) for a in model.initial(c))
    method = system.method if system.method not in FIXED_METHODS else "RK45"
    forward = solve_ivp(lambda t, x: np.asarray(model.rate(t, x, c), dtype=float).reshape(n),
                        (float(times[0]), float(times[-1])), x0.reshape(n), method=method,
                        t_eval=times, dense_output=True, rtol=rtol, atol=atol,
                        **({"jac": lambda t, x: jacobians(model, t, x, c)[0]}
                           if method in ("Radau", "BDF", "LSODA") else {}))
    if not forward.success or forward.y.shape[1] != len(times):
        raise RuntimeError(f"the adjoint's forward pass did not integrate: {forward.message}")
    states = forward.y.T
    observed = [[np.asarray(a, dtype=float) for a in model.observe(t, x, c)]
                for t, x in zip(times, states)]
    outputs = np.array([h.reshape(-1) for h, _, _ in observed])  # (T, outputs)
    weights = weigh(times, {o: outputs[:, i] for i, o in enumerate(model.outputs)})
    W = np.column_stack([weights[o] for o in model.outputs])  # (T, outputs)
    forward_seconds = clock.perf_counter() - started

    started = clock.perf_counter()
    size = float(np.sum(np.abs(W * outputs))) or 1.0
    nominal = c[[model.constants.index(p) for p in model.parameters]]
    xscale = np.maximum(np.max(np.abs(states), axis=0), atol / rtol)
    pscale = np.where(nominal != 0, np.abs(nominal), 1.0)
    # absolute tolerances atol |J| on lambda_i max|x_i| and mu_j |p_j| (dJ per relative change
    # of a state or a parameter), in the model's own ratio of atol to rtol
    tolerance = atol * size * np.concatenate([1 / xscale, 1 / pscale])

    def backward(t: float, z: np.ndarray) -> np.ndarray:
        vx, vp = model.adjoint(t, forward.sol(t), c, z[:n])
        return -np.concatenate([np.asarray(vx, dtype=float).reshape(n),
                                np.asarray(vp, dtype=float).reshape(m)])

    def backward_jacobian(t: float, z: np.ndarray) -> np.ndarray:
        jx, jp = jacobians(model, t, forward.sol(t), c)
        J = np.zeros((n + m, n + m))
        J[:n, :n], J[n:, :n] = -jx.T, -jp.T
        return J

    z, direct = np.zeros(n + m), np.zeros(m)
    marks = np.flatnonzero(np.any(W != 0, axis=1))[::-1].tolist()  # weighted points, last first
    solves = steps = 0
    for k, target in zip(marks, marks[1:] + [0]):
        _, hx, hp = observed[k]
        z[:n] += hx.reshape(len(model.outputs), n).T @ W[k]
        direct += hp.reshape(len(model.outputs), m).T @ W[k]
        if target == k:
            continue
        back = solve_ivp(backward, (float(times[k]), float(times[target])), z, method="LSODA",
                         jac=backward_jacobian, rtol=rtol, atol=tolerance)
        if not back.success:
            raise RuntimeError(f"the adjoint equations did not integrate back from "
                               f"t = {times[k]:g}: {back.message}")
        z = back.y[:, -1]
        solves, steps = solves + 1, steps + len(back.t) - 1
    gradient = z[n:] + direct + dx0.reshape(n, m).T @ z[:n]
    return Found(float(np.sum(W * outputs)), gradient, {
        "integrations": 1 + solves, "backward_steps": steps, "forward_seconds": forward_seconds,
        "backward_seconds": clock.perf_counter() - started})


def jacobians(model: SymbolicModel, t: float, x: np.ndarray, c: np.ndarray
              ) -> tuple[np.ndarray, np.ndarray]:
    """df/dx (n, n) and df/dp (n, m) at (t, x)."""
    n, m = len(model.states), len(model.parameters)
    _, jx, jp = model.rhs(t, x, c)
    return (np.asarray(jx, dtype=float).reshape(n, n),
            np.asarray(jp, dtype=float).reshape(n, m))


def forward_gradient(model: SymbolicModel, system: EquationSystem, values: dict[str, float],
                     weigh: Weigh, rtol: float, atol: float) -> Found:
    """dJ/dp from the forward sensitivity equations (n(m + 1) equations in one pass)."""
    started = clock.perf_counter()
    times, found = exact_functions(system, values, model.parameters, model.outputs, rtol, atol,
                                   model)
    weights = weigh(times, {o: y for o, (y, _) in found.items()})
    value = sum(float(weights[o] @ y) for o, (y, _) in found.items())
    gradient = sum(weights[o] @ dy for o, (_, dy) in found.items())
    return Found(value, np.asarray(gradient, dtype=float), {
        "integrations": 1, "backward_steps": 0,
        "forward_seconds": clock.perf_counter() - started, "backward_seconds": 0.0})
