"""Correlated inputs (the study's `correlation:`): the completed matrix of the parameters' normal
scores, and unit-cube points given that dependence, by a Gaussian copula or, for a Latin
hypercube, by Iman-Conover's rearrangement (which keeps each column's strata).

Formulas, defaults and edge cases: docs/methods.md, "Correlated inputs".
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

_EPS = 2.0 ** -53  # as sample_unit: points stay in [EPS, 1 - EPS]


def correlation_matrix(pairs: Sequence[Sequence], names: Sequence[str]) -> np.ndarray | None:
    """The matrix over `names` (in order) from `[a, b, r]` triples: unlisted pairs 0, unit
    diagonal; None without pairs. Triples naming anything else, or a name with itself, are left
    out (the study's checks report them)."""
    if not pairs:
        return None
    index = {name: i for i, name in enumerate(names)}
    matrix = np.eye(len(names))
    for a, b, r in pairs:
        if a in index and b in index and a != b:
            matrix[index[a], index[b]] = matrix[index[b], index[a]] = float(r)
    return matrix


def correlate_unit(u: np.ndarray, matrix: np.ndarray | None, method: str) -> np.ndarray:
    """Independent unit-cube points (rows) to points whose normal scores have correlation
    `matrix`: a Latin hypercube by Iman-Conover, random and Sobol' points through the Gaussian
    copula; the points themselves without a matrix."""
    if matrix is None or len(u) == 0:
        return u
    if method == "lhs":
        return iman_conover(u, matrix)
    from scipy.special import ndtr, ndtri

    z = ndtri(u) @ np.linalg.cholesky(matrix).T
    return np.clip(ndtr(z), _EPS, 1 - _EPS)


def iman_conover(u: np.ndarray, matrix: np.ndarray) -> np.ndarray:
    """Each column's values rearranged so that the van der Waerden scores of their ranks have
    correlation `matrix` (Iman and Conover 1982, with the sample's own score correlation
    corrected for): every value stays in its column, so a Latin hypercube stays one."""
    from scipy.special import ndtri

    n, d = u.shape
    if n < d + 2:  # too few rows to correlate the scores; the points as drawn
        return u
    ranks = np.argsort(np.argsort(u, axis=0, kind="stable"), axis=0, kind="stable")
    scores = ndtri(np.arange(1, n + 1) / (n + 1))[ranks]
    achieved = np.corrcoef(scores, rowvar=False)
    try:
        unmix = np.linalg.inv(np.linalg.cholesky(achieved))
    except np.linalg.LinAlgError:  # repeated columns: leave the sample's own correlation
        unmix = np.eye(d)
    target = scores @ unmix.T @ np.linalg.cholesky(matrix).T
    order = np.argsort(np.argsort(target, axis=0, kind="stable"), axis=0, kind="stable")
    return np.take_along_axis(np.sort(u, axis=0), order, axis=0)


def correlations(matrix: np.ndarray, names: Sequence[str]) -> dict[str, dict[str, float]]:
    """A matrix as name -> name -> value, every pair both ways (as calibrate's correlation)."""
    return {a: {b: float(matrix[i, j]) for j, b in enumerate(names)} for i, a in enumerate(names)}


def achieved(x: np.ndarray, names: Sequence[str]) -> dict:
    """The Pearson and Spearman correlations of a design's inputs (natural units), so a reader
    sees they are correlated as asked."""
    from scipy import stats

    if len(x) < 3:
        return {"runs": int(len(x)), "pearson": None, "spearman": None}
    with np.errstate(invalid="ignore", divide="ignore"):
        pearson = np.atleast_2d(np.corrcoef(x, rowvar=False))
        spearman = np.atleast_2d(np.corrcoef(stats.rankdata(x, axis=0), rowvar=False))
    for matrix in (pearson, spearman):
        np.fill_diagonal(matrix, 1.0)  # not 0.9999999999999998
    return {"runs": int(len(x)), "pearson": correlations(pearson, names),
            "spearman": correlations(spearman, names)}


def design_facts(matrix: np.ndarray | None, names: Sequence[str], x: np.ndarray) -> dict:
    """What analysis.json's design block says of correlated inputs: the matrix asked for and the
    correlations the design's rows achieved; nothing for independent inputs."""
    if matrix is None:
        return {}
    return {"correlation": correlations(matrix, names), "achieved_correlation": achieved(x, names)}
