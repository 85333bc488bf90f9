"""Saltelli's cross-sampled scrambled Sobol' points on the unit cube: the rows of
`SALib.sample.sobol.sample` (SALib 1.5-1.6), bit for bit, built with numpy.

SALib fills its matrix one value at a time, N (2D + 2) D assignments in Python: 30 s for
D = 1,000 and N = 64. Here the blocks are made from the base sequence by broadcasting.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np


def saltelli_unit(d: int, base: int, second_order: bool, seed: int,
                  groups: Sequence[str] | None = None) -> np.ndarray:
    """N = `base` blocks of rows: A, then A with the columns of each factor (a parameter, or a
    group of them) taken from B, (with second order, B with those columns from A,) then B."""
    from scipy.stats import qmc

    sequence = qmc.Sobol(d=2 * d, scramble=True, seed=seed).random(base)
    a, b = sequence[:, :d], sequence[:, d:]
    labels = list(groups) if groups else list(range(d))
    factor = {label: i for i, label in enumerate(dict.fromkeys(labels))}  # in first-seen order
    k, of = len(factor), np.array([factor[label] for label in labels])  # of: each column's factor
    columns = np.arange(d)
    blocks = np.empty((base, (2 * k if second_order else k) + 2, d))
    blocks[:, 0] = a
    blocks[:, 1:1 + k] = a[:, None, :]
    blocks[:, 1 + of, columns] = b
    if second_order:
        blocks[:, 1 + k:1 + 2 * k] = b[:, None, :]
        blocks[:, 1 + k + of, columns] = a
    blocks[:, -1] = b
    return blocks.reshape(-1, d)
