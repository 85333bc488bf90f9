"""Quantities of interest: one number per run, reduced from a model's scalar and series outputs.

`final(x)`, `initial(x)`, `max(x)`, `min(x)`, `mean(x)` (the time average, by the trapezoid
rule), `mean_points(x)` (the plain average of the output points), `integral(x)` (each but
`final` with an optional window `(x, T0, T1)`, whose ends between output times are interpolated
linearly), `at(x, T)`, bare names of scalar outputs, and arithmetic between them, in the safe
expression language of `blocks/expr.py`; docs/methods.md, "Quantities of a run", gives each formula.
`series(x)` keeps a whole time series as a quantity, for time-resolved analyses. `time` is the
time axis, a series like any other (`final(time)`: when a run ends). Each run is reduced on its
own grid; runs sharing one (every equation model's) are reduced together.
"""

from __future__ import annotations

import ast
import re
from typing import Mapping

import numpy as np

from studyrun.blocks.expr import BUILTINS, Expr, ExprError, FunctionDef, parse
from studyrun.core.batch import ModelOutput, SeriesGroup

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

# What the reductions compute, as a version a run's identity names when it matters: in version 2
# mean() became the time average (it was the average of the output points) and a window's ends
# between output times became interpolated (they were dropped).
MEANING = 2


def window(x, time, bounds: tuple, points_only: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Series x (runs, T) on the window [T0, T1], cut to the series' time span: the grid's
    times inside it and, where an end falls between two of them, that end with its value
    interpolated linearly (as at() gives it); `points_only`, the grid's times alone."""
    x, time = _as_series(x, time)
    if not bounds:
        return x, time
    t0, t1 = (float(np.ravel(b)[0]) for b in bounds)
    if not t0 <= t1:
        raise ValueError(f"the window [{t0:g}, {t1:g}] ends before it starts: write (x, T0, T1) "
                         "with T0 <= T1")
    low, high = max(t0, time[0]), min(t1, time[-1])
    inside = np.flatnonzero((time >= low) & (time <= high))
    if low > high or (points_only and not len(inside)):
        raise ValueError(f"the window [{t0:g}, {t1:g}] holds no output time "
                         f"(outputs run from {time[0]:g} to {time[-1]:g})")
    # row by row in memory: numpy sums a strided row in another order than a lone run's row,
    # and a run's mean must not depend on the runs that share its batch
    values, times = [np.ascontiguousarray(x[:, inside])], [time[inside]]
    if points_only:
        return values[0], times[0]
    if not len(inside) or time[inside[0]] > low:
        values.insert(0, _interpolate(x, time, low)[:, None])
        times.insert(0, np.array([low]))
    if high > low and (not len(inside) or time[inside[-1]] < high):
        values.append(_interpolate(x, time, high)[:, None])
        times.append(np.array([high]))
    return np.concatenate(values, axis=1), np.concatenate(times)


def _interpolate(values: np.ndarray, time: np.ndarray, when: float) -> np.ndarray:
    """The series (runs, T) at `when` within the grid's span, linearly between grid times."""
    if len(time) == 1:
        return values[:, 0]
    right = int(np.clip(np.searchsorted(time, when), 1, len(time) - 1))
    left = right - 1
    share = (when - time[left]) / (time[right] - time[left])
    return values[:, left] * (1 - share) + values[:, right] * share


def _as_series(x, time) -> tuple[np.ndarray, np.ndarray]:
    """x as a series (runs, T) and the runs' grid (T,); `time` is the clock as the env holds
    it, a series like any other (runs, T) whose rows are the one grid of these runs."""
    array = np.ascontiguousarray(x, dtype=float)  # a run's row in one piece, as above
    clock = None if time is None else np.asarray(time)
    if clock is None or clock.ndim != 2 or array.ndim != 2 or array.shape[1] != clock.shape[1]:
        raise ValueError("expects a time series output of the model (a name whose value changes "
                         "over time)")
    return array, clock[0] if len(clock) else np.zeros(clock.shape[1])


def _reduction(name: str, reduce, points_only: bool = False) -> FunctionDef:
    def impl(x, *bounds, time=None):
        if len(bounds) == 1:
            raise ValueError(f"{name}() takes (x) or a window (x, T0, T1)")
        values, grid = window(x, time, bounds, points_only)
        return reduce(values, grid)

    return FunctionDef(name, 1, 3, impl, takes_time=True)


def _at(x, when, time=None):
    values, time = _as_series(x, time)
    when = float(np.ravel(when)[0])
    if not time[0] <= when <= time[-1]:
        raise ValueError(f"at(x, {when:g}) lies outside the outputs' time span "
                         f"[{time[0]:g}, {time[-1]:g}]")
    return _interpolate(values, time, when)


def _time_average(values: np.ndarray, time: np.ndarray) -> np.ndarray:
    """The trapezoid rule's integral over the span, divided by its length (a span of one
    instant: the value then)."""
    span = time[-1] - time[0]
    return np.trapezoid(values, time, axis=1) / span if span > 0 else values[:, 0]


def _final(x, time=None):
    return _as_series(x, time)[0][:, -1]


def _series(x, time=None):
    return _as_series(x, time)[0]


REDUCTIONS: dict[str, FunctionDef] = {
    "final": FunctionDef("final", 1, 1, _final, takes_time=True),
    "initial": _reduction("initial", lambda v, t: v[:, 0]),
    "max": _reduction("max", lambda v, t: v.max(axis=1)),
    "min": _reduction("min", lambda v, t: v.min(axis=1)),
    "mean": _reduction("mean", lambda v, t: _time_average(v, t)),
    "mean_points": _reduction("mean_points", lambda v, t: v.mean(axis=1), points_only=True),
    "integral": _reduction("integral", lambda v, t: np.trapezoid(v, t, axis=1)),
    "at": FunctionDef("at", 2, 2, _at, takes_time=True),
    "series": FunctionDef("series", 1, 1, _series, takes_time=True),
}
FUNCTIONS: dict[str, FunctionDef] = {**BUILTINS, **REDUCTIONS}


def parse_quantity(text: str) -> Expr:
    """Parse one quantity definition (raises ExprError with the offending part)."""
    return parse(text, functions=FUNCTIONS)


def meaning(definitions: Mapping[str, str] | None) -> int | None:
    """MEANING when a quantity calls mean() or reduces over a window, whose numbers changed with
    it (runs made before must not be reused), else None: other studies keep their runs."""
    for text in (definitions or {}).values():
        for node in ast.walk(parse_quantity(str(text)).tree):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                    and (node.func.id == "mean" or (node.func.id in REDUCTIONS
                                                    and len(node.args) == 3))):
                return MEANING
    return None


def is_series(expr: Expr) -> bool:
    """A quantity that keeps a whole time series: `series(x)` at its top."""
    body = expr.tree.body
    return isinstance(body, ast.Call) and isinstance(body.func, ast.Name) and body.func.id == "series"


def series_output(expr: Expr) -> str:
    """The output a `series(x)` quantity keeps: x, by name (a plain name: see shape_problem)."""
    return expr.tree.body.args[0].id


def shape_problem(expr: Expr, scalars_only: bool = False) -> str | None:
    """What a quantity's text gets wrong about series, found before any run: `series()` of
    something other than one output, or the time axis used outside a reduction (unless the
    runs have no series, as runs given in a CSV: there `time` is a column like any other)."""
    body = expr.tree.body
    if is_series(expr) and not isinstance(body.args[0], ast.Name):
        return "series() keeps one output whole: write series(NAME) with an output's name"
    if _bare_time(body) and not scalars_only:
        return ("'time' is the time axis, a series like any other output: reduce it, e.g. "
                "final(time) for the time a run ends, or max(time), or keep it with series(time)")
    return None


def _bare_time(node: ast.AST) -> bool:
    """Whether `time` appears outside every call of a reduction."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in REDUCTIONS:
        return False
    if isinstance(node, ast.Name):
        return node.id == "time"
    return any(_bare_time(child) for child in ast.iter_child_nodes(node))


class Quantities:
    """The study's quantities, compiled once and evaluated on each batch's model output."""

    def __init__(self, definitions: Mapping[str, str] | None) -> None:
        self.definitions = dict(definitions) if definitions is not None else None
        self.compiled = {name: parse_quantity(str(text))
                         for name, text in (self.definitions or {}).items()}
        self.series_names = [name for name, expr in self.compiled.items() if is_series(expr)]

    def names(self, out: ModelOutput | None = None) -> list[str]:
        """Scalar quantity names (all scalar outputs when the study defines none)."""
        if self.definitions is None:
            return sorted(out.scalars) if out is not None else []
        return [name for name in self.compiled if name not in self.series_names]

    def evaluate(self, out: ModelOutput, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Each scalar quantity for every run of the batch, each run on its own grid (runs
        sharing a grid at once); marks runs failed on NaN, inf or errors. series() quantities
        are evaluated for their failures only: their values are the stored series."""
        if self.definitions is None:
            values = self._every_output(out, inputs)
        else:
            values = {name: np.full(out.n, np.nan) for name in self.names()}
            for group in out.series_groups():
                self._evaluate_group(group, out, inputs, values)
        for name, array in values.items():
            for i in np.flatnonzero(~np.isfinite(array)):
                out.fail(int(i), f"quantity {name!r} is {array[i]}")
        return values

    def _evaluate_group(self, group: SeriesGroup, out: ModelOutput,
                        inputs: Mapping[str, np.ndarray], values: dict[str, np.ndarray]) -> None:
        """The quantities of the runs of one grid, into their rows of `values`."""
        rows = np.arange(out.n)[group.rows]
        env = {k: np.broadcast_to(v, (out.n,))[group.rows] for k, v in {**inputs, **out.scalars}.items()}
        env.update(group.series)
        if group.time is not None:  # the time axis is a series like any other
            env["time"] = np.broadcast_to(group.time, (len(rows), len(group.time)))
        for name, expr in self.compiled.items():
            value = self._evaluate_one(name, expr, env, out, rows)
            if name in values:
                values[name][group.rows] = value

    @staticmethod
    def _every_output(out: ModelOutput, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Without a quantities block: each scalar output, but one that echoes an input (it is
        that input); an output whose name cannot name a quantity fails the runs, since it would
        name a file (`a/b`, `../x`)."""
        values = {}
        for name in sorted(out.scalars):
            if name in inputs:
                continue
            if not _NAME.match(name):
                for i in range(out.n):
                    out.fail(i, f"the model's output {name!r} cannot name a quantity (letters, "
                                "digits and _); list the quantities to keep in a quantities block")
                continue
            values[name] = np.asarray(out.scalars[name], dtype=float)
        return values

    def _evaluate_one(self, name: str, expr: Expr, env: dict, out: ModelOutput,
                      rows: np.ndarray) -> np.ndarray:
        missing = sorted(n for n in expr.names if n not in env)
        try:
            if missing:
                raise ValueError(missing_message(expr, missing, out))
            with np.errstate(all="ignore"):
                value = np.asarray(expr(env), dtype=float)
            if name in self.series_names:
                return value
            if value.ndim > 1:
                raise ValueError("is a time series; reduce it with final(), max(), mean(), ... "
                                 "or keep it whole with series()")
            return np.broadcast_to(value, (len(rows),)).astype(float)
        except (ValueError, ExprError, ArithmeticError) as error:
            message = f"quantity {name!r}: {getattr(error, 'message', None) or error}"
            for i in rows.tolist():
                out.fail(i, message)
            return np.full(len(rows), np.nan)


def missing_message(expr: Expr, missing: list[str], out: ModelOutput) -> str:
    """What a quantity names that the run does not have: a name that is no output nor input,
    or (only `time` missing) a reduction of a series when the model gave only scalars."""
    series = {name for group in out.series_groups() for name in group.series}
    outputs = ", ".join(sorted(set(out.scalars) | series)) or "none"
    unknown = [name for name in missing if name != "time"]
    if unknown:
        return (f"{unknown[0]!r} is neither an output of the model (outputs: {outputs}) nor a "
                f"parameter; check the name in {expr.text!r}")
    reducers = sorted(expr.calls & {n for n, f in REDUCTIONS.items() if f.takes_time})
    what = f"{reducers[0]}() reads a time series" if reducers else "'time' is the time of a series"
    return (f"{what}, and the model gave none (its outputs are scalars: {outputs}); name a scalar "
            "output bare, without final() or another reduction")
