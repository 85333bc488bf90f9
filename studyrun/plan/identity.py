"""Run identity: a 64-bit hash of the study's run context and a run's parameter values.

A run planned again is found in the store by its identity and reused; identical rows (replicated
centre points) get distinct identities by their occurrence.
"""

from __future__ import annotations

import hashlib
import json

import numpy as np

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


def hash_rows(matrix: np.ndarray, context: bytes, earlier: Occurrences | None = None,
              more: np.ndarray | None = None) -> np.ndarray:
    """One int64 identity per row: the context's hash folded with each value of the row (then
    of the same row of `more`, as if its columns followed the matrix's); repeats are numbered
    after those of the design's `earlier` slices, so a design's identities are the same whether
    it is planned whole or slice by slice."""
    seed = np.uint64(int.from_bytes(hashlib.sha256(context).digest()[:8], "little"))
    if not len(matrix):
        return np.zeros(0, np.int64)
    columns = [*matrix.reshape(len(matrix), -1).T,
               *(() if more is None else more.reshape(len(matrix), -1).T)]
    with np.errstate(over="ignore"):
        h = np.full(len(matrix), seed, dtype=np.uint64)
        for column in columns:  # a column's bits at a time, not a copy of the whole design
            h = mix(h + _GOLDEN + canonical_bits(column))
        h = separate_replicates(h, earlier)
    return h.view(np.int64)


class Occurrences:
    """How often each row hash appeared in the slices of a design planned so far: sorted keys and
    their counts (12 bytes a distinct row), or the keys alone (8 bytes) while every count is 1,
    as in any design of continuous draws."""

    def __init__(self) -> None:
        self.keys = np.zeros(0, np.uint64)
        self.counts: np.ndarray | None = None  # None: each key occurred once

    def before(self, keys: np.ndarray) -> np.ndarray:
        """The number of earlier occurrences of each of these sorted hashes."""
        if not len(self.keys):
            return np.zeros(len(keys), np.uint64)
        at = np.minimum(np.searchsorted(self.keys, keys), len(self.keys) - 1)
        counts = self.counts[at] if self.counts is not None else 1
        return np.where(self.keys[at] == keys, counts, 0).astype(np.uint64)

    def add(self, keys: np.ndarray, counts: np.ndarray) -> None:
        """Count a slice's distinct hashes (sorted) and how often each occurred in it."""
        counts = counts.astype(np.uint32)
        once = bool((counts == 1).all())
        if not len(self.keys):
            self.keys, self.counts = keys, None if once else counts
            return
        merged = np.concatenate([self.keys, keys])
        merged.sort(kind="stable")  # two sorted runs: merged in linear time (np.union1d hashes)
        repeats = merged[1:] == merged[:-1]
        if self.counts is None and once and not repeats.any():
            self.keys = merged
            return
        earlier = self.counts if self.counts is not None else np.ones(len(self.keys), np.uint32)
        merged = merged[np.r_[True, ~repeats]]
        total = np.zeros(len(merged), np.uint32)
        total[np.searchsorted(merged, self.keys)] += earlier
        total[np.searchsorted(merged, keys)] += counts
        self.keys, self.counts = merged, total


def separate_replicates(h: np.ndarray, earlier: Occurrences | None = None) -> np.ndarray:
    """Give the k-th repeat of an identical row its own identity (k folded into the hash), k
    counting the repeats in `earlier` slices of the design too. Repeats are found by sorting
    the hashes (a SIMD sort, ten times an argsort); only a design with repeats pays for the
    stable argsort that numbers them in row order."""
    sorted_h = np.sort(h)
    starts = np.r_[True, sorted_h[1:] != sorted_h[:-1]]
    positions = np.flatnonzero(starts)
    seen = None
    if earlier is not None:
        keys = sorted_h[positions]
        seen = earlier.before(keys)
        earlier.add(keys, np.diff(np.r_[positions, len(h)]))
    if len(positions) == len(h) and (seen is None or not seen.any()):
        return h
    group = np.cumsum(starts) - 1  # each sorted position's group of equal hashes
    within = np.arange(len(h)) - positions[group]
    if seen is not None:
        within = within.astype(np.uint64) + seen[group]
    repeat = np.zeros(len(h), dtype=np.uint64)
    repeat[np.argsort(h, kind="stable")] = within
    out = h.copy()
    again = repeat > 0
    out[again] = mix(h[again] ^ mix(repeat[again] * _GOLDEN))
    return out


def context_bytes(parts: dict) -> bytes:
    """Canonical bytes of what every run of a study shares (sorted-key JSON)."""
    return json.dumps(parts, sort_keys=True, default=str).encode()
