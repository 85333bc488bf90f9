"""Shapley effects and Kucherenko's indices from given data by nearest neighbours (Broto, Bachoc
and Depecker 2020): E[Var(Y | X_K)] is the mean, over the rows, of the variance of Y among each
row's nearest neighbours in the inputs K, so any sample of the inputs' joint distribution serves
and no model runs.

The interval comes from splitting the rows into random halves and estimating again on each
half: the local variances share rows, so resampling them as if independent understates the
spread (it covered 60-100% where 95% was asked). The halves' neighbours are farther apart, and
how much their costs rise measures the neighbour bias: it is taken off the estimate and, as the
correction's own uncertainty, added to the interval.

Formulas, defaults and edge cases: docs/methods.md, "Shapley effects".
"""

from __future__ import annotations

from typing import Any

import numpy as np

from studyrun.analyses.shapley.estimator import Constant, Scheme, TooFew, kucherenko, scheme

MOST_INPUTS = 12  # every subset's neighbours are searched: 2^d - 2 searches of all rows
# rows x subsets searched at most, counting the halves' searches: 10^6 took 2.8 s of CPU
# (1,000 rows, 10 inputs), so this is about ten minutes
MOST_SEARCHES = 200_000_000
SPLITS = 10  # splits of the rows into two halves, for the interval


def copula_scale(x: np.ndarray) -> np.ndarray:
    """Each column as the normal scores of its ranks: distances then do not depend on units (a
    conditional distribution does not change under a column's increasing map), and the tails
    are not squeezed as by the ranks themselves."""
    from scipy.special import ndtri
    from scipy.stats import rankdata

    return ndtri((rankdata(x, axis=0) - 0.5) / len(x))


def costs(u: np.ndarray, y: np.ndarray, s: Scheme, neighbours: int) -> np.ndarray:
    """[0, 1, c(J) / V for each block J of the scheme]: c(J) is the mean over the rows of the
    variance of Y among the row's `neighbours` nearest rows (itself included) in the inputs
    outside J."""
    from scipy.spatial import cKDTree

    v = float(np.var(y, ddof=1))
    if not v > 0:
        raise Constant()
    out = [0.0, 1.0]
    d = u.shape[1]
    for mask in s.blocks:
        points = u[:, [i for i in range(d) if not mask >> i & 1]]
        _, index = cKDTree(points).query(points, k=neighbours)
        out.append(float(np.mean(np.var(y[index], axis=1, ddof=1))) / v)
    return np.array(out)


def effects(s: Scheme, c: np.ndarray) -> np.ndarray:
    """Shapley effects, then Kucherenko's S1, then ST (each d long), from the costs."""
    return np.concatenate([s.weights() @ c, *kucherenko(s, c)])


def knn_indices(x: np.ndarray, y: np.ndarray, neighbours: int, splits: int, confidence: float,
                seed: int) -> dict[str, Any]:
    """Shapley effects, Kucherenko's indices and V of y over the rows x (every row usable).

    The bias the halves show, scaled to the whole, is taken off: with p inputs to search, it
    grows as the squared neighbour distance, (rows)^(-2/p), so halving the rows multiplies it
    by 2^(2/p). Half-width: Student's t (`splits` degrees of freedom) times the spread of the
    difference between two halves' estimates (its variance is about four times the whole's),
    plus the size of that correction."""
    from scipy import stats

    n, d = x.shape
    if n < 2 * (neighbours + 1):
        raise TooFew(n // 2)
    s = scheme(d, None, np.random.default_rng(seed))
    u = copula_scale(x)
    whole = costs(u, y, s, neighbours)
    rng = np.random.default_rng(seed)
    gaps, rises = [], []
    half = n // 2
    for _ in range(splits):
        order = rng.permutation(n)
        try:
            a, b = (costs(u[rows], y[rows], s, neighbours)
                    for rows in (order[:half], order[half:2 * half]))
        except Constant:
            continue
        gaps.append(effects(s, a) - effects(s, b))
        rises.append((a + b) / 2 - whole)
    searched = np.array([0, 0, *[d - bin(mask).count("1") for mask in s.blocks]])
    growth = np.where(searched > 0, 2.0 ** (2.0 / np.maximum(searched, 1)) - 1, np.inf)
    zero = effects(s, np.zeros_like(whole))  # S1 = 1 - c(all but i) is affine in the costs
    # no split without a constant half (y varies in a row or two): no bias to take off, and no
    # interval (null)
    bias = effects(s, np.mean(rises, axis=0) / growth) - zero if rises else np.zeros(3 * d)
    spread = np.sqrt(np.mean(np.square(gaps), axis=0) / 4) if gaps else np.full(3 * d, np.nan)
    t = float(stats.t.ppf(0.5 + confidence / 2, max(1, len(gaps))))
    values = effects(s, whole) - bias
    conf = t * spread + np.abs(bias)
    return {"shapley": values[:d], "shapley_conf": conf[:d], "S1": values[d:2 * d],
            "S1_conf": conf[d:2 * d], "ST": values[2 * d:], "ST_conf": conf[2 * d:],
            "variance": float(np.var(y, ddof=1))}
