"""Gradients of a fit's or an optimisation's objective for L-BFGS-B (`gradient: auto | adjoint |
forward | fd` of calibrate and optimize; docs/methods.md, "Adjoint gradients").

The objective's value at p still comes from its run through the executor and the store; its
gradient comes from the equation model in-process, by the adjoint or the forward sensitivities
of a weighted sum of the model's outputs on its grid, once per point L-BFGS-B asks for. The
analysis says how to weigh the outputs (a quantity's reduction, or the residuals' interpolation
at the observations), given the outputs on the grid and what the run at p gave.
"""

from __future__ import annotations

import threading
import time as clock
from typing import Any, Callable

import numpy as np

from studyrun.analyses.gradient import resolve
from studyrun.analyses.gradient.equations import adjoint_gradient, forward_gradient

# (times, outputs on the grid, the run's summary at p) -> output -> weights on the grid
Weights = Callable[[np.ndarray, dict[str, np.ndarray], dict[str, Any]], dict[str, np.ndarray]]


class ModelGradient:
    """(p, the run's summary at p) -> d objective / dp, by `method` (adjoint or forward); counts
    what it computed."""

    def __init__(self, method: str, symbolic: Any, context: Any, names: list[str],
                 weights: Weights) -> None:
        self.method, self.symbolic, self.names, self.weights = method, symbolic, names, weights
        self.system = context.model.to_system()
        self.values = {**context.defaults, **context.fixed}
        self.calls = self.integrations = 0
        self.seconds = 0.0
        self.counting = threading.Lock()  # the fits of a multistart call it from their threads

    def __call__(self, p: np.ndarray, answer: dict[str, Any]) -> np.ndarray:
        started = clock.perf_counter()
        compute = adjoint_gradient if self.method == "adjoint" else forward_gradient
        found = compute(self.symbolic, self.system,
                        {**self.values, **dict(zip(self.names, map(float, p)))},
                        lambda times, ys: self.weights(times, ys, answer),
                        self.system.rtol, self.system.atol)
        with self.counting:
            self.calls += 1
            self.integrations += found.cost["integrations"]
            self.seconds += clock.perf_counter() - started
        return found.gradient

    def summary(self) -> dict[str, Any]:
        return {"method": self.method, "gradients": self.calls,
                "integrations": self.integrations, "seconds": self.seconds}


def model_gradient(requested: str, context: Any, names: list[str], outputs: list[str] | None,
                   weights: Weights) -> tuple[ModelGradient | None, str, list[str]]:
    """The in-process gradient for `requested` (None for differences), the method used and the
    notes that say why it is not the one asked for. `outputs` None: the objective is not a
    weighted sum of model outputs (the caller says why). `auto` is differences, silently, for a
    model that is not an equation model: that is its default there."""
    from studyrun.models.base import HasEquations

    if outputs is None or (requested == "auto" and not isinstance(context.model, HasEquations)):
        return None, "fd", []
    method, notes, symbolic = resolve(requested, context.model, names, outputs)
    if method == "fd":
        return None, method, notes
    return ModelGradient(method, symbolic, context, names, weights), method, notes
