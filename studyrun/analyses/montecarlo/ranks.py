"""Spearman's rank correlations of a Monte Carlo. Tied values share the mean of their ranks
(scipy's `rankdata` default, computed here without importing scipy.stats)."""

from __future__ import annotations

import numpy as np


class Ranks:
    """The ranks of each input column, computed once for every quantity they are compared with."""

    def __init__(self, inputs: np.ndarray) -> None:
        self.n, self.columns = inputs.shape
        self.ranks = (np.column_stack([average_ranks(column) for column in inputs.T])
                      if self.n >= 3 else None)
        self.constant = np.ptp(inputs, axis=0) == 0 if self.n else np.ones(self.columns, bool)

    def spearman(self, values: np.ndarray) -> list[float | None]:
        """Spearman's rank correlation of each input with the values; None where either side
        is constant (or there are fewer than 3 runs)."""
        if self.ranks is None or np.ptp(values) == 0:
            return [None] * self.columns
        ry = average_ranks(values)
        return [None if self.constant[j] else float(np.corrcoef(self.ranks[:, j], ry)[0, 1])
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
