"""CART for scenario discovery: scikit-learn's decision tree fitted to "of interest or not", its
depth chosen by cross-validation (the smallest depth within one standard error of the best
accuracy, Breiman's one-SE rule), each leaf read back as a box with its density and coverage.

Formulas and edge cases: docs/methods.md, "Scenario discovery".
"""

from __future__ import annotations

import math
from typing import Any

from studyrun.analyses.scenarios.prim import Data, whole

FOLDS = 5


def depths(data: Data, max_depth: int, leaf: int) -> list[dict[str, Any]]:
    """Each depth's accuracy over stratified folds (shuffled by a fixed seed, so the same runs
    give the same folds)."""
    from sklearn.model_selection import StratifiedKFold, cross_val_score
    from sklearn.tree import DecisionTreeClassifier

    folds = StratifiedKFold(min(FOLDS, int(data.y.sum()), int((~data.y).sum())), shuffle=True,
                            random_state=0)
    found = []
    for depth in range(1, max_depth + 1):
        tree = DecisionTreeClassifier(max_depth=depth, min_samples_leaf=leaf, random_state=0)
        scores = cross_val_score(tree, data.x, data.y, cv=folds)
        found.append({"depth": depth, "accuracy": float(scores.mean()),
                      "se": float(scores.std(ddof=1) / math.sqrt(len(scores)))})
    return found


def one_se(table: list[dict[str, Any]]) -> int:
    """The smallest depth whose accuracy is within one standard error of the best."""
    best = max(table, key=lambda row: row["accuracy"])
    return min(row["depth"] for row in table if row["accuracy"] >= best["accuracy"] - best["se"])


def cart(data: Data, max_depth: int, mass_min: float) -> dict[str, Any]:
    """The tree of the chosen depth and its leaves, densest first."""
    from sklearn.tree import DecisionTreeClassifier

    leaf = max(1, int(mass_min * len(data.y)))
    if data.y.all() or not data.y.any() or min(data.y.sum(), (~data.y).sum()) < 2:
        return {"depth": 0, "cross_validation": [], "leaves": [],
                "warnings": ["every run analysed is of interest, or none is (or only one "
                             "differs): there is nothing for a tree to separate"]}
    table = depths(data, max_depth, leaf)
    depth = one_se(table)
    tree = DecisionTreeClassifier(max_depth=depth, min_samples_leaf=leaf, random_state=0)
    tree.fit(data.x, data.y)
    which = tree.apply(data.x)
    total = int(data.y.sum())
    leaves = []
    for node, limits in rules(tree.tree_, data):
        inside = which == node
        size, k = int(inside.sum()), int(data.y[inside].sum())
        leaves.append({"coverage": k / total, "density": k / size if size else None,
                       "mass": size / len(data.y), "runs": size, "of_interest": k,
                       "restricted": list(limits), "limits": limits,
                       "predicted": "of interest" if k * 2 > size else "not of interest"})
    leaves.sort(key=lambda entry: (-(entry["density"] or 0), -entry["coverage"]))
    return {"depth": depth, "cross_validation": table, "leaves": leaves}


def rules(tree, data: Data) -> list[tuple[int, dict[str, Any]]]:
    """Each leaf and its limits: the splits on the path to it, as [lower, upper] on a continuous
    parameter and as the values kept on a categorical one."""
    initial = data.initial()
    found = []
    stack: list[tuple[int, dict[str, tuple[float, float]]]] = [(0, {})]
    while stack:
        node, bounds = stack.pop()
        left, right = tree.children_left[node], tree.children_right[node]
        if left == right:  # a leaf
            found.append((node, limits_of(bounds, data, initial)))
            continue
        name, cut = data.names[tree.feature[node]], float(tree.threshold[node])
        low, high = bounds.get(name, (-math.inf, math.inf))
        stack.append((right, {**bounds, name: (max(low, cut), high)}))
        stack.append((left, {**bounds, name: (low, min(high, cut))}))
    return found


def limits_of(bounds: dict[str, tuple[float, float]], data: Data, initial) -> dict[str, Any]:
    """A path's bounds as analysis.json holds a box's limits: a split at t sends x <= t left,
    so a lower limit is exclusive; the limits written are the runs' own extremes inside."""
    limits: dict[str, Any] = {}
    for name in data.names:
        if name not in bounds:
            continue
        low, high = bounds[name]
        if name in initial.sets:
            limits[name] = {"values": whole(v for v in initial.sets[name] if low < v <= high)}
        else:
            limits[name] = {"lower": None if math.isinf(low) else low,
                            "upper": None if math.isinf(high) else high}
    return limits
