"""SALib's delta bootstrap (1.6), fast: the same resamples, drawn from SALib's generator in
SALib's order, each resample's kernel densities evaluated by numpy's vectorised exp rather than
scipy's `gaussian_kde`, and the resamples shared among the process's cores in threads (numpy's
arithmetic runs without the GIL). Each resample is computed alone, so the indices do not depend
on the threads; they equal SALib's to rounding (about 1e-15 of a delta).

`patched()` puts `bias_reduced_delta` in place of SALib's within `delta.analyze`, which does
the rest (bins, notes, S1) as before.
"""

from __future__ import annotations

import math
import threading
import warnings
from contextlib import contextmanager
from typing import Iterator

import numpy as np

from studyrun.core.threads import thread_map

CHUNK = 512  # rows of kernels evaluated at once: 512 x 100 grid points stay in a core's cache
_PATCHING = threading.Lock()  # SALib's module is patched for one analysis at a time


@contextmanager
def patched() -> Iterator[None]:
    """SALib's `delta.analyze` with this module's bootstrap in place of its own (a SALib
    without `bias_reduced_delta` keeps its own; the tests compare the two)."""
    from SALib.analyze import delta

    if not hasattr(delta, "bias_reduced_delta"):
        yield
        return
    with _PATCHING:
        saved = delta.bias_reduced_delta
        delta.bias_reduced_delta = bias_reduced_delta
        try:
            yield
        finally:
            delta.bias_reduced_delta = saved


def bias_reduced_delta(Y: np.ndarray, Ygrid: np.ndarray, X: np.ndarray, m: np.ndarray,
                       num_resamples: int, conf_level: float, y_resamples: int, mode: str,
                       bin_edges: np.ndarray, paramname: str,
                       min_class_size: int) -> tuple[float, float, np.ndarray]:
    """SALib's `bias_reduced_delta` (Plischke 2013, eqn 30), its resamples evaluated at once."""
    from SALib.analyze.delta import obtain_resampled_subset
    from scipy.stats import norm

    ind = obtain_resampled_subset(X, y_resamples, mode, bin_edges, paramname, min_class_size,
                                  warn_print=True)
    try:
        draws = [obtain_resampled_subset(X, y_resamples, mode, bin_edges, paramname,
                                         min_class_size, warn_print=False)
                 for _ in range(num_resamples)]
    except ValueError as e:
        raise RuntimeError(f"Bootstrap error: [{paramname}][{mode}]: {e}") from e
    estimates = in_threads([ind, *draws], Y, Ygrid, X, m)
    for _, skipped in estimates:  # SALib's warning, in its order, from this thread
        if skipped:
            warnings.warn(skipped, stacklevel=2)
    d_hat = estimates[0][0]
    d = 2.0 * d_hat - np.array([value for value, _ in estimates[1:]])
    return d.mean(), norm.ppf(0.5 + conf_level / 2) * d.std(ddof=1), ind


def in_threads(draws: list[np.ndarray], Y: np.ndarray, Ygrid: np.ndarray, X: np.ndarray,
               m: np.ndarray, threads: int | None = None) -> list[tuple[float, str | None]]:
    """calc_delta of each draw, in order, computed in `threads` (default: the usable cores)."""
    def one(draw: np.ndarray) -> tuple[float, str | None]:
        return calc_delta(Y[draw], Ygrid, X[draw], m)

    return thread_map(one, draws, threads, "delta")


def calc_delta(Y: np.ndarray, Ygrid: np.ndarray, X: np.ndarray,
               m: np.ndarray) -> tuple[float, str | None]:
    """SALib's `calc_delta` (Plischke 2013, eqn 26) and the warning it would give, if any: the
    runs in classes of equal size by X's rank (ties in order), each class's density against
    all the runs'."""
    N = len(Y)
    fy = density(Y, Ygrid)
    total_bins = len(m) - 1
    order = np.argsort(X, kind="stable")  # rankdata's "ordinal" ranks: ties in their order
    ends = np.searchsorted(np.arange(1, N + 1), m, side="right")  # ranks in (m[j], m[j + 1]]
    d_hat, skipped = 0.0, 0
    for start, end in zip(ends[:-1], ends[1:]):
        nm = int(end - start)
        if nm == 0:
            continue
        Y_ix = Y[order[start:end]]
        if np.ptp(Y_ix) == 0.0:
            skipped += 1
            continue
        d_hat += (nm / (2 * N)) * np.trapezoid(np.abs(fy - density(Y_ix, Ygrid)), Ygrid)
    warning = None
    if skipped / total_bins > 0.35:  # SALib's words
        warning = (f"{skipped}/{total_bins} bins skipped (>35%)"
                   "This may indicate under-sampling or poor binning."
                   "Try increasing sample size (y_resamples) or decreasing the number of bins (M).")
    return d_hat, warning


def density(values: np.ndarray, grid: np.ndarray) -> np.ndarray:
    """scipy's `gaussian_kde(values, bw_method="silverman")(grid)`, to rounding: Gaussian
    kernels of width Silverman's factor x the values' standard deviation."""
    n = values.size
    variance = float(np.var(values, ddof=1))
    if not variance > 0:  # as gaussian_kde, whose Cholesky factor fails
        raise np.linalg.LinAlgError("the values' covariance matrix is singular")
    width = math.sqrt(variance) * (n * 0.75) ** -0.2
    scale = 1 / (width * math.sqrt(2.0))
    at, of = grid * scale, values * scale
    total = np.zeros(grid.size)
    block = np.empty((min(CHUNK, n), grid.size))
    for start in range(0, n, CHUNK):
        part = of[start:start + CHUNK]
        t = block[:part.size]
        np.subtract(part[:, None], at, out=t)
        np.square(t, out=t)
        np.negative(t, out=t)
        np.exp(t, out=t)
        total += t.sum(axis=0)
    return total / (n * width * math.sqrt(2 * math.pi))

