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


def hash_rows(matrix: np.ndarray, context: bytes) -> np.ndarray:
    """One int64 identity per row: the context's hash folded with each value of the row."""
    seed = np.uint64(int.from_bytes(hashlib.sha256(context).digest()[:8], "little"))
    bits = canonical_bits(matrix.reshape(len(matrix), -1))
    with np.errstate(over="ignore"):
        h = np.full(len(bits), seed, dtype=np.uint64)
        for column in bits.T:
            h = mix(h + _GOLDEN + column)
        h = separate_replicates(h)
    return h.view(np.int64)


def separate_replicates(h: np.ndarray) -> np.ndarray:
    """Give the k-th repeat of an identical row its own identity (k folded into the hash)."""
    order = np.argsort(h, kind="stable")
    sorted_h = h[order]
    repeat = np.zeros(len(h), dtype=np.uint64)
    starts = np.r_[True, sorted_h[1:] != sorted_h[:-1]]
    if starts.all():
        return h
    group_start = np.maximum.accumulate(np.where(starts, np.arange(len(h)), 0))
    repeat[order] = (np.arange(len(h)) - group_start).astype(np.uint64)
    out = h.copy()
    again = repeat > 0
    out[again] = mix(h[again] ^ mix(repeat[again] * _GOLDEN))
    return out


def context_bytes(parts: dict) -> bytes:
    """Canonical bytes of what every run of a study shares (sorted-key JSON)."""
    return json.dumps(parts, sort_keys=True, default=str).encode()
