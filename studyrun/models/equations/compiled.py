"""The equation system compiled to closures, bound to one batch's constants, and its
right-hand side over an ensemble of runs."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from studyrun.blocks.expr import parse
from studyrun.core.errors import StudyError
from studyrun.models.equations.system import EquationSystem, topological_order


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


def rhs_function(compiled: CompiledSystem, base: Mapping[str, Any], t: Any, y: np.ndarray) -> np.ndarray:
    """Derivatives (S, m) of states ``y`` (S, m) at time ``t`` (scalar or (m,))."""
    env = dict(base)
    env.update(zip(compiled.state_names, y))
    env["time"] = t
    out = np.empty_like(y)
    for i, d in enumerate(compiled.evaluate(env)):
        out[i] = d
    return out
