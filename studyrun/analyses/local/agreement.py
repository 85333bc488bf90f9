"""Agreement of two rankings of the parameters (the dissertation, ch. 2; docs/methods.md,
"Agreement of two rankings").

Interval coincidence M: the percentage of the top-k parameters of one ranking that are also among
the top k of the other. Order preservation Tr: the percentage of parameter pairs that stand in the
same order in both rankings. Both are 100 for identical rankings.
"""

from __future__ import annotations

import math
from itertools import combinations
from typing import Any, Mapping


def rank(coefficients: Mapping[str, float | None]) -> list[str]:
    """Parameters by coefficient, largest first; missing or NaN values last; ties keep order."""
    def key(item: tuple[int, str]) -> tuple[int, float, int]:
        position, name = item
        value = coefficients[name]
        missing = value is None or not math.isfinite(value)
        return (1 if missing else 0, 0.0 if missing else -float(value), position)

    return [name for _, name in sorted(enumerate(coefficients), key=key)]


def interval_coincidence(first: list[str], second: list[str], top: int) -> float:
    """M: the percentage of the top `top` of `first` that are in the top `top` of `second`."""
    top = max(1, min(top, len(first)))
    return 100.0 * len(set(first[:top]) & set(second[:top])) / top


def order_preservation(first: list[str], second: list[str]) -> float:
    """Tr: the percentage of pairs of parameters in the same order in both rankings."""
    where = {name: i for i, name in enumerate(second)}
    pairs = list(combinations(first, 2))  # a before b in `first`
    if not pairs:
        return 100.0
    same = sum(where[a] < where[b] for a, b in pairs)
    return 100.0 * same / len(pairs)


def default_top(count: int) -> int:
    """The interval for M when the study gives none: the better half of the parameters."""
    return max(1, count // 2)


def compare_rankings(first: list[str], second: list[str], top: int | None = None) -> dict[str, Any]:
    """M at `top`, M at every interval 1..m, and Tr, for two rankings of the same parameters."""
    if sorted(first) != sorted(second):
        raise ValueError(f"the rankings hold different parameters: {first} and {second}")
    top = default_top(len(first)) if top is None else min(top, len(first))
    return {"M": interval_coincidence(first, second, top), "top": top,
            "Tr": order_preservation(first, second),
            "M_by_top": {str(k): interval_coincidence(first, second, k)
                         for k in range(1, len(first) + 1)},
            "rankings": [first, second]}
