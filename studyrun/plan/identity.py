"""Run identity: a 64-bit hash of the study's run context and a run's parameter values.

A run planned again is found in the store by its identity and reused; identical rows (replicated
centre points) get distinct identities by their occurrence.
"""

from __future__ import annotations

import hashlib
import json

import numpy as np

from ..core.numbers import sorted_search

_MULTIPLIER = np.uint64(0xBF58476D1CE4E5B9)
_MULTIPLIER_2 = np.uint64(0x94D049BB133111EB)
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


def mix(h: np.ndarray) -> np.ndarray:
    """The splitmix64 finaliser over uint64 arrays: a fast, well-spread 64-bit hash step."""
    h = (h ^ (h >> np.uint64(30))) * _MULTIPLIER
    h = (h ^ (h >> np.uint64(27))) * _MULTIPLIER_2
    return h ^ (h >> np.uint64(31))


def canonical_bits(matrix: np.ndarray) -> np.ndarray:
    """Float64 values as uint64 bits with -0.0 folded into 0.0 and every NaN alike."""
    values = np.array(matrix, dtype=np.float64, copy=True)
    values[values == 0.0] = 0.0
    values[np.isnan(values)] = np.nan
    return values.view(np.uint64)


def hash_rows(matrix: np.ndarray, context: bytes, earlier: Occurrences | None = None) -> np.ndarray:
    """One int64 identity per row: the context's hash folded with each value of the row; repeats
    are numbered after those of the design's `earlier` slices, so a design's identities are the
    same whether it is planned whole or slice by slice."""
    seed = np.uint64(int.from_bytes(hashlib.sha256(context).digest()[:8], "little"))
    if not len(matrix):
        return np.zeros(0, np.int64)
    bits = canonical_bits(matrix.reshape(len(matrix), -1))
    with np.errstate(over="ignore"):
        h = np.full(len(bits), seed, dtype=np.uint64)
        for column in bits.T:
            h = mix(h + _GOLDEN + column)
        h = separate_replicates(h, earlier)
    return h.view(np.int64)


class Occurrences:
    """How often each row hash appeared in the slices of a design planned so far (sorted keys and
    their counts: 12 bytes a distinct row)."""

    def __init__(self) -> None:
        self.keys = np.zeros(0, np.uint64)
        self.counts = np.zeros(0, np.uint32)

    def before(self, h: np.ndarray) -> np.ndarray:
        """The number of earlier occurrences of each hash."""
        if not len(self.keys):
            return np.zeros(len(h), np.uint64)
        at = np.minimum(sorted_search(self.keys, h), len(self.keys) - 1)
        return np.where(self.keys[at] == h, self.counts[at], 0).astype(np.uint64)

    def add(self, keys: np.ndarray, counts: np.ndarray) -> None:
        """Count a slice's distinct hashes (sorted) and how often each occurred in it."""
        if not len(self.keys):
            self.keys, self.counts = keys, counts.astype(np.uint32)
            return
        merged = np.concatenate([self.keys, keys])
        merged.sort(kind="stable")  # two sorted runs: merged in linear time (np.union1d hashes)
        merged = merged[np.r_[True, merged[1:] != merged[:-1]]]
        total = np.zeros(len(merged), np.uint32)
        total[np.searchsorted(merged, self.keys)] += self.counts
        total[np.searchsorted(merged, keys)] += counts.astype(np.uint32)
        self.keys, self.counts = merged, total


def separate_replicates(h: np.ndarray, earlier: Occurrences | None = None) -> np.ndarray:
    """Give the k-th repeat of an identical row its own identity (k folded into the hash), k
    counting the repeats in `earlier` slices of the design too."""
    order = np.argsort(h, kind="stable")
    sorted_h = h[order]
    starts = np.r_[True, sorted_h[1:] != sorted_h[:-1]]
    if earlier is not None:
        positions = np.flatnonzero(starts)
        earlier_counts = earlier.before(h)
        earlier.add(sorted_h[positions], np.diff(np.r_[positions, len(h)]))
    else:
        earlier_counts = None
    if starts.all() and (earlier_counts is None or not earlier_counts.any()):
        return h
    group_start = np.maximum.accumulate(np.where(starts, np.arange(len(h)), 0))
    repeat = np.zeros(len(h), dtype=np.uint64)
    repeat[order] = (np.arange(len(h)) - group_start).astype(np.uint64)
    if earlier_counts is not None:
        repeat += earlier_counts
    out = h.copy()
    again = repeat > 0
    out[again] = mix(h[again] ^ mix(repeat[again] * _GOLDEN))
    return out


def context_bytes(parts: dict) -> bytes:
    """Canonical bytes of what every run of a study shares (sorted-key JSON)."""
    return json.dumps(parts, sort_keys=True, default=str).encode()
