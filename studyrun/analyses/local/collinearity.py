"""Collinearity and identifiability of parameter subsets, as FME's collin computes them
(Brun et al. 2001; docs/methods.md, "Collinearity and identifiable subsets").

The normalised sensitivity columns of every output and time are stacked, each column scaled to
unit length, and for a subset K the index is gamma_K = 1 / sqrt(lambda_min(S_K^T S_K)). We take
lambda_min from the singular values of the subset's columns of R (S = QR), which has the same
Gram matrix but keeps digits that forming S^T S would lose. gamma near 1: the parameters act
independently; above about 20: a change of one can be compensated by the others.
"""

from __future__ import annotations

import math
from itertools import combinations
from typing import Any

import numpy as np

MAX_SUBSETS = 1 << 16


def subset_count(parameters: int, max_size: int | None) -> int:
    """How many subsets of size 2..max_size there are (FME starts at pairs)."""
    top = parameters if max_size is None else min(max_size, parameters)
    return sum(math.comb(parameters, k) for k in range(2, top + 1))


def unit_columns(matrix: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rows with a NaN dropped, each column scaled to length 1; and which columns were all 0."""
    rows = matrix[np.isfinite(matrix).all(axis=1)]
    norms = np.sqrt((rows ** 2).sum(axis=0))
    zero = ~(norms > 0)
    with np.errstate(invalid="ignore", divide="ignore"):
        scaled = np.where(zero, 0.0, rows / np.where(zero, 1.0, norms))
    return scaled, zero


def collinearity_index(columns: np.ndarray) -> float:
    """gamma = 1 / sqrt(smallest eigenvalue of C^T C) for columns already of unit length."""
    if columns.shape[1] == 0:
        return float("nan")
    smallest = np.linalg.svd(columns, compute_uv=False)
    sigma = smallest.min() if smallest.size == columns.shape[1] else 0.0
    return math.inf if sigma <= 0 else float(1.0 / sigma)


def analyse_collinearity(matrix: np.ndarray, names: list[str], max_size: int | None,
                         threshold: float) -> dict[str, Any]:
    """Every subset of 2..max_size parameters with its index; the largest ones under threshold.

    `matrix` holds one column per parameter (normalised sensitivities, rows = output x time).
    An index of None in analysis.json means infinite: exactly collinear, or a parameter the
    outputs do not respond to at all.
    """
    scaled, zero = unit_columns(np.asarray(matrix, dtype=float))
    rows = len(scaled)
    reduced = np.linalg.qr(scaled, mode="r") if rows >= scaled.shape[1] else scaled
    top = len(names) if max_size is None else min(max_size, len(names))
    subsets = []
    for size in range(2, top + 1):
        for members in combinations(range(len(names)), size):
            index = math.inf if zero[list(members)].any() or rows < size else \
                collinearity_index(reduced[:, list(members)])
            subsets.append({"parameters": [names[i] for i in members], "size": size,
                            "index": index})
    below = [s for s in subsets if s["index"] < threshold]
    below += [{"parameters": [n], "size": 1} for n, z in zip(names, zero) if not z and not below]
    largest = max((s["size"] for s in below), default=0)
    return {"threshold": threshold, "max_size": top, "rows": rows,
            "unresponsive": [n for n, z in zip(names, zero) if z],
            "subsets": subsets, "largest_identifiable_size": largest,
            "identifiable": [s["parameters"] for s in below if s["size"] == largest]}
