"""SALib's `sobol.analyze` (1.6, `parallel=False`), fast: the same numbers, bit for bit.

SALib draws one (N, resamples) matrix of row indices and, for each factor, gathers A, B and
AB_j at those rows and reduces the (2N, resamples) stack of A and B three times (S1, ST and
the ptp test). The stack does not depend on the factor: here it is gathered and reduced once,
and the resamples are split into fixed groups of columns computed in threads (numpy's gathers
and reductions run without the GIL). Every reduction keeps SALib's order (down the rows of a
C-ordered matrix of at least two columns, one column at a time), so the indices do not depend
on the threads or the grouping; tests/analyses/test_sobol.py compares them with
SALib's, bit for bit.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from studyrun.core.threads import thread_map

COLUMNS = 16  # resamples gathered and reduced at once: 2N x 16 doubles stay near the cache
EPS = np.finfo(float).eps


def analyze(y: np.ndarray, factors: int, second_order: bool, resamples: int,
            confidence: float, seed: int, threads: int | None = None) -> dict[str, np.ndarray]:
    """S1, S1_conf, ST, ST_conf (arrays of `factors`) and, with `second_order`, S2 and S2_conf
    ((factors, factors), NaN off the upper triangle): `SALib.analyze.sobol.analyze(problem, y,
    calc_second_order, resamples, confidence, seed=seed)` for a non-zero seed."""
    from scipy.special import ndtri

    if not seed:
        raise ValueError("SALib draws unseeded resamples for a seed of 0; give another")
    step = (2 if second_order else 1) * factors + 2
    n = y.size // step
    if y.size != n * step:
        raise ValueError(f"{y.size} values are not whole blocks of {step}")
    y = (y - y.mean()) / y.std()
    a, b = y[0::step], y[step - 1::step]
    ab = np.zeros((n, factors))
    ba = np.zeros((n, factors)) if second_order else None
    for j in range(factors):
        ab[:, j] = y[j + 1::step]
        if ba is not None:
            ba[:, j] = y[j + 1 + factors::step]
    r = np.random.default_rng(seed).integers(n, size=(n, resamples))
    z = ndtri(0.5 + confidence / 2)  # scipy's norm.ppf, which SALib calls

    s: dict[str, np.ndarray] = {"S1": np.array([first_order(a, ab[:, j], b)
                                                for j in range(factors)]),
                                "ST": np.array([total_order(a, ab[:, j], b)
                                                for j in range(factors)])}
    if ba is not None:
        s["S2"] = np.full((factors, factors), np.nan)
        for j in range(factors):
            for k in range(j + 1, factors):
                s["S2"][j, k] = second_order_index(a, ab[:, j], ab[:, k], ba[:, j], b)

    groups = [(start, min(start + COLUMNS, resamples)) for start in range(0, resamples, COLUMNS)]
    if len(groups) > 1 and groups[-1][1] - groups[-1][0] < 2:  # a single column reduces pairwise
        groups[-2:] = [(groups[-2][0], resamples)]
    near_a, near_b, near_ab = (np.ascontiguousarray(v) for v in (a, b, ab.T))  # for gathers

    def one(group: tuple[int, int]) -> dict[str, Any]:
        rows = np.ascontiguousarray(r[:, group[0]:group[1]])
        return resampled(near_a, near_b, near_ab, rows)

    parts = thread_map(one, groups, threads, "sobol")
    whole = {key: np.concatenate([part[key] for part in parts], axis=-1)
             for key in ("S1", "ST", "variance")}
    spread = max(p["max"] for p in parts) - min(p["min"] for p in parts)  # ptp of A[r], B[r]
    constant = not spread > EPS  # SALib's first_order gives zeros for every resample
    for key in ("S1", "ST"):
        estimates = np.zeros((factors, resamples)) if constant else whole[key]
        s[f"{key}_conf"] = (np.array([z * estimates[j].std(ddof=1) for j in range(factors)])
                            if spread != 0.0 else np.zeros(factors))
    if ba is not None:
        s["S2_conf"] = second_order_intervals(a, b, ab, ba, r, whole["S1"], whole["variance"],
                                              z, constant)
    return s


def resampled(a: np.ndarray, b: np.ndarray, ab: np.ndarray, rows: np.ndarray) -> dict[str, Any]:
    """The estimators of each resample in `rows` (N, columns), from A, B and `ab` (factors, N):
    S1 and ST (factors, columns), the variance of the stacked A and B (columns), and their max
    and min. A factor's
    cross-samples are gathered when used, so memory holds about 7 (N, columns) arrays at most
    whatever the factors: with SALib's (N, resamples) indices, 64 bytes a base sample and
    resample, as SALib (BOOTSTRAP_BYTES)."""
    n, columns = rows.shape
    stack = np.empty((2 * n, columns))  # SALib's np.r_[A[r], B[r]], gathered in place
    ar, br = stack[:n], stack[n:]
    np.take(a, rows, out=ar)
    np.take(b, rows, out=br)
    variance = np.var(stack, axis=0)
    top, bottom = float(stack.max()), float(stack.min())
    factors = ab.shape[0]
    s1 = np.empty((factors, columns))
    st = np.empty_like(s1)
    abr, step = np.empty((n, columns)), np.empty((n, columns))
    for j in range(factors):
        np.take(ab[j], rows, out=abr)
        np.subtract(abr, ar, out=step)
        np.multiply(br, step, out=step)
        s1[j] = divided(np.mean(step, axis=0), variance)
        np.subtract(ar, abr, out=step)
        np.square(step, out=step)
        st[j] = divided(0.5 * np.mean(step, axis=0), variance)
    out: dict[str, Any] = {"S1": s1, "ST": st, "variance": variance, "max": top, "min": bottom}
    return out


def second_order_intervals(a: np.ndarray, b: np.ndarray, ab: np.ndarray, ba: np.ndarray,
                           r: np.ndarray, s1: np.ndarray, variance: np.ndarray, z: float,
                           constant: bool) -> np.ndarray:
    """S2_conf: SALib's S2 of each pair at every resample (all of a pair's resamples at once,
    as SALib, so memory holds a pair's, not every pair's), with S1 and the variance of each
    resample from the groups."""
    factors = ab.shape[1]
    conf = np.full((factors, factors), np.nan)
    ar, br = a[r], b[r]
    both = ar * br
    del ar, br
    for j in range(factors):
        bar = ba[r, j]
        for k in range(j + 1, factors):
            if constant:
                conf[j, k] = z * np.zeros(r.shape[1]).std(ddof=1)
                continue
            vjk = divided(np.mean(bar * ab[r, k] - both, axis=0), variance)
            conf[j, k] = z * (vjk - s1[j] - s1[k]).std(ddof=1)
    return conf


def divided(top: np.ndarray, variance: np.ndarray) -> np.ndarray:
    """top / variance, 0 where the variance is not above eps (as SALib)."""
    out: np.ndarray = np.divide(top, variance, out=np.zeros_like(variance, dtype=np.float64),
                                where=variance > EPS)
    return out


def first_order(a: np.ndarray, ab: np.ndarray, b: np.ndarray) -> float:
    """Saltelli et al. (2010)'s S1 normalised by the variance of [A; B], as SALib's."""
    y = np.r_[a, b]
    if np.ptp(y) <= EPS:
        return 0.0
    return float(divided(np.mean(b * (ab - a), axis=0), np.var(y, axis=0)))


def total_order(a: np.ndarray, ab: np.ndarray, b: np.ndarray) -> float:
    """Jansen (1999)'s ST normalised by the variance of [A; B], as SALib's."""
    y = np.r_[a, b]
    if np.ptp(y) <= EPS:
        return 0.0
    return float(divided(0.5 * np.mean((a - ab) ** 2, axis=0), np.var(y, axis=0)))


def second_order_index(a: np.ndarray, abj: np.ndarray, abk: np.ndarray, baj: np.ndarray,
                       b: np.ndarray) -> float:
    """Saltelli (2002)'s S2 of factors j and k, as SALib's."""
    y = np.r_[a, b]
    if np.ptp(y) <= EPS:
        return 0.0
    vjk = float(divided(np.mean(baj * abk - a * b, axis=0), np.var(y, axis=0)))
    return vjk - first_order(a, abj, b) - first_order(a, abk, b)

