"""The objective J of a gradient: one reduction of one model output, in the quantities' language
(`final(x)`, `initial(x)`, `at(x, T)`, `integral(x)`, `mean(x)`, `mean_points(x)`, `max(x)`,
`min(x)`; all but `final` and `at` with an optional window `(x, T0, T1)`).

As a quantity computes it from a run, each is a weighted sum of the output on its grid,
J = sum_k w_k y(t_k): the trapezoid rule for `integral` and `mean` (with a window's ends
interpolated linearly between grid times), linear interpolation for `at`, the window's point of
the extreme for `max` and `min`. `weights` gives w by evaluating the very same reduction on the
rows of the identity (the extremes: the window's points so evaluated, and the one that is the
extreme of this run), so the adjoint and the forward sensitivities differentiate exactly the
number a run reports. The identity is evaluated a block of rows at a time, once a grid.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
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
        times = np.asarray(times, dtype=float)
        if self.kind not in EXTREMES:
            return self._linear(times.tobytes()).copy()
        bounds = tuple(float(parse_quantity(a)({})) for a in self.arguments[1:])
        values, _ = window(np.asarray(y, dtype=float)[None], times[None], bounds)
        rows, columns, shares = self._points(times.tobytes(), bounds)
        picked = columns == EXTREMES[self.kind](values[0])  # the point the run's quantity takes
        w = np.zeros(len(times))
        w[rows[picked]] = shares[picked]
        return w

    @lru_cache(maxsize=8)  # noqa: B019 - a study's objectives and grids are few
    def _linear(self, grid: bytes) -> np.ndarray:
        """The weights of a reduction that is linear in the output (all but the extremes), on
        the grid whose times' bytes are `grid`: the same for every run on it."""
        times = np.frombuffer(grid)
        return np.concatenate([reduce(self.text, self.output, rows, times)
                               for _, rows in on_identity(len(times))])

    @lru_cache(maxsize=8)  # noqa: B019
    def _points(self, grid: bytes, bounds: tuple) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The window's points as weights on the grid (row, point, weight), their nonzeros: a
        point of the grid is one 1, an end between two grid times two shares."""
        times = np.frombuffer(grid)
        found = []
        for start, rows in on_identity(len(times)):
            part, _ = window(rows, np.broadcast_to(times, rows.shape), bounds)
            row, column = np.nonzero(part)
            found.append((row + start, column, part[row, column]))
        return tuple(np.concatenate(a) for a in zip(*found))  # type: ignore[return-value]


IDENTITY_ROWS = 256  # rows of the identity evaluated at once: a block, not the T x T matrix


def on_identity(size: int) -> Iterator[tuple[int, np.ndarray]]:
    """The rows of the identity of `size`, IDENTITY_ROWS at a time, each block with the index of
    its first row: a row-wise function of each gives the numbers of the whole identity in a
    block's memory (a grid of 7,501 times made a 450 MB identity, most of a gradient's cost)."""
    for start in range(0, size, IDENTITY_ROWS):
        rows = np.zeros((min(IDENTITY_ROWS, size - start), size))
        rows[np.arange(len(rows)), start + np.arange(len(rows))] = 1.0
        yield start, rows


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
