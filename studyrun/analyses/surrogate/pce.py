"""Polynomial chaos expansions: a truncated orthonormal basis, its coefficients by least squares
or along a least-angle regression path (scikit-learn's lars_path) cut where the corrected
leave-one-out error is least, and the degree chosen the same way.

Formulas: docs/methods.md, "Surrogate models".
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np

from studyrun.analyses.surrogate.basis import Germ, design_matrix, multi_indices, term_count

MAX_TERMS = 20_000  # candidate terms of one degree, beyond which higher degrees are not tried
MAX_CELLS = 12_000_000  # points x candidate terms held at once (96 MB); a regression-path
# step costs as much, so it bounds `degree: auto`'s search (issue 33: 2,000 runs of 8 inputs)
AUTO_DEGREES = 20  # the highest degree `degree: auto` tries
PATIENCE = 2  # degrees tried past the best before the search stops
FIRST_STEPS = 64  # regression-path steps taken first (see fit_indices)
EXACT = 1e-12  # a leave-one-out error this small, relative to the variance, ends the search


@dataclass
class Expansion:
    """A fitted expansion: multi-indices (rows) and their coefficients, on standard variables."""

    indices: np.ndarray
    coefficients: np.ndarray
    degree: int
    loo: float  # corrected leave-one-out mean squared error
    candidates: int  # terms of the truncated basis the selection chose from

    def predict(self, standard: np.ndarray, germs: list[Germ]) -> np.ndarray:
        return design_matrix(standard, germs, self.indices) @ self.coefficients


def fit(standard: np.ndarray, y: np.ndarray, germs: list[Germ], degree: int | None,
        q: float, method: str) -> tuple[Expansion, list[str]]:
    """The expansion of the given degree, or (degree None) of the degree whose corrected
    leave-one-out error is least; with the notes worth a warning."""
    if degree is not None:
        return fit_degree(standard, y, germs, degree, q, method), []
    best: Expansion | None = None
    notes: list[str] = []
    worse = 0
    for p in range(1, AUTO_DEGREES + 1):
        terms = term_count(len(germs), p, q)  # counted first: the terms are made only if few
        if terms > MAX_TERMS or terms * len(y) > MAX_CELLS:
            notes.append(f"degree {p} would have {terms:,} candidate terms; degrees from "
                         f"{p} on were not tried (set degree, or q below 1, to go higher)")
            break
        if method == "ols" and terms >= len(y):
            if best is not None and best.degree == p - 1:  # the best is the last degree tried
                notes.append(f"degree {p} has {terms:,} candidate terms, more than least "
                             f"squares can fit to {len(y)} runs: degree {p - 1}, the highest "
                             "tried, was kept (more runs, or fit: lars, can go higher)")
            break
        expansion = fit_indices(standard, y, germs, multi_indices(len(germs), p, q), p, method)
        if best is None or expansion.loo < best.loo:
            best, worse = expansion, 0
            if best.loo <= EXACT * np.var(y):  # the model is a polynomial of this degree
                break
        else:
            worse += 1
            if worse >= PATIENCE:
                break
    if best is None:
        best = fit_degree(standard, y, germs, 1, q, "lars")
        notes.append("too few runs for least squares beyond degree 1; fitted by LARS")
    return best, notes


def fit_degree(standard: np.ndarray, y: np.ndarray, germs: list[Germ], degree: int, q: float,
               method: str) -> Expansion:
    return fit_indices(standard, y, germs, multi_indices(len(germs), degree, q), degree, method)


def fit_indices(standard: np.ndarray, y: np.ndarray, germs: list[Germ], indices: np.ndarray,
                degree: int, method: str) -> Expansion:
    """Coefficients on the candidate basis `indices` (row 0 the constant). A regression path is
    followed for FIRST_STEPS steps, then twice as far while the best prefix lies near its end:
    the path is the same however far it is followed, and most expansions keep few terms."""
    psi = design_matrix(standard, germs, indices)
    if method == "ols":
        k, loo, coefficients = best_prefix(psi, y)
        return Expansion(indices[:k], coefficients, degree, loo, len(indices))
    cap = min(len(indices) - 1, len(y) - 2)
    steps = min(cap, FIRST_STEPS)
    while True:
        order = selection_order(psi, y, steps)
        k, loo, coefficients = best_prefix(psi[:, order], y)
        if k < 0.75 * len(order) or steps >= cap:
            break
        steps = min(2 * steps, cap)
    return Expansion(indices[order[:k]], coefficients, degree, loo, len(indices))


def selection_order(psi: np.ndarray, y: np.ndarray, steps: int) -> np.ndarray:
    """The constant, then the first `steps` terms in the order the regression path lets them in."""
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.linear_model import lars_path

    x = psi[:, 1:] - psi[:, 1:].mean(axis=0)
    target = y - y.mean()
    steps = max(1, min(steps, x.shape[1]))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        warnings.simplefilter("ignore", RuntimeWarning)
        _, active, _ = lars_path(x, target, method="lar", max_iter=steps)
    entered = np.array(active, dtype=np.int64)
    _, first = np.unique(entered, return_index=True)
    return np.concatenate([[0], entered[np.sort(first)] + 1]).astype(np.int64)


def best_prefix(a: np.ndarray, y: np.ndarray) -> tuple[int, float, np.ndarray]:
    """Of the least-squares fits on the first k columns of `a`, the one with the least corrected
    leave-one-out error (Chapelle et al. 2002; Blatman and Sudret 2011): all prefixes from one QR
    factorisation, the residuals and leverages of each accumulated column by column."""
    from scipy.linalg import solve_triangular

    n = len(y)
    cap = min(a.shape[1], max(1, n - 2))
    q, r = np.linalg.qr(a[:, :cap])
    diagonal = np.abs(np.diag(r))
    usable = int(np.argmax(diagonal < 1e-10 * diagonal[0])) if (diagonal < 1e-10 * diagonal[0]).any() \
        else cap  # columns past a (numerically) dependent one are left out
    q, r = q[:, :usable], r[:usable, :usable]
    projections = q * (q.T @ y)  # column j: y's part along q_j
    residuals = y[:, None] - np.cumsum(projections, axis=1)
    leverages = np.cumsum(q * q, axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        loo = np.mean((residuals / (1.0 - leverages)) ** 2, axis=0)
        inverse = solve_triangular(r, np.eye(usable))
        # tr(C^-1)/n with C = A_k'A_k / n is ||R_k^-1||_F^2; R_k^-1 is R^-1's leading block
        trace = np.cumsum(np.sum(inverse ** 2, axis=0))
        k = np.arange(1, usable + 1)
        correction = n / (n - k) * (1.0 + trace)
        corrected = np.where((leverages < 1 - 1e-10).all(axis=0) & (k < n), loo * correction, np.inf)
    best = int(np.argmin(corrected)) + 1
    coefficients = solve_triangular(r[:best, :best], q[:, :best].T @ y)
    return best, float(corrected[best - 1]), coefficients


def refit(psi: np.ndarray, y: np.ndarray, weights: np.ndarray | None = None) -> np.ndarray:
    """Least-squares coefficients on a fixed basis, rows weighted (a bootstrap's counts) by the
    normal equations: the basis is near orthonormal, so they are well conditioned."""
    from scipy.linalg import cho_factor, cho_solve

    weighted = psi if weights is None else psi * weights[:, None]
    try:
        return cho_solve(cho_factor(weighted.T @ psi), weighted.T @ y)
    except np.linalg.LinAlgError:
        return np.linalg.lstsq(weighted.T @ psi, weighted.T @ y, rcond=None)[0]


def moments_and_indices(indices: np.ndarray, coefficients: np.ndarray, second_order: bool):
    """Mean, variance and Sobol' indices from an orthonormal expansion's coefficients: the
    variance is the sum of the squared non-constant coefficients; S1_i sums those of terms in
    input i alone, ST_i those of every term involving input i, S2_ij those of terms in i and j
    alone."""
    constant = ~indices.any(axis=1)
    mean = float(coefficients[constant].sum())
    power = np.where(constant, 0.0, coefficients ** 2)
    variance = float(power.sum())
    involved = indices > 0
    count = involved.sum(axis=1)
    d = indices.shape[1]
    if variance <= 0:
        zeros = np.zeros(d)
        return mean, 0.0, zeros, zeros, (np.zeros((d, d)) if second_order else None)
    first = np.array([power[(count == 1) & involved[:, i]].sum() for i in range(d)]) / variance
    total = np.array([power[involved[:, i]].sum() for i in range(d)]) / variance
    pairs = None
    if second_order:
        pairs = np.zeros((d, d))
        for i in range(d):
            for j in range(i + 1, d):
                pairs[i, j] = power[(count == 2) & involved[:, i] & involved[:, j]].sum() / variance
    return mean, variance, first, total, pairs
