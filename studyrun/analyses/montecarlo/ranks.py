"""Spearman's rank correlations of a Monte Carlo. Tied values share the mean of their ranks
(scipy's `rankdata` default, computed here without importing scipy.stats)."""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor

import numpy as np

from studyrun.core.threads import usable_cores

THREADED = 1 << 20  # values to rank (runs x inputs) from which the columns are ranked in threads


class Ranks:
    """The ranks of each input column, computed once for every quantity they are compared with.
    A large design's columns are ranked in threads (numpy sorts without the GIL), beside the
    ranking of the first quantity in the caller's thread."""

    def __init__(self, inputs: np.ndarray) -> None:
        self.n, self.columns = inputs.shape
        self._ranks = np.empty(inputs.shape) if self.n >= 3 else None
        self._pending: list[Future] = []
        if self._ranks is not None:
            threads = min(self.columns, usable_cores())
            if threads > 1 and self.n * self.columns >= THREADED:
                pool = ThreadPoolExecutor(threads, thread_name_prefix="studyrun-ranks")
                self._pending = [pool.submit(self._rank, inputs, j) for j in range(self.columns)]
                pool.shutdown(wait=False)  # the submitted columns still run
            else:
                for j in range(self.columns):  # a column at a time
                    self._rank(inputs, j)
        self.constant = np.ptp(inputs, axis=0) == 0 if self.n else np.ones(self.columns, bool)

    def _rank(self, inputs: np.ndarray, j: int) -> None:
        assert self._ranks is not None
        self._ranks[:, j] = average_ranks(inputs[:, j])

    @property
    def ranks(self) -> np.ndarray | None:
        """The inputs' ranks, a column each (None for fewer than 3 runs)."""
        for pending in self._pending:
            pending.result()
        self._pending = []
        return self._ranks

    def spearman(self, values: np.ndarray) -> list[float | None]:
        """Spearman's rank correlation of each input with the values; None where either side
        is constant (or there are fewer than 3 runs)."""
        if self._ranks is None or np.ptp(values) == 0:
            return [None] * self.columns
        ry = average_ranks(values)
        ry -= ry.mean()
        spread = np.sqrt(ry @ ry)
        ranks = self.ranks
        assert ranks is not None
        correlations: list[float | None] = []
        for j in range(self.columns):  # Pearson's of the ranks, a column of copies at a time
            rx = ranks[:, j] - ranks[:, j].mean()
            correlations.append(None if self.constant[j] else
                                float(np.clip(rx @ ry / (np.sqrt(rx @ rx) * spread), -1, 1)))
        return correlations


def average_ranks(values: np.ndarray) -> np.ndarray:
    """scipy.stats.rankdata(values) of finite values, without importing scipy: ranks from 1,
    tied values sharing the mean of their ranks (halves and whole numbers: exact floats).
    Written to hold few arrays of the values' length at once: a Monte Carlo of ten million runs
    ranks each column."""
    values = np.asarray(values, dtype=float)
    n = len(values)
    order = np.argsort(values)  # not stable: tied values share one rank, whatever their order
    ordered = values[order]
    new = np.ones(n, bool)  # where a run of equal values begins, in sorted order
    np.not_equal(ordered[1:], ordered[:-1], out=new[1:])
    del ordered
    ranks = np.empty(n)
    if new.all():  # no ties, the usual case
        ranks[order] = np.arange(1, n + 1, dtype=float)
        return ranks
    starts = np.flatnonzero(new)
    sizes = np.diff(np.append(starts, n))
    shared = starts + (sizes + 1) / 2  # a tie at p shares p+1 .. p+size
    ranks[order] = shared[np.cumsum(new) - 1]
    return ranks
