"""Reading a design's runs directly (analyse step): main effects, two-factor tables, Pareto front.

Main effects and interaction tables are the averages of the observed responses at the low
(x < 0) and high (x > 0) sides of each coded factor, as in a main-effects plot (Montgomery,
ch. 6); the Pareto front is the set of runs no other run beats in every quantity at once.
"""

from __future__ import annotations

from itertools import combinations
from typing import Any

import numpy as np

_MAX_LISTED_LEVELS = 7
_MAX_INTERACTION_FACTORS = 10


def _mean(values: np.ndarray) -> float | None:
    return float(values.mean()) if len(values) else None


def compute_main_effects(coded: np.ndarray, y: np.ndarray, names: list[str],
                         natural: np.ndarray) -> dict[str, Any]:
    """Per factor: mean response at its low and high side, their difference, and per level means."""
    out = {}
    for j, name in enumerate(names):
        x = coded[:, j]
        low, high = _mean(y[x < -1e-9]), _mean(y[x > 1e-9])
        entry: dict[str, Any] = {"low": low, "high": high,
                                 "effect": high - low if low is not None and high is not None else None}
        levels = np.unique(np.round(x, 9))
        if len(levels) <= _MAX_LISTED_LEVELS:
            entry["levels"] = [{"coded": float(v), "natural": float(natural[np.argmin(abs(x - v)), j]),
                                "mean": float(y[np.abs(x - v) < 1e-9].mean()),
                                "n": int(np.sum(np.abs(x - v) < 1e-9))} for v in levels]
        out[name] = entry
    return out


def compute_interactions(coded: np.ndarray, y: np.ndarray, names: list[str],
                         ranking: list[str]) -> dict[str, Any]:
    """Two-factor tables: mean response in each (low/high, low/high) cell, for every factor pair.

    With many factors only pairs among the most influential ones (by `ranking`) are tabulated.
    """
    chosen = [n for n in ranking if n in names][:_MAX_INTERACTION_FACTORS]
    chosen.sort(key=names.index)
    out = {}
    for a, b in combinations(chosen, 2):
        xa, xb = coded[:, names.index(a)], coded[:, names.index(b)]
        sides = [(xa < -1e-9, xa > 1e-9), (xb < -1e-9, xb > 1e-9)]
        means = [[_mean(y[ra & rb]) for rb in sides[1]] for ra in sides[0]]
        counts = [[int(np.sum(ra & rb)) for rb in sides[1]] for ra in sides[0]]
        cell = means
        effect = None
        if all(v is not None for row in cell for v in row):
            effect = ((cell[1][1] - cell[1][0]) - (cell[0][1] - cell[0][0])) / 2.0
        out[f"{a}*{b}"] = {"factors": [a, b], "rows": a, "columns": b, "levels": ["low", "high"],
                           "means": means, "counts": counts, "interaction": effect}
    return out


def find_pareto_front(values: dict[str, np.ndarray], senses: dict[str, str]) -> list[int]:
    """Indices of the non-dominated runs (NaN runs excluded) under each quantity's min/max sense."""
    names = list(senses)
    matrix = np.column_stack([np.asarray(values[q], dtype=float) * (1 if senses[q] == "min" else -1)
                              for q in names])
    candidates = np.flatnonzero(np.all(np.isfinite(matrix), axis=1))
    front = []
    for i in candidates:
        others = matrix[candidates]
        dominated = np.any(np.all(others <= matrix[i], axis=1) & np.any(others < matrix[i], axis=1))
        if not dominated:
            front.append(int(i))
    return front


def build_pareto(values: dict[str, np.ndarray], senses: dict[str, str], names: list[str],
                 natural: np.ndarray) -> dict[str, Any]:
    """The `_pareto` block: senses, front run indices (plan order), their quantities and parameters."""
    front = find_pareto_front(values, senses)
    return {"senses": dict(senses), "runs": front,
            "values": {q: [float(values[q][i]) for i in front] for q in senses},
            "parameters": {n: [float(natural[i, j]) for i in front] for j, n in enumerate(names)}}


def rank_factors(result: dict[str, Any], names: list[str]) -> list[str]:
    """Factors by influence: the sum of |coefficient| over every fitted term they appear in."""
    weight = dict.fromkeys(names, 0.0)
    for term, entry in result["coefficients"].items():
        if term == "1":
            continue
        for factor in term.split("*"):
            weight[names[int(factor.split("^")[0][1:]) - 1]] += abs(entry["estimate"])
    return sorted(names, key=lambda n: -weight[n])
