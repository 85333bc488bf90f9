"""Numbers: as JSON holds them (NaN and infinities have no JSON form, so they become null), and
found fast in sorted arrays."""

from __future__ import annotations

import math
from typing import Any

import numpy as np


def finite_or_none(value: Any) -> float | None:
    """A plain float (numpy scalars unwrapped), or None for NaN and infinities."""
    value = float(value)
    return value if math.isfinite(value) else None


def sorted_search(haystack: np.ndarray, needles: np.ndarray) -> np.ndarray:
    """np.searchsorted(haystack, needles), the needles looked up in increasing order: each
    search then starts where the last ended, several times faster for a million needles."""
    if len(needles) < 4096:
        return np.searchsorted(haystack, needles)
    order = np.argsort(needles)
    where = np.empty(len(needles), np.int64)
    where[order] = np.searchsorted(haystack, needles[order])
    return where
