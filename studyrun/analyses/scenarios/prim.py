"""PRIM (Friedman and Fisher 1999) as scenario discovery uses it (Bryant and Lempert 2010): a box
peeled then pasted, every step kept with its coverage, density, mass and the quasi-p-value of each
restriction; further boxes by covering (the points of a chosen box removed). The peels, pastes,
objective (gain in mean over mass removed) and quasi-p-values follow EMA Workbench's `prim.Prim`.

Formulas and edge cases: docs/methods.md, "Scenario discovery".
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class Data:
    """The runs analysed: inputs by column (a categorical column holds its values as numbers),
    whether each run is of interest, and which columns are categorical (restricted as sets)."""

    names: list[str]
    x: np.ndarray  # (runs, parameters)
    y: np.ndarray  # bool, (runs,)
    categorical: frozenset[str]

    def initial(self) -> "Box":
        """The box holding every run: each column's extremes, or all its values."""
        low, high, sets = {}, {}, {}
        for j, name in enumerate(self.names):
            if name in self.categorical:
                sets[name] = frozenset(np.unique(self.x[:, j]).tolist())
            else:
                low[name], high[name] = float(self.x[:, j].min()), float(self.x[:, j].max())
        return Box(low, high, sets)


@dataclass(frozen=True)
class Box:
    """Limits on each parameter: [low, high] for a continuous one, a set of values for a
    categorical one."""

    low: dict[str, float]
    high: dict[str, float]
    sets: dict[str, frozenset[float]]

    def inside(self, data: Data, rows: np.ndarray, names: list[str] | None = None) -> np.ndarray:
        """Which of `rows` lie in the box (on `names` only, when given)."""
        keep = np.ones(len(rows), bool)
        for j, name in enumerate(data.names):
            if names is not None and name not in names:
                continue
            column = data.x[rows, j]
            if name in self.sets:
                keep &= np.isin(column, list(self.sets[name]))
            else:
                keep &= (column >= self.low[name]) & (column <= self.high[name])
        return keep

    def restricted(self, initial: "Box") -> list[str]:
        """The parameters whose limits differ from the initial box's, in the data's order."""
        names = [*initial.low, *initial.sets]
        return [name for name in names
                if (self.sets[name] != initial.sets[name] if name in self.sets else
                    (self.low[name], self.high[name]) != (initial.low[name], initial.high[name]))]

    def replaced(self, name: str, value: Any, side: int | None = None) -> "Box":
        """The box with one limit changed: side 0 the lower, 1 the upper, None the set."""
        if side is None:
            return Box(self.low, self.high, {**self.sets, name: frozenset(value)})
        if side == 0:
            return Box({**self.low, name: value}, self.high, self.sets)
        return Box(self.low, {**self.high, name: value}, self.sets)


@dataclass(frozen=True)
class Step:
    """A box of the trajectory and the runs (indices into the data) inside it."""

    box: Box
    rows: np.ndarray


def quantile(values: np.ndarray, q: float, ordered: bool = False) -> float:
    """The quantile PRIM peels at, as sdtoolkit and EMA Workbench compute it: the mean of the two
    sorted values around (n - 1) q, moved outwards past ties (`ordered`: values already sorted)."""
    data = values if ordered else np.sort(values)
    i = (len(data) - 1) * q
    lower, higher = math.floor(i), math.ceil(i)
    if q > 0.5:
        while data[lower] == data[higher] and lower > 0:
            lower -= 1
    else:
        while data[lower] == data[higher] and higher < len(data) - 1:
            higher += 1
    return float((data[lower] + data[higher]) / 2)


def objective(y_old: np.ndarray, y_new: np.ndarray) -> float:
    """EMA Workbench's default (lenient 1): the change in the share of runs of interest over
    the number of runs removed or added."""
    mean_old = float(y_old.mean())
    mean_new = float(y_new.mean()) if len(y_new) else 0.0
    if mean_old == mean_new or len(y_old) == len(y_new):
        return 0.0
    return (mean_new - mean_old) / abs(len(y_old) - len(y_new))


class Prim:
    """One PRIM search over `data`, box after box (covering)."""

    def __init__(self, data: Data, peel_alpha: float, paste_alpha: float, mass_min: float):
        self.data, self.n = data, len(data.y)
        self.peel_alpha, self.paste_alpha, self.mass_min = peel_alpha, paste_alpha, mass_min
        self.initial = data.initial()
        self.total = max(int(data.y.sum()), 1)

    def find(self, remaining: np.ndarray) -> list[Step]:
        """The trajectory of one box over the `remaining` runs: the whole box, each peel, then
        each paste."""
        steps = [Step(self.initial, remaining)]
        while (peeled := self.peel(steps[-1])) is not None:
            steps.append(peeled)
        while (pasted := self.paste(steps[-1], remaining)) is not None:
            steps.append(pasted)
        return steps

    def best(self, step: Step, candidates: Iterable[Step]) -> tuple[float, Step] | None:
        """The candidate of the largest objective (fewer restricted parameters on a tie; the
        first in the data's order, upper before lower, after that), as EMA Workbench sorts;
        candidates are made one at a time, so only the best one's runs are held."""
        y = self.data.y
        top: tuple[float, int, Step] | None = None
        for candidate in candidates:
            key = (objective(y[step.rows], y[candidate.rows]),
                   -len(candidate.box.restricted(self.initial)))
            if top is None or key > top[:2]:
                top = (*key, candidate)
        return None if top is None else (top[0], top[2])

    def peel(self, step: Step) -> Step | None:
        """The best peel of `peel_alpha` of the runs off one side (or one value off a set), if
        it keeps at least `mass_min` and raises the share of runs of interest."""
        found = self.best(step, self.peels(step))
        if found is None:
            return None
        score, new = found
        mass_new, mass_old = len(new.rows) / self.n, len(step.rows) / self.n
        return new if mass_new >= self.mass_min and mass_new < mass_old and score > 0 else None

    def peels(self, step: Step) -> Iterator[Step]:
        for j, name in enumerate(self.data.names):
            column = self.data.x[step.rows, j]
            if name in self.initial.sets:
                values = step.box.sets[name]
                for value in sorted(values) if len(values) > 1 else ():
                    yield Step(step.box.replaced(name, values - {value}), step.rows[column != value])
                continue
            ordered = np.sort(column)
            for side, q in ((1, 1 - self.peel_alpha), (0, self.peel_alpha)):
                limit = quantile(ordered, q, ordered=True)
                keep = column <= limit if side else column >= limit
                yield Step(step.box.replaced(name, limit, side), step.rows[keep])

    def paste(self, step: Step, remaining: np.ndarray) -> Step | None:
        """The best paste of `paste_alpha` of the runs beside one restricted side back in (or
        one value back into a set), if it raises the share of runs of interest."""
        found = self.best(step, self.pastes(step, remaining))
        if found is None:
            return None
        score, new = found
        y = self.data.y
        mass_new, mass_old = len(new.rows) / self.n, len(step.rows) / self.n
        better = len(new.rows) > 0 and y[new.rows].mean() > y[step.rows].mean()
        return new if (mass_new >= self.mass_min and mass_new > mass_old and score > 0
                       and better) else None

    def pastes(self, step: Step, remaining: np.ndarray) -> Iterator[Step]:
        restricted = step.box.restricted(self.initial)
        x = self.data.x
        for j, name in enumerate(self.data.names):
            if name not in restricted:
                continue
            if name in self.initial.sets:
                for value in sorted(self.initial.sets[name] - step.box.sets[name]):
                    box = step.box.replaced(name, step.box.sets[name] | {value})
                    yield Step(box, remaining[box.inside(self.data, remaining, restricted)])
                continue
            low, high = self.initial.low[name], self.initial.high[name]
            for side in (0, 1):
                outside = (step.box.replaced(name, low, 0).replaced(name, step.box.low[name], 1)
                           if side == 0 else
                           step.box.replaced(name, step.box.high[name], 0).replaced(name, high, 1))
                near = remaining[outside.inside(self.data, remaining, restricted)]
                if side == 0:
                    value = quantile(x[near, j], 1 - self.paste_alpha) if len(near) else low
                else:
                    value = quantile(x[near, j], self.paste_alpha) if len(near) else high
                box = step.box.replaced(name, value, side)
                yield Step(box, remaining[box.inside(self.data, remaining, restricted)])

    def describe(self, step: Step, remaining: np.ndarray) -> dict[str, Any]:
        """A step as analysis.json holds it: its statistics, its restricted limits and the
        quasi-p-value of each restricted side."""
        k, size = int(self.data.y[step.rows].sum()), len(step.rows)
        restricted = step.box.restricted(self.initial)
        return {"coverage": k / self.total, "density": k / size if size else None,
                "mass": size / self.n, "runs": size, "of_interest": k,
                "restricted": restricted,
                "limits": {name: self.limit(step, name, k, size, remaining, restricted)
                           for name in restricted}}

    def limit(self, step: Step, name: str, k: int, size: int, remaining: np.ndarray,
              restricted: list[str]) -> dict[str, Any]:
        """One restriction and its quasi-p-value (Bryant and Lempert 2010): the one-sided
        binomial test of the box's runs of interest against the share in the box with that
        limit removed."""
        def p_value(box: Box) -> float:
            from scipy.stats import binomtest

            inside = remaining[box.inside(self.data, remaining, restricted)]
            share = float(self.data.y[inside].mean())
            return float(binomtest(k, size, share, alternative="greater").pvalue)

        if name in self.initial.sets:
            return {"values": whole(step.box.sets[name]),
                    "p_value": p_value(step.box.replaced(name, self.initial.sets[name]))}
        low, high = step.box.low[name], step.box.high[name]
        entry: dict[str, Any] = {"lower": low, "upper": high}
        if low != self.initial.low[name]:
            entry["p_lower"] = p_value(step.box.replaced(name, self.initial.low[name], 0))
        if high != self.initial.high[name]:
            entry["p_upper"] = p_value(step.box.replaced(name, self.initial.high[name], 1))
        return entry


def whole(values) -> list[float | int]:
    """A set's values in order, whole numbers written as integers (as the study gives them)."""
    return [int(v) if float(v).is_integer() and abs(v) < 2**53 else float(v)
            for v in sorted(values)]


def chosen(trajectory: list[dict[str, Any]], threshold: float) -> int:
    """The step of the largest coverage among those whose density reaches the threshold (the
    earlier on a tie); without one, the step of the largest density."""
    reaching = [i for i, s in enumerate(trajectory) if (s["density"] or 0) >= threshold]
    if reaching:
        return max(reaching, key=lambda i: (trajectory[i]["coverage"], -i))
    return max(range(len(trajectory)), key=lambda i: ((trajectory[i]["density"] or 0), -i))


def covering(data: Data, threshold: float, peel_alpha: float, paste_alpha: float,
             mass_min: float, boxes: int, first: int | None) -> tuple[list[dict[str, Any]], list[str]]:
    """Up to `boxes` boxes, each found on the runs no earlier box holds, and why covering
    stopped; `first` picks the first box's step instead of the threshold."""
    prim = Prim(data, peel_alpha, paste_alpha, mass_min)
    remaining = np.arange(len(data.y))
    found: list[dict[str, Any]] = []
    notes: list[str] = []
    while len(found) < boxes:
        if found and not data.y[remaining].any():
            notes.append(f"covering stopped after {len(found)} boxes: no run of interest is left "
                         "outside them")
            break
        steps = prim.find(remaining)
        trajectory = [prim.describe(step, remaining) for step in steps]
        pick = chosen(trajectory, threshold) if first is None or found else min(first, len(steps) - 1)
        box = {"step": pick, **trajectory[pick], "trajectory": trajectory}
        if found and ((box["density"] or 0) < threshold or pick == 0):
            notes.append(f"covering stopped after {len(found)} boxes: the next box's density "
                         f"({box['density'] or 0:.3g}) does not reach the threshold {threshold:g}")
            break
        found.append(box)
        if pick == 0:
            break
        remaining = remaining[~steps[pick].box.inside(data, remaining)]
    return found, notes
