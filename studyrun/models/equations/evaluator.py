"""The picklable batch evaluator: per-run constants from the inputs, integration by the
chosen method, and the states and variables as the model's output series."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from studyrun.core.batch import Evaluator, ModelOutput, RunContext
from studyrun.models.equations.compiled import CompiledSystem
from studyrun.models.equations.fixed import integrate_fixed, nonfinite_errors
from studyrun.models.equations.methods import (
    FIXED_METHODS,
    METHODS,
    PER_MEMBER_METHODS,
    normalize_method,
)
from studyrun.models.equations.per_member import integrate_each
from studyrun.models.equations.rk45 import integrate_rk45
from studyrun.models.equations.system import EquationSystem


class EquationEvaluator(Evaluator):
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
