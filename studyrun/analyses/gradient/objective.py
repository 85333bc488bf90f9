"""The objective J of a gradient: one reduction of one model output, in the quantities' language
(`final(x)`, `initial(x)`, `at(x, T)`, `integral(x)`, `mean(x)`, `mean_points(x)`, `max(x)`,
`min(x)`; all but `final` and `at` with an optional window `(x, T0, T1)`).

As a quantity computes it from a run, each is a weighted sum of the output on its grid,
J = sum_k w_k y(t_k): the trapezoid rule for `integral` and `mean` (with a window's ends
interpolated linearly between grid times), linear interpolation for `at`, the window's point of
the extreme for `max` and `min`. `weights` gives w by evaluating the very same reduction on the
rows of the identity (the extremes: the window's points so evaluated, and the one that is the
extreme of this run), so the adjoint and the forward sensitivities differentiate exactly the
number a run reports.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from studyrun.blocks.expr import ExprError
from studyrun.blocks.quantities import parse_quantity, window

REDUCTIONS = ("final", "initial", "at", "integral", "mean", "mean_points", "max", "min")
EXTREMES = {"max": np.argmax, "min": np.argmin}


@dataclass(frozen=True)
class Objective:
    """`kind(output, ...)`, as parsed from the text."""

    text: str
    kind: str
    output: str
    arguments: tuple[str, ...]  # every argument as text, the output first

    def evaluate(self, series: np.ndarray, times: np.ndarray) -> np.ndarray:
        """J of each run (runs, T) on the grid `times`, as the quantity with this text is."""
        return reduce(self.text, self.output, series, times)

    def weights(self, y: np.ndarray, times: np.ndarray) -> np.ndarray:
        """w (T,) with J = w @ y for the run whose output is y (T,)."""
        identity = np.eye(len(times))
        if self.kind not in EXTREMES:
            return reduce(self.text, self.output, identity, times)
        bounds = tuple(float(parse_quantity(a)({})) for a in self.arguments[1:])
        clock = np.broadcast_to(np.asarray(times, dtype=float), identity.shape)
        points, _ = window(identity, clock, bounds)  # column k: the weights of the k-th point
        return points[:, EXTREMES[self.kind](np.asarray(y, dtype=float) @ points)]


def reduce(text: str, output: str, series: np.ndarray, times: np.ndarray) -> np.ndarray:
    """The reduction `text` of `output`, one value per row of `series`; ValueError when the
    window or time lies outside the grid."""
    series = np.atleast_2d(np.asarray(series, dtype=float))
    clock = np.broadcast_to(np.asarray(times, dtype=float), series.shape)
    with np.errstate(all="ignore"):
        return np.asarray(parse_quantity(text)({output: series, "time": clock}), dtype=float)


@lru_cache(maxsize=64)
def parse_objective(text: str) -> Objective:
    """The objective of `text`; ValueError saying what is wrong with it."""
    try:
        expr = parse_quantity(text)
    except ExprError as error:
        raise ValueError(error.message) from None
    body = expr.tree.body
    kinds = " | ".join(f"{k}(x)" for k in REDUCTIONS)
    if not (isinstance(body, ast.Call) and isinstance(body.func, ast.Name)
            and body.func.id in REDUCTIONS):
        raise ValueError(f"the objective is one reduction of one output: {kinds}")
    first = body.args[0]
    if not isinstance(first, ast.Name) or first.id == "time":
        raise ValueError(f"{body.func.id}() of one output of the model, by name, as in "
                         f"{body.func.id}(x)")
    if any(isinstance(node, ast.Name) for a in body.args[1:] for node in ast.walk(a)):
        raise ValueError("the window's times and at()'s time are numbers")
    return Objective(text, body.func.id, first.id, tuple(ast.unparse(a) for a in body.args))
