"""Shapley effects and Kucherenko's indices from given data by nearest neighbours (Broto, Bachoc
and Depecker 2020): E[Var(Y | X_K)] is the mean, over the rows, of the variance of Y among each
row's nearest neighbours in the inputs K, so any sample of the inputs' joint distribution serves
and no model runs.

Formulas, defaults and edge cases: docs/methods.md, "Shapley effects".
"""

from __future__ import annotations

from typing import Any

import numpy as np

from studyrun.analyses.shapley.estimator import Scheme, combine, scheme

MOST_INPUTS = 12  # every subset's neighbours are searched: 2^d - 2 searches of all rows
# rows x subsets searched at most: 10^6 took 2.8 s of CPU (1,000 rows, 10 inputs), so this is
# about ten minutes
MOST_SEARCHES = 200_000_000


def copula_scale(x: np.ndarray) -> np.ndarray:
    """Each column as the normal scores of its ranks: distances then do not depend on units (a
    conditional distribution does not change under a column's increasing map), and the tails
    are not squeezed as by the ranks themselves."""
    from scipy.special import ndtri
    from scipy.stats import rankdata

    return ndtri((rankdata(x, axis=0) - 0.5) / len(x))


def local_variances(u: np.ndarray, y: np.ndarray, s: Scheme, neighbours: int) -> list[np.ndarray]:
    """For each block of the scheme (the set J whose cost is wanted), each row's variance of Y
    among its `neighbours` nearest rows (itself included) in the other inputs."""
    from scipy.spatial import cKDTree

    out = []
    d = u.shape[1]
    for mask in s.blocks:
        others = [i for i in range(d) if not mask >> i & 1]
        points = u[:, others]
        _, index = cKDTree(points).query(points, k=neighbours)
        out.append(np.var(y[index], axis=1, ddof=1))
    return out


def knn_indices(x: np.ndarray, y: np.ndarray, neighbours: int, resamples: int,
                confidence: float, seed: int) -> dict[str, Any]:
    """Shapley effects, Kucherenko's indices and V of y over the rows x (every row usable)."""
    s = scheme(x.shape[1], None, np.random.default_rng(seed))
    local = local_variances(copula_scale(x), y, s, neighbours)
    return combine(y, [], s, resamples, confidence, seed, local=local)
