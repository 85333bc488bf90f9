"""The plan step: a study's design of runs, the identity of every run, and its batches.

A run's identity is a 64-bit hash of the study's context (model, quantities, fixed inputs) and
the run's parameter values in canonical form, so a run planned again is found in the store and
reused. Identical rows (replicated centre points) get distinct identities by their occurrence.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field

import numpy as np

from .analyses.base import Design

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


@dataclass
class Plan:
    """Which runs a study makes: the design, the fixed inputs and each run's identity."""

    design: Design
    fixed: dict[str, float]  # inputs every run shares (fixed parameters)
    run_ids: np.ndarray  # int64, one per design row
    info: dict = field(default_factory=dict)

    @property
    def size(self) -> int:
        return len(self.run_ids)

    def inputs(self, rows: np.ndarray | slice) -> dict[str, np.ndarray]:
        """The model inputs of some rows: varied columns, then fixed values broadcast."""
        matrix = self.design.matrix[rows]
        inputs = {name: np.ascontiguousarray(matrix[:, j]) for j, name in enumerate(self.design.names)}
        n = len(matrix)
        for name, value in self.fixed.items():
            inputs[name] = np.full(n, value)
        return inputs


def make_plan(design: Design, fixed: dict[str, float], context: dict) -> Plan:
    """A plan from an analysis's design, the study's fixed inputs and its run context."""
    matrix = np.asarray(design.matrix, dtype=float).reshape(-1, len(design.names))
    design.matrix = matrix
    run_ids = hash_rows(matrix, context_bytes({**context, "fixed": fixed, "names": design.names}))
    return Plan(design=design, fixed=fixed, run_ids=run_ids)
