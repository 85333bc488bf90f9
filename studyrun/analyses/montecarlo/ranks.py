"""Spearman's rank correlations of a Monte Carlo: in memory for a design of one chunk; streamed
for a larger one, from the store's columns in sorted order, holding one rank per run (4 bytes)
and no values.

Tied values share the mean of their ranks (scipy's `rankdata` default, computed here without
importing scipy.stats). Streamed ranks are kept
doubled, as integers, and their sums exactly: the results do not depend on how runs are chunked.
"""

from __future__ import annotations

import numpy as np

from ...core.design import PlannedRuns


class Ranks:
    """The ranks of each input column, computed once for every quantity they are compared with."""

    def __init__(self, inputs: np.ndarray) -> None:
        self.n, self.columns = inputs.shape
        self.ranks = None  # a row per input: each column's ranks contiguous, filled in place
        if self.n >= 3:
            self.ranks = np.empty((self.columns, self.n))
            for j in range(self.columns):
                self.ranks[j] = average_ranks(inputs[:, j])
        self.constant = np.ptp(inputs, axis=0) == 0 if self.n else np.ones(self.columns, bool)

    def spearman(self, values: np.ndarray) -> list[float | None]:
        """Spearman's rank correlation of each input with the values; None where either side
        is constant (or there are fewer than 3 runs)."""
        if self.ranks is None or np.ptp(values) == 0:
            return [None] * self.columns
        ry = average_ranks(values)
        return [None if self.constant[j] else float(np.corrcoef(self.ranks[j], ry)[0, 1])
                for j in range(self.columns)]


def average_ranks(values: np.ndarray) -> np.ndarray:
    """scipy.stats.rankdata(values) of finite values, without importing scipy: ranks from 1,
    tied values sharing the mean of their ranks (halves and whole numbers: exact floats)."""
    values = np.asarray(values, dtype=float)
    order = np.argsort(values, kind="stable")
    ordered = values[order]
    starts = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]])
    sizes = np.diff(np.r_[starts, len(ordered)])
    ranks = np.empty(len(values))
    ranks[order] = np.repeat(starts + (sizes + 1) / 2, sizes)  # a tie at p shares p+1 .. p+size
    return ranks


class StreamedSpearman:
    """One quantity's correlations with each parameter over a design too large for memory: its
    runs, fed in increasing order of the quantity, are ranked by plan position; then a pass in
    each parameter's order pairs that parameter's ranks with them."""

    def __init__(self, size: int) -> None:
        # twice each run's rank by plan position; 0 for a run left out (failed, or not finite)
        self.ranks = np.zeros(size, np.int32 if 2 * size < 2**31 else np.int64)
        self.tied, self.sums = TiedRanks(), RankSums()

    def add(self, positions: np.ndarray, values: np.ndarray) -> None:
        """The next kept runs (succeeded, quantity finite) in increasing order of the quantity."""
        self._put(*self.tied.add(values, positions.astype(np.int64)))

    def correlations(self, runs: PlannedRuns) -> dict[str, float | None]:
        """Spearman's correlation of the quantity with each parameter, one pass each."""
        self._put(*self.tied.finish())
        return {name: self._correlation(runs, name) for name in runs.names}

    def _put(self, twice: np.ndarray, positions: np.ndarray) -> None:
        self.ranks[positions] = twice
        self.sums.add(twice)

    def _correlation(self, runs: PlannedRuns, name: str) -> float | None:
        tied, x, y = TiedRanks(), RankSums(), self.sums
        for positions, values in runs.stream(["run", name], order_by=name):
            partners = self.ranks[positions.astype(np.int64)]
            kept = partners > 0
            x.add(*tied.add(values[kept], partners[kept].astype(np.int64)))
        x.add(*tied.finish())
        return spearman_from_sums(y.n, x.total / 2, y.total / 2, x.squares / 4, y.squares / 4,
                                  x.products / 4)


class RankSums:
    """The count, sum and sum of squares of doubled ranks, and of their products with their
    partners' (the other side's doubled ranks), as exact integers."""

    def __init__(self) -> None:
        self.n = self.total = self.squares = self.products = 0

    def add(self, twice: np.ndarray, partners: np.ndarray | None = None) -> None:
        self.n += len(twice)
        self.total += int(twice.sum())
        self.squares += exact_dot(twice, twice)
        if partners is not None:
            self.products += exact_dot(twice, partners)


class TiedRanks:
    """Average ranks, doubled (integers), of values that arrive sorted, chunk by chunk, each with
    a key; the values tied at the end of a chunk are held back until their tie ends."""

    def __init__(self) -> None:
        self.before = 0  # values ranked so far
        self.keys, self.values = np.zeros(0, np.int64), np.zeros(0)

    def add(self, values: np.ndarray, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(doubled ranks, keys) of the values whose ties have ended."""
        keys, values = np.concatenate([self.keys, keys]), np.concatenate([self.values, values])
        if not len(values):
            return np.zeros(0, np.int64), keys
        end = np.flatnonzero(values != values[-1])[-1:] + 1  # where the last tie begins
        done = int(end[0]) if len(end) else 0
        self.keys, self.values = keys[done:], values[done:]
        return self._rank(values[:done]), keys[:done]

    def finish(self) -> tuple[np.ndarray, np.ndarray]:
        """(doubled ranks, keys) of the values held back."""
        keys, values = self.keys, self.values
        self.keys, self.values = keys[:0], values[:0]
        return self._rank(values), keys

    def _rank(self, values: np.ndarray) -> np.ndarray:
        starts = np.flatnonzero(np.r_[True, values[1:] != values[:-1]])
        sizes = np.diff(np.r_[starts, len(values)])
        # a tie of `size` values after `before` smaller ones shares ranks before+1 .. before+size
        twice = np.repeat(2 * (self.before + starts) + sizes + 1, sizes)
        self.before += len(values)
        return twice


def exact_dot(a: np.ndarray, b: np.ndarray) -> int:
    """The dot product of two int64 arrays of values in [0, 2**28), exactly: b in 14-bit halves
    and the rows in blocks of 2**20, so that no sum passes int64."""
    total, block = 0, 1 << 20
    for start in range(0, len(a), block):
        high, low = np.divmod(b[start:start + block], 1 << 14)
        part = a[start:start + block]
        total += (int(part @ high) << 14) + int(part @ low)
    return total


def spearman_from_sums(n: int, sx: float, sy: float, sxx: float, syy: float,
                       sxy: float) -> float | None:
    """Pearson's correlation of ranks from their sums; None when either side is constant."""
    if not n or n < 3:
        return None
    covariance = sxy - sx * sy / n
    spread = (sxx - sx * sx / n) * (syy - sy * sy / n)
    return float(covariance / np.sqrt(spread)) if spread > 0 else None
