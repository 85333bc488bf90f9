"""Exact sensitivity functions of `ode` and `stockflow` models (docs/methods.md,
"Local sensitivity functions").

The forward sensitivity equations ds_j/dt = (df/dx) s_j + df/dp_j, s_j(0) = dx0/dp_j are
integrated together with the model; the Jacobians come from symbolic differentiation (sympy) of
the model's own expressions (:func:`studyrun.blocks.expr.to_sympy`). Outputs that are flows or
auxiliaries y = h(x, p, t) get dy/dp_j = (dh/dx) s_j + dh/dp_j. Each s_j is integrated scaled
by |p_j| so that the states' absolute tolerance suits it.

Fixed-step methods (euler, rk4) integrate the augmented system with the model's own scheme and
step: that is the exact derivative of the model's discrete solution (Runge-Kutta schemes commute
with differentiation in the parameters). Adaptive methods integrate it with
``scipy.integrate.solve_ivp`` and the same method, at the tolerances given.

A model is not differentiable here when it uses a lookup (a piecewise-linear table), or min,
max, abs, floor, ceil, a comparison, if_then_else, step, pulse or ramp whose arguments or
conditions depend on a state or a parameter (functions of time alone are fine):
:class:`NotDifferentiable` says which expression, and the analysis falls back to differences.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from studyrun.blocks.expr import ExprError, parse, to_sympy
from studyrun.models.equations import FIXED_METHODS, EquationSystem, fixed_steps, topological_order


class NotDifferentiable(Exception):
    """The model's equations have no usable symbolic derivative; the message says where."""


@dataclass
class SymbolicModel:
    """The model's right-hand side, initial values and outputs with their Jacobians, compiled."""

    states: list[str]
    constants: list[str]
    parameters: list[str]
    outputs: list[str]
    rhs: Callable  # (t, x, c) -> [f (n,1), df/dx (n,n), df/dp (n,m)]
    rate: Callable  # (t, x, c) -> f (n,1), without the Jacobians (an adjoint's forward pass)
    adjoint: Callable  # (t, x, c, l) -> [(df/dx)^T l (n,1), (df/dp)^T l (m,1)]
    initial: Callable  # (c) -> [x0 (n,1), dx0/dp (n,m)]
    observe: Callable  # (t, x, c) -> [h (k,1), dh/dx (k,n), dh/dp (k,m)]


def symbolic_model(system: EquationSystem, parameters: list[str],
                   outputs: list[str]) -> SymbolicModel:
    """Differentiate the system's expressions; NotDifferentiable if it cannot be done exactly."""
    import sympy as sp

    states, constants = list(system.initial), list(system.constants)
    xs = [sp.Symbol(f"x{i}", real=True) for i in range(len(states))]
    cs = [sp.Symbol(f"c{k}", real=True) for k in range(len(constants))]
    t = sp.Symbol("t", real=True)
    symbols: dict[str, Any] = {**dict(zip(states, xs)), **dict(zip(constants, cs)), "time": t}
    blocked = build_variables(sp, system, symbols)
    f = [convert(sp, system.derivatives[s], system, symbols, f"the rate of {s!r}") for s in states]
    x0 = [convert(sp, system.initial[s], system, symbols, f"the initial value of {s!r}")
          for s in states]
    h = [symbols[name] for name in outputs]
    ps = [cs[constants.index(p)] for p in parameters]
    labelled = [(f"the rate of {s!r}", e) for s, e in zip(states, f)]
    labelled += [(f"the initial value of {s!r}", e) for s, e in zip(states, x0)]
    labelled += [(f"output {o!r}", e) for o, e in zip(outputs, h)]
    check_smooth(sp, labelled, set(xs) | set(ps), blocked)
    F, X0, H = sp.Matrix(f), sp.Matrix(x0), sp.Matrix(h)
    FX, FP = F.jacobian(xs), F.jacobian(ps)
    ls = sp.Matrix([sp.Symbol(f"l{i}", real=True) for i in range(len(states))])
    args = [t, xs, cs]
    compile_ = lambda exprs, a: sp.lambdify(a, exprs, modules="numpy", cse=True)  # noqa: E731
    return SymbolicModel(
        states, constants, parameters, outputs,
        rhs=compile_([F, FX, FP], args),
        rate=compile_(F, args),
        adjoint=compile_([FX.T * ls, FP.T * ls], [t, xs, cs, list(ls)]),
        initial=compile_([X0, X0.jacobian(ps)], [cs]),
        observe=compile_([H, H.jacobian(xs), H.jacobian(ps)], args))


def build_variables(sp: Any, system: EquationSystem, symbols: dict[str, Any]) -> dict[Any, str]:
    """Each flow and auxiliary as a sympy expression of states, constants and time, in
    dependency order; one without a symbolic form becomes a marker symbol -> the reason."""
    functions = system.functions()
    parsed = {name: parse(text, functions) for name, text in system.variables.items()}
    order, _ = topological_order({n: e.names for n, e in parsed.items()})
    blocked: dict[Any, str] = {}
    for name in order:
        try:
            symbols[name] = to_sympy(parsed[name], symbols)
        except ExprError as error:
            marker = sp.Symbol(f"blocked_{name}")
            blocked[marker] = f"{name!r}: {error.message}"
            symbols[name] = marker
    return blocked


def convert(sp: Any, text: Any, system: EquationSystem, symbols: dict[str, Any],
            what: str) -> Any:
    try:
        return to_sympy(parse(text, system.functions()), symbols)
    except ExprError as error:
        raise NotDifferentiable(f"{what}: {error.message}") from None


NON_SMOOTH = ("Abs", "Min", "Max", "floor", "ceiling", "sign", "Heaviside")


def check_smooth(sp: Any, expressions: list[tuple[str, Any]], dynamic: set,
                 blocked: dict) -> None:
    """Raise NotDifferentiable naming the first expression with a lookup, or with a kink or a
    switch that depends on a state or a parameter."""
    kinds = tuple(getattr(sp, k) for k in NON_SMOOTH)
    for label, expr in expressions:
        for marker in sorted(expr.free_symbols & set(blocked), key=str):
            raise NotDifferentiable(f"{label} depends on {blocked[marker]}")
        for atom in expr.atoms(sp.Piecewise):
            if any(getattr(cond, "free_symbols", set()) & dynamic for _, cond in atom.args):
                raise NotDifferentiable(f"{label} switches (a comparison, if_then_else, step, "
                                        f"pulse or ramp) on a state or a parameter")
        for atom in expr.atoms(*kinds):
            if atom.free_symbols & dynamic:
                raise NotDifferentiable(f"{label} has a kink ({type(atom).__name__.lower()}) "
                                        f"in a state or a parameter")


def exact_functions(system: EquationSystem, values: dict[str, float], parameters: list[str],
                    outputs: list[str], rtol: float, atol: float,
                    model: SymbolicModel | None = None
                    ) -> tuple[np.ndarray, dict[str, tuple[np.ndarray, np.ndarray]]]:
    """The output grid and, per output, y (T,) and dy/dp (T, m) at the nominal point
    (`model`: the system already differentiated for these parameters and outputs)."""
    model = model or symbolic_model(system, parameters, outputs)
    c = constant_values(model, system, values)
    nominal = np.array([c[model.constants.index(p)] for p in parameters])
    scale = np.where(nominal != 0, np.abs(nominal), 1.0)
    n, m = len(model.states), len(parameters)
    x0, dx0 = (np.asarray(a, dtype=float) for a in model.initial(c))
    z0 = np.concatenate([x0.reshape(n), (dx0.reshape(n, m) * scale).T.reshape(-1)])

    def augmented(t: float, z: np.ndarray) -> np.ndarray:
        f, jx, jp = (np.asarray(a, dtype=float) for a in model.rhs(t, z[:n], c))
        sigma = z[n:].reshape(m, n)
        dsigma = sigma @ jx.reshape(n, n).T + (jp.reshape(n, m) * scale).T
        return np.concatenate([f.reshape(n), dsigma.reshape(-1)])

    times = system.grid.times
    path = integrate(augmented, z0, system, times, rtol, atol)
    found: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    ys, dys = np.empty((len(times), len(outputs))), np.empty((len(times), len(outputs), m))
    for k, (time, z) in enumerate(zip(times, path)):
        h, hx, hp = (np.asarray(a, dtype=float) for a in model.observe(time, z[:n], c))
        s = z[n:].reshape(m, n) / scale[:, None]  # (m, n)
        ys[k] = h.reshape(-1)
        dys[k] = hx.reshape(len(outputs), n) @ s.T + hp.reshape(len(outputs), m)
    for i, name in enumerate(outputs):
        found[name] = (ys[:, i], dys[:, i, :])
    return times, found


def constant_values(model: SymbolicModel, system: EquationSystem,
                    values: dict[str, float]) -> np.ndarray:
    """The constants' vector c the compiled functions take: `values`, else the model's own."""
    return np.array([float(values.get(k, system.constants[k])) for k in model.constants])


def integrate(fun: Callable, z0: np.ndarray, system: EquationSystem, times: np.ndarray,
              rtol: float, atol: float) -> np.ndarray:
    """The augmented states (T, size) on the output grid, with the model's method."""
    if system.method in FIXED_METHODS:
        return integrate_fixed(fun, z0, system)
    from scipy.integrate import solve_ivp

    solution = solve_ivp(fun, (float(times[0]), float(times[-1])), z0, method=system.method,
                         t_eval=times, rtol=rtol, atol=atol)
    if not solution.success or solution.y.shape[1] != len(times):
        raise RuntimeError(f"the sensitivity equations did not integrate: {solution.message}")
    return solution.y.T


def integrate_fixed(fun: Callable, z0: np.ndarray, system: EquationSystem) -> np.ndarray:
    """Euler or classical RK4 at the model's step, saved on the output grid (as the model is):
    the augmented states as one row of the models' own scheme."""
    grid = system.grid
    out = np.empty((grid.n_steps // grid.stride + 1, len(z0)))
    z = z0.copy()  # updated in place

    def rates(t: float, rows: list[np.ndarray]) -> tuple[list[np.ndarray], None]:
        return [fun(t, rows[0])], None

    for j, _ in fixed_steps(rates, [z], grid, system.method):
        out[j] = z
    return out
