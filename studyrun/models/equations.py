"""The shared core of the `ode` and `stockflow` models (the model step of the pipeline).

Both model types reduce to one :class:`EquationSystem`: states with initial values, one
derivative per state, algebraic variables (flows and auxiliaries, evaluated in topological
order), lookups and constants. The system is checked (unknown names, circular definitions,
states without an initial value), compiled with :mod:`studyrun.expr` and integrated over a whole
batch of runs at once, each state an array of shape (n,).

Integration methods:

- ``euler`` and ``rk4``: fixed step over the whole ensemble (numpy arrays runs x states).
- ``RK45``: a vectorized Dormand-Prince 5(4) pair with scipy's RK45 semantics (same tableau,
  initial step, step-size control and quartic dense output), but with *per-member* step size and
  error norm, so a run's result does not depend on which other runs share its batch.
- ``RK23``, ``DOP853``, ``LSODA``, ``Radau``, ``BDF``: :func:`scipy.integrate.solve_ivp` once per
  member (slower, but exactly independent of the batch).

A member whose integration fails (overflow, NaN, solver failure) gets a message in
``ModelOutput.errors``; the batch goes on.
"""

from __future__ import annotations

import difflib
import keyword
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from ..errors import Problem, StudyError
from ..expr import BUILTINS, ExprError, FunctionDef, parse
from .base import ModelOutput, ModelSpec, RunContext

FIXED_METHODS = ("euler", "rk4")
PER_MEMBER_METHODS = ("RK23", "DOP853", "LSODA", "Radau", "BDF")
METHODS = (*FIXED_METHODS, "RK45", *PER_MEMBER_METHODS)
Method = Literal["euler", "rk4", "RK45", "RK23", "DOP853", "LSODA", "Radau", "BDF"]
Expression = float | str  # a number or the text of an expression
RESERVED = frozenset({"time"})
MAX_STEPS = 200_000  # accepted + rejected attempts per member for RK45
MAX_EVALUATIONS = 100_000  # rate evaluations per member for solve_ivp methods


def normalize_method(value: Any) -> Any:
    """Accept method names in any case (``rk45``, ``lsoda``) and return the canonical spelling."""
    if isinstance(value, str):
        return {m.lower(): m for m in METHODS}.get(value.strip().lower(), value)
    return value


# ---------------------------------------------------------------- lookups


class LookupSpec(BaseModel):
    """A piecewise-linear table; clamped at its ends unless ``extrapolate: true``."""

    model_config = ConfigDict(extra="forbid")

    x: list[float]
    y: list[float]
    extrapolate: bool = False

    @model_validator(mode="after")
    def _check_table(self) -> LookupSpec:
        if len(self.x) != len(self.y):
            raise ValueError(f"x and y must have the same length; got {len(self.x)} and "
                             f"{len(self.y)}")
        if len(self.x) < 2:
            raise ValueError("a lookup needs at least 2 points")
        if any(b <= a for a, b in zip(self.x, self.x[1:])):
            raise ValueError("x must be strictly increasing")
        if not all(math.isfinite(v) for v in [*self.x, *self.y]):
            raise ValueError("x and y must be finite numbers")
        return self


class Lookup:
    """The callable behind a lookup: ``np.interp``, linear beyond the ends when extrapolating."""

    def __init__(self, x: list[float], y: list[float], extrapolate: bool = False):
        self.x = np.asarray(x, dtype=np.float64)
        self.y = np.asarray(y, dtype=np.float64)
        self.extrapolate = extrapolate
        self.slopes = ((self.y[1] - self.y[0]) / (self.x[1] - self.x[0]),
                       (self.y[-1] - self.y[-2]) / (self.x[-1] - self.x[-2]))
        # a two-point table with a finite slope: _line on large arrays, rather than np.interp;
        # exact_end: np.interp's formula gives y[-1] itself at x[-1] (not always: rounding)
        self.straight = len(self.x) == 2 and math.isfinite(self.slopes[0])
        self.exact_end = self.slopes[0] * (self.x[1] - self.x[0]) + self.y[0] == self.y[1]

    def __call__(self, value: Any) -> Any:
        if self.straight and np.size(value) >= 1000:  # below, np.interp's fewer calls win
            out = self._line(value)
        else:
            out = np.interp(value, self.x, self.y)
        if self.extrapolate:
            below = np.minimum(np.subtract(value, self.x[0]), 0.0)
            above = np.maximum(np.subtract(value, self.x[-1]), 0.0)
            out = out + below * self.slopes[0] + above * self.slopes[1]
        return out

    def _line(self, value: np.ndarray) -> np.ndarray:
        """``np.interp`` of a two-point table, bit for bit (its formula inside, ``y[-1]`` itself
        from ``x[-1]`` on, NaN for NaN), in a few arithmetic passes instead of a search per
        value (a third of the time on 10,000 values)."""
        (x0, x1), (y0, y1) = self.x.tolist(), self.y.tolist()
        out = np.clip(value, x0, x1)
        if x0:
            np.subtract(out, x0, out=out)
        np.multiply(out, self.slopes[0], out=out)
        np.add(out, y0, out=out)
        if not self.exact_end:  # the formula misses y[-1] at x[-1] by a rounding
            np.copyto(out, y1, where=np.greater_equal(value, x1))
        return out

    def __reduce__(self):
        return (Lookup, (self.x.tolist(), self.y.tolist(), self.extrapolate))


# ---------------------------------------------------------------- the time grid


@dataclass(frozen=True)
class TimeGrid:
    """Integration from ``start`` to ``stop`` with fixed step ``dt``, output every ``save_every``."""

    start: float
    stop: float
    dt: float
    save_every: float

    def problems(self, prefix: str = "time") -> list[Problem]:
        out = []
        if not all(math.isfinite(v) for v in (self.start, self.stop, self.dt, self.save_every)):
            out.append(Problem(f"start, stop and steps must be finite numbers; got start="
                               f"{self.start}, stop={self.stop}, step={self.dt}", prefix))
            return out
        if not self.stop > self.start:
            out.append(Problem(f"stop must be after start; got start={self.start}, "
                               f"stop={self.stop}", f"{prefix}.stop"))
            return out
        if not self.dt > 0 or not self.save_every > 0:
            out.append(Problem("steps must be positive", f"{prefix}.step"))
            return out
        if not _is_multiple(self.stop - self.start, self.save_every):
            out.append(Problem(f"stop - start ({self.stop - self.start:g}) must be a multiple of "
                               f"the output interval ({self.save_every:g})", f"{prefix}.stop"))
        if not _is_multiple(self.save_every, self.dt):
            out.append(Problem(f"the output interval ({self.save_every:g}) must be a multiple of "
                               f"the step ({self.dt:g})", prefix))
        return out

    @property
    def n_steps(self) -> int:
        return int(round((self.stop - self.start) / self.dt))

    @property
    def stride(self) -> int:
        return int(round(self.save_every / self.dt))

    @property
    def times(self) -> np.ndarray:
        count = int(round((self.stop - self.start) / self.save_every)) + 1
        grid = self.start + np.arange(count) * self.save_every
        grid[-1] = self.stop
        return grid

    def with_step(self, dt: float) -> TimeGrid:
        return TimeGrid(self.start, self.stop, dt, self.save_every)


def _is_multiple(total: float, step: float) -> bool:
    ratio = total / step
    if not math.isfinite(ratio):  # 1e300 / 1e-300
        return False
    return abs(ratio - round(ratio)) <= 1e-9 * max(1.0, abs(ratio))


# ---------------------------------------------------------------- the system (source level)


@dataclass
class EquationSystem:
    """Equations as text, with the key path of each for error messages; pickles as plain data."""

    initial: dict[str, Expression | None]  # state -> initial value
    derivatives: dict[str, Expression]  # state -> d state / dt
    variables: dict[str, Expression]  # flows and auxiliaries
    lookups: dict[str, tuple[list[float], list[float], bool]]
    constants: dict[str, float]
    grid: TimeGrid
    method: str = "RK45"
    rtol: float = 1e-6
    atol: float = 1e-9
    paths: dict[tuple[str, str], str] = field(default_factory=dict)  # (kind, name) -> key path

    def path(self, kind: str, name: str) -> str:
        return self.paths.get((kind, name), f"{kind}.{name}")

    def functions(self) -> dict[str, FunctionDef]:
        return {name: FunctionDef(name, 1, 1, Lookup(*table))
                for name, table in self.lookups.items()}

    def check(self) -> list[Problem]:
        """Every problem found beyond the schema, with key paths relative to the model block."""
        problems = self.grid.problems() + self._name_problems()
        functions = self.functions()
        dynamic = set(self.initial) | set(self.variables) | set(self.constants)
        parsed: dict[str, Any] = {}
        for kind, name, text, known in self._expressions(dynamic):
            where = self.path(kind, name)
            if text is None:
                problems.append(Problem(f"state {name!r} has no initial value", where))
                continue
            try:
                expr = parse(text, functions)
            except ExprError as exc:
                problems.append(Problem(f"{exc.message} in {str(text)!r}", where))
                continue
            problems += [Problem(m, where) for m in self._unknown(expr, known, kind)]
            if kind == "variable":
                parsed[name] = expr
        problems += self._cycle_problems(parsed)
        return problems

    def _expressions(self, dynamic: set[str]):
        for name, text in self.initial.items():
            yield "initial", name, text, set(self.constants)
        for name, text in self.derivatives.items():
            yield "derivative", name, text, dynamic
        for name, text in self.variables.items():
            yield "variable", name, text, dynamic

    def _unknown(self, expr: Any, known: set[str], kind: str) -> list[str]:
        """A message per name the expression reads but may not, with a hint where one helps."""
        messages = []
        for name in sorted(expr.names - known - RESERVED):
            if name in self.lookups:
                messages.append(f"lookup {name!r} is a function: call it as {name}(x)")
            elif kind == "initial" and (name in self.initial or name in self.variables):
                messages.append(f"an initial value may use only constants (and study "
                                f"parameters); {name!r} is not a constant")
            else:
                close = difflib.get_close_matches(name, sorted(known), n=1, cutoff=0.6)
                hint = f"; did you mean {close[0]!r}?" if close else ""
                messages.append(f"unknown name {name!r} in {expr.text!r}{hint}")
        return messages

    def _name_problems(self) -> list[Problem]:
        problems, seen = [], {}
        groups = [("initial", self.initial), ("variable", self.variables),
                  ("lookup", self.lookups), ("constant", self.constants)]
        for kind, names in groups:
            for name in names:
                where = self.path(kind, name)
                if (not name.isidentifier() or name.startswith("_") or name in RESERVED
                        or keyword.iskeyword(name)):
                    problems.append(Problem(f"{name!r} is not a valid name (letters, digits and "
                                            f"'_', not starting with '_' or a digit, not a Python "
                                            f"keyword; 'time' is the clock)", where))
                elif kind == "lookup" and name in BUILTINS:
                    problems.append(Problem(f"lookup {name!r} would hide the function {name}(); "
                                            f"choose another name", where))
                elif name in seen:
                    problems.append(Problem(f"{name!r} is defined twice (also at "
                                            f"{seen[name]})", where))
                else:
                    seen[name] = where
        return problems

    def _cycle_problems(self, parsed: Mapping[str, Any]) -> list[Problem]:
        _, cycles = topological_order({n: e.names for n, e in parsed.items()})
        return [Problem("circular definition: " + " -> ".join(cycle), self.path("variable",
                                                                                  cycle[0]))
                for cycle in cycles]


def topological_order(depends: Mapping[str, Any]) -> tuple[list[str], list[list[str]]]:
    """Names ordered so each comes after those it reads (declaration order otherwise), and the
    cycles found, each as a loop in order ``[a, b, a]``."""
    order: list[str] = []
    cycles: list[list[str]] = []
    state: dict[str, int] = {}  # 1 visiting, 2 done

    def visit(name: str, stack: list[str]) -> None:
        state[name] = 1
        stack.append(name)
        for dep in sorted(set(depends[name]) & depends.keys(), key=list(depends).index):
            if state.get(dep) == 1:
                cycles.append(stack[stack.index(dep):] + [dep])
            elif dep not in state:
                visit(dep, stack)
        stack.pop()
        state[name] = 2
        order.append(name)

    for name in depends:
        if name not in state:
            visit(name, [])
    return order, cycles


# ---------------------------------------------------------------- compiled right-hand side


class CompiledSystem:
    """The system compiled to closures; built where it runs (closures do not pickle)."""

    def __init__(self, system: EquationSystem):
        problems = system.check()
        if problems:
            raise StudyError(problems)
        functions = system.functions()
        self.state_names = list(system.initial)
        self.initial = [parse(system.initial[s], functions) for s in self.state_names]
        self.derivatives = [parse(system.derivatives[s], functions) for s in self.state_names]
        exprs = {n: parse(t, functions) for n, t in system.variables.items()}
        order, _ = topological_order({n: e.names for n, e in exprs.items()})
        self.variables = [(n, exprs[n]) for n in order]
        self.variable_names = order

    def evaluate(self, env: dict[str, Any]) -> list[Any]:
        """Fill ``env`` with every variable and return the derivatives, one per state."""
        for name, expr in self.variables:
            env[name] = expr(env)
        return [d(env) for d in self.derivatives]

    def initial_values(self, base: Mapping[str, Any], n: int, start: float) -> np.ndarray:
        env = {**base, "time": start}
        y0 = np.empty((len(self.state_names), n))
        for i, expr in enumerate(self.initial):
            y0[i] = expr(env)
        return y0

    def bind(self, base: Mapping[str, Any]) -> BoundSystem:
        return BoundSystem(self, base)


class BoundSystem:
    """A compiled system with one batch's constants built in, for integrating it step by step.

    What reads only constants is computed once: the variables that depend on no state and not
    on the clock, and the constant parts of every other expression (``a * b * x`` computes
    ``a * b`` once). Each step evaluates the rest from an env of the states, ``time`` and the
    variables; only the variables the derivatives need, the others (outputs only) at the saved
    times. The values are those of :meth:`CompiledSystem.evaluate`, operation for operation.
    """

    def __init__(self, compiled: CompiledSystem, base: Mapping[str, Any]):
        self.state_names = compiled.state_names
        self.variable_names = compiled.variable_names
        fixed = dict(base)
        dynamic = []
        for name, expr in compiled.variables:  # dependency order
            if expr.names <= fixed.keys():  # constants and constant variables only
                fixed[name] = expr.bind(fixed)({})
            else:
                dynamic.append((name, expr.bind(fixed)))
        self.constant_variables = {n: fixed[n] for n in compiled.variable_names if n in fixed}
        self.derivatives = [d.bind(fixed) for d in compiled.derivatives]
        needed = set().union(*(d.names for d in compiled.derivatives))
        for name, expr in reversed(compiled.variables):  # readers before what they read
            if name in needed:
                needed |= expr.names
        self.rate_variables = [(n, fn) for n, fn in dynamic if n in needed]
        self.output_variables = [(n, fn) for n, fn in dynamic if n not in needed]

    def env(self, t: float, y: Any) -> dict[str, Any]:
        """The states ``y`` (one array per state), ``time`` and the variables the rates read."""
        env: dict[str, Any] = dict(zip(self.state_names, y))
        env["time"] = t
        for name, fn in self.rate_variables:
            env[name] = fn(env)
        return env

    def rates(self, t: float, y: Any) -> tuple[list[Any], dict[str, Any]]:
        """The derivatives at time ``t`` of states ``y``, and the env they were computed in."""
        env = self.env(t, y)
        return [d(env) for d in self.derivatives], env

    def variables(self, env: dict[str, Any]) -> dict[str, Any]:
        """Every variable, by name, at the time and states of an env from :meth:`env`."""
        for name, fn in self.output_variables:
            env[name] = fn(env)
        return {name: env[name] if name in env else self.constant_variables[name]
                for name in self.variable_names}


# ---------------------------------------------------------------- the evaluator


class EquationEvaluator:
    """A picklable batch evaluator: inputs override constants per run; see the module doc."""

    def __init__(self, system: EquationSystem):
        self.system = system
        self._compiled: CompiledSystem | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {"system": self.system}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.system = state["system"]
        self._compiled = None

    @property
    def compiled(self) -> CompiledSystem:
        if self._compiled is None:
            self._compiled = CompiledSystem(self.system)
        return self._compiled

    def __call__(self, inputs: dict[str, np.ndarray], context: RunContext) -> ModelOutput:
        return self.integrate(inputs, n=len(context.run_ids))

    def integrate(self, inputs: Mapping[str, Any], n: int | None = None,
                  step: float | None = None, method: str | None = None,
                  rtol: float | None = None, atol: float | None = None) -> ModelOutput:
        """Integrate a batch; ``step`` overrides the fixed step (e.g. halved by `studyrun check`)
        and ``method``/``rtol``/``atol`` the model's own."""
        system, compiled = self.system, self.compiled
        base, n = batch_constants(system.constants, inputs, n)
        grid = system.grid if step is None else system.grid.with_step(step)
        if step is not None and grid.problems():
            raise ValueError(f"step {step:g} does not fit the output grid: "
                             f"{grid.problems()[0].message}")
        method = normalize_method(method or system.method)
        rtol = system.rtol if rtol is None else rtol
        atol = system.atol if atol is None else atol
        times = grid.times
        with np.errstate(all="ignore"):
            y0 = compiled.initial_values(base, n, grid.start)
            if method in FIXED_METHODS:
                states, variables = integrate_fixed(compiled, base, y0, grid, method)
                errors = nonfinite_errors(compiled.state_names, states, times, method)
            else:
                if method == "RK45":
                    states, errors = integrate_rk45(compiled, base, y0, times, rtol, atol)
                elif method in PER_MEMBER_METHODS:
                    states, errors = integrate_each(compiled, base, y0, times, method, rtol,
                                                    atol)
                else:
                    raise ValueError(f"unknown method {method!r}; allowed: {', '.join(METHODS)}")
                variables = evaluate_variables(compiled, base, states, times)
        names = compiled.state_names + list(variables)
        series = dict(zip(names, transposed_all([*states, *variables.values()])))
        return ModelOutput(n=n, series=series, time=times, errors=errors)


def batch_constants(constants: Mapping[str, float], inputs: Mapping[str, Any],
                    n: int | None) -> tuple[dict[str, Any], int]:
    """The constants env of a batch: floats, with per-run arrays where inputs override them."""
    base: dict[str, Any] = {k: float(v) for k, v in constants.items()}
    for name, value in inputs.items():
        if name not in constants:
            known = ", ".join(sorted(constants)) or "none"
            raise ValueError(f"unknown model input {name!r}; the model's constants: {known}")
        array = np.asarray(value, dtype=np.float64)
        if array.ndim == 0:
            base[name] = float(array)
            continue
        array = np.ascontiguousarray(array.reshape(-1))
        if n is None:
            n = array.size
        if array.size != n:
            raise ValueError(f"input {name!r} has {array.size} values for a batch of {n} runs")
        base[name] = array
    return base, 1 if n is None else n


def _subset(base: Mapping[str, Any], keep: np.ndarray) -> dict[str, Any]:
    return {k: (v[keep] if isinstance(v, np.ndarray) else v) for k, v in base.items()}


def _rhs(compiled: CompiledSystem, base: Mapping[str, Any], t: Any, y: np.ndarray) -> np.ndarray:
    """Derivatives (S, m) of states ``y`` (S, m) at time ``t`` (scalar or (m,))."""
    env = dict(base)
    env.update(zip(compiled.state_names, y))
    env["time"] = t
    out = np.empty_like(y)
    for i, d in enumerate(compiled.evaluate(env)):
        out[i] = d
    return out


# ---------------------------------------------------------------- fixed step


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


def evaluate_variables(compiled: CompiledSystem, base: Mapping[str, Any], states: np.ndarray,
                       times: np.ndarray) -> dict[str, np.ndarray]:
    """Flows and auxiliaries (T, n) each, from states (S, T, n) on the output grid."""
    bound = compiled.bind(base)
    n = states.shape[2]
    variables = {v: np.empty((len(times), n)) for v in compiled.variable_names}
    for j, t in enumerate(times):
        for name, value in bound.variables(bound.env(float(t), states[:, j])).items():
            variables[name][j] = value
    return variables


# ---------------------------------------------------------------- RK45, vectorized

# Dormand-Prince 5(4) with the dense output of scipy.integrate.RK45 (Shampine 1986).
_C = np.array([0, 1 / 5, 3 / 10, 4 / 5, 8 / 9, 1])
_A = [[], [1 / 5], [3 / 40, 9 / 40], [44 / 45, -56 / 15, 32 / 9],
      [19372 / 6561, -25360 / 2187, 64448 / 6561, -212 / 729],
      [9017 / 3168, -355 / 33, 46732 / 5247, 49 / 176, -5103 / 18656]]
_B = [35 / 384, 0, 500 / 1113, 125 / 192, -2187 / 6784, 11 / 84]
_E = [-71 / 57600, 0, 71 / 16695, -71 / 1920, 17253 / 339200, -22 / 525, 1 / 40]
_P = np.array([
    [1, -8048581381 / 2820520608, 8663915743 / 2820520608, -12715105075 / 11282082432],
    [0, 0, 0, 0],
    [0, 131558114200 / 32700410799, -68118460800 / 10900136933, 87487479700 / 32700410799],
    [0, -1754552775 / 470086768, 14199869525 / 1410260304, -10690763975 / 1880347072],
    [0, 127303824393 / 49829197408, -318862633887 / 49829197408,
     701980252875 / 199316789632],
    [0, -282668133 / 205662961, 2019193451 / 616988883, -1453857185 / 822651844],
    [0, 40617522 / 29380423, -110615467 / 29380423, 69997945 / 29380423]])
_SAFETY, _MIN_FACTOR, _MAX_FACTOR, _EXPONENT = 0.9, 0.2, 10.0, -1 / 5


def _combine(weights: list[float], stages: list[np.ndarray]) -> np.ndarray:
    total = None
    for w, k in zip(weights, stages):
        if w:
            total = w * k if total is None else total + w * k
    return total


def _rms(x: np.ndarray) -> np.ndarray:
    """Root mean square over states, per member; summed row by row so that a member's value
    does not depend on how many members share the array (numpy sums a single column pairwise)."""
    total = x[0] * x[0]
    for row in x[1:]:
        total += row * row
    return np.sqrt(total / len(x))


@dataclass
class _Ensemble:
    """The active members of an RK45 ensemble; every array's last axis runs over members."""

    idx: np.ndarray  # indices into the batch
    base: dict[str, Any]  # constants of the active members
    t: np.ndarray
    y: np.ndarray  # (S, m)
    f: np.ndarray  # (S, m)
    h: np.ndarray  # step size to try next
    rejected: np.ndarray  # the current step was rejected at least once
    next_out: np.ndarray  # index of the next output time
    attempts: np.ndarray

    def keep(self, mask: np.ndarray) -> None:
        for name in ("idx", "t", "h", "rejected", "next_out", "attempts"):
            setattr(self, name, getattr(self, name)[mask])
        self.y, self.f = self.y[:, mask], self.f[:, mask]
        self.base = _subset(self.base, mask)


def integrate_rk45(compiled: CompiledSystem, base: Mapping[str, Any], y0: np.ndarray,
                   times: np.ndarray, rtol: float, atol: float
                   ) -> tuple[np.ndarray, list[str | None]]:
    """Dormand-Prince 5(4) over an ensemble with a step size and error norm per member."""
    S, n = y0.shape
    T = len(times)
    out = np.full((S, T, n), np.nan)
    out[:, 0] = y0
    errors: list[str | None] = [None] * n
    t_bound = float(times[-1])
    f0 = _rhs(compiled, base, float(times[0]), y0)
    ens = _Ensemble(np.arange(n), dict(base), np.full(n, float(times[0])), y0.copy(), f0,
                    np.zeros(n), np.zeros(n, bool), np.ones(n, int), np.zeros(n, int))
    ens.h = _initial_step(compiled, ens, t_bound, rtol, atol)
    start_bad = ~(np.isfinite(y0).all(axis=0) & np.isfinite(f0).all(axis=0))
    for m in np.flatnonzero(start_bad):
        errors[m] = "RK45: the initial state or its rates are not finite"
    ens.keep(~start_bad)
    while ens.idx.size:
        failed = _rk45_attempt(compiled, ens, out, times, t_bound, rtol, atol, errors)
        done = ens.t >= t_bound
        if failed.any() or done.any():
            ens.keep(~(failed | done))
    return out, errors


def _initial_step(compiled: CompiledSystem, ens: _Ensemble, t_bound: float, rtol: float,
                  atol: float) -> np.ndarray:
    """scipy's select_initial_step (Hairer, Norsett & Wanner II.4), one value per member."""
    interval = t_bound - ens.t
    scale = atol + np.abs(ens.y) * rtol
    d0, d1 = _rms(ens.y / scale), _rms(ens.f / scale)
    h0 = np.where((d0 < 1e-5) | (d1 < 1e-5), 1e-6, 0.01 * d0 / np.where(d1 > 0, d1, 1.0))
    h0 = np.minimum(h0, interval)
    f1 = _rhs(compiled, ens.base, ens.t + h0, ens.y + h0 * ens.f)
    d2 = _rms((f1 - ens.f) / scale) / h0
    flat = (d1 <= 1e-15) & (d2 <= 1e-15)
    h1 = np.where(flat, np.maximum(1e-6, h0 * 1e-3),
                  (0.01 / np.maximum(np.maximum(d1, d2), 1e-300)) ** (1 / 5))
    h = np.minimum(np.minimum(100 * h0, h1), interval)
    return np.where(np.isfinite(h) & (h > 0), h, 1e-6)


def _rk45_attempt(compiled: CompiledSystem, ens: _Ensemble, out: np.ndarray, times: np.ndarray,
                  t_bound: float, rtol: float, atol: float, errors: list[str | None]
                  ) -> np.ndarray:
    """One step attempt for every active member; returns the mask of members that failed."""
    min_step = 10 * np.abs(np.nextafter(ens.t, np.inf) - ens.t)
    h_abs = np.where(~ens.rejected & (ens.h < min_step), min_step, ens.h)
    too_small, too_many = h_abs < min_step, ens.attempts >= MAX_STEPS
    for m, t in zip(ens.idx[too_small], ens.t[too_small]):
        errors[m] = (f"RK45: required step size is less than spacing between numbers at time "
                     f"{t:g} (the solution may blow up or stop being finite)")
    for m, t in zip(ens.idx[too_many & ~too_small], ens.t[too_many & ~too_small]):
        errors[m] = (f"RK45: more than {MAX_STEPS} step attempts before time {t:g}; the problem "
                     f"may be stiff (try LSODA, Radau or BDF)")
    failed = too_small | too_many
    t_new = np.minimum(ens.t + h_abs, t_bound)
    h = t_new - ens.t
    stages = [ens.f]
    for s in range(1, 6):
        dy = _combine(_A[s], stages) * h
        stages.append(_rhs(compiled, ens.base, ens.t + _C[s] * h, ens.y + dy))
    y_new = ens.y + h * _combine(_B, stages)
    f_new = _rhs(compiled, ens.base, t_new, y_new)
    stages.append(f_new)
    scale = atol + np.maximum(np.abs(ens.y), np.abs(y_new)) * rtol
    err = _rms(_combine(_E, stages) * h / scale)
    finite = np.isfinite(err)
    accept = finite & (err < 1) & ~failed
    grow = np.where(err == 0, _MAX_FACTOR,
                    np.minimum(_MAX_FACTOR, _SAFETY * np.where(err > 0, err, 1.0) ** _EXPONENT))
    grow = np.where(ens.rejected, np.minimum(1.0, grow), grow)
    shrink = np.where(finite, np.maximum(_MIN_FACTOR, _SAFETY * err ** _EXPONENT), _MIN_FACTOR)
    ens.h = np.abs(h) * np.where(accept, grow, shrink)
    ens.rejected = ~accept
    ens.attempts += 1
    if accept.any():
        a: Any = slice(None) if accept.all() else np.flatnonzero(accept)  # views when all pass
        _save_dense(ens, a, h[a], t_new[a], [k[:, a] for k in stages], out, times)
        ens.t[a], ens.y[:, a], ens.f[:, a] = t_new[a], y_new[:, a], f_new[:, a]
    return failed


def _save_dense(ens: _Ensemble, a: Any, h: np.ndarray, t_new: np.ndarray,
                stages: list[np.ndarray], out: np.ndarray, times: np.ndarray) -> None:
    """Store the quartic interpolant at every output time in (t, t_new] of accepted members."""
    T = len(times)
    q = [_combine(list(_P[:, k]), stages) for k in range(4)]
    t_old, y_old, members = ens.t[a], ens.y[:, a], ens.idx[a]
    nxt = ens.next_out[a].copy()
    while True:
        target = times[np.minimum(nxt, T - 1)]
        due = np.flatnonzero((nxt < T) & (target <= t_new))
        if not due.size:
            break
        x = (target - t_old) / h  # every accepted member: cheaper than gathering the due ones
        values = y_old + h * ((((q[3] * x + q[2]) * x + q[1]) * x + q[0]) * x)
        out[:, nxt[due], members[due]] = values[:, due]
        nxt[due] += 1
    ens.next_out[a] = nxt


def transposed_all(arrays: list[np.ndarray], block: int = 256) -> list[np.ndarray]:
    """Each 2-D array's ``a.T`` as a C-contiguous array, copied in blocks of columns (several
    times faster than ``np.ascontiguousarray(a.T)`` on large arrays, which thrashes the cache);
    all in one allocation, which costs fewer page faults than one per array."""
    rows, cols = arrays[0].shape
    out = np.empty((len(arrays), cols, rows))
    for a, o in zip(arrays, out):
        for start in range(0, cols, block):
            o[start:start + block] = a[:, start:start + block].T
    return list(out)


# ---------------------------------------------------------------- solve_ivp per member


def integrate_each(compiled: CompiledSystem, base: Mapping[str, Any], y0: np.ndarray,
                   times: np.ndarray, method: str, rtol: float, atol: float
                   ) -> tuple[np.ndarray, list[str | None]]:
    """scipy.integrate.solve_ivp once per member (its right-hand side vectorized over columns,
    which speeds up the finite-difference Jacobians of Radau and BDF)."""
    from scipy.integrate import solve_ivp

    S, n = y0.shape
    out = np.full((S, len(times), n), np.nan)
    errors: list[str | None] = [None] * n
    span = (float(times[0]), float(times[-1]))
    for m in range(n):
        member = {k: (float(v[m]) if isinstance(v, np.ndarray) else v) for k, v in base.items()}
        fun = _BudgetedRates(compiled, member)
        try:
            sol = solve_ivp(fun, span, y0[:, m], method=method, t_eval=times, rtol=rtol,
                            atol=atol, vectorized=True)
        except _OverBudget:
            errors[m] = (f"{method}: more than {MAX_EVALUATIONS} evaluations of the rates before "
                         f"time {fun.last_time:g} (the solution may blow up, or the problem be "
                         f"too stiff for this method)")
            continue
        except ExprError:
            raise
        except (ValueError, ArithmeticError, np.linalg.LinAlgError) as exc:
            errors[m] = f"{method}: {exc}"
            continue
        out[:, : sol.y.shape[1], m] = sol.y
        if sol.status < 0 or not sol.success:
            errors[m] = f"{method}: {sol.message}"
        elif not np.isfinite(sol.y).all():
            errors[m] = f"{method}: the solution is not finite"
    return out, errors


class _OverBudget(Exception):
    pass


class _BudgetedRates:
    """The rates of one member for solve_ivp, giving up after MAX_EVALUATIONS calls (LSODA can
    creep towards a singularity for ever)."""

    def __init__(self, compiled: CompiledSystem, member: dict[str, Any]):
        self.compiled, self.member, self.calls, self.last_time = compiled, member, 0, 0.0

    def __call__(self, t: float, y: np.ndarray) -> np.ndarray:
        self.calls += 1
        self.last_time = t
        if self.calls > MAX_EVALUATIONS:
            raise _OverBudget
        return _rhs(self.compiled, self.member, t, y)


# ---------------------------------------------------------------- the spec base


class TimeSpan(BaseModel):
    """The `time:` block both equation models share: start, stop and step."""

    model_config = ConfigDict(extra="forbid")

    start: float = 0.0
    stop: float
    step: float = Field(gt=0)


class EquationModel(ModelSpec):
    """What `ode` and `stockflow` share: auxiliaries, lookups, constants, method and tolerances."""

    auxiliaries: dict[str, Expression] = {}
    lookups: dict[str, LookupSpec] = {}
    constants: dict[str, float] = {}
    method: Method = "RK45"
    rtol: float = 1e-6
    atol: float = 1e-9

    @field_validator("method", mode="before")
    @classmethod
    def _normalize_method(cls, value: Any) -> Any:
        return normalize_method(value)

    def to_system(self) -> EquationSystem:
        raise NotImplementedError

    def spec_problems(self) -> list[Problem]:
        """Problems a subclass finds in its own keys (rates of unknown states, ...)."""
        return []

    def defaults(self) -> dict[str, float]:
        return dict(self.constants)

    def input_names(self) -> set[str] | None:
        return set(self.constants)

    def output_names(self) -> set[str] | None:
        system = self.to_system()
        return set(system.initial) | set(system.variables)

    def check(self, study_dir: Path) -> list[Problem]:
        return self.spec_problems() + self.to_system().check()

    def build(self, study_dir: Path) -> EquationEvaluator:
        problems = self.check(study_dir)
        if problems:
            raise StudyError(problems)
        return EquationEvaluator(self.to_system())

    def lookup_tables(self) -> dict[str, tuple[list[float], list[float], bool]]:
        return {k: (v.x, v.y, v.extrapolate) for k, v in self.lookups.items()}
