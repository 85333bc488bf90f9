"""Runs as columns: what the store reads back and what a plan collects in memory.

Columns rather than rows, so that a study of a million runs costs numpy operations, not a
million Python tuples; runs.csv is formatted column by column for the same reason.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Iterable

import numpy as np

CSV_FIXED = ("run.index", "run.id", "run.status", "run.error", "run.duration", "run.worker")
# runs.csv's own columns: a parameter's or quantity's name has no dot, so any name a model uses
# (`id`, `duration`, `time`) is free for the study's own columns
OWN = "run."  # what names a column of studyrun's own
LEGACY_FIXED = ("run", "id", "status", "error", "duration", "worker")  # runs.csv format 2 and before


def own_columns(header: list[str]) -> dict[str, int]:
    """Where studyrun's own columns are in a CSV's header, by their present names (`run.status`
    ...): every column named `run.` something, or the first six of a runs.csv written before
    they were (format 2 and earlier: `run,id,status,error,duration,worker`)."""
    if tuple(header[:len(LEGACY_FIXED)]) == LEGACY_FIXED:
        return dict(zip(CSV_FIXED, range(len(LEGACY_FIXED))))
    return {name: i for i, name in enumerate(header) if name.startswith(OWN)}


@dataclass
class RunTable:
    """Some runs: identity, whether recorded and succeeded, error, timing, inputs and values."""

    ids: np.ndarray  # int64 (n,)
    found: np.ndarray  # bool: the store holds a record of the run
    ok: np.ndarray  # bool: ... and it succeeded
    errors: np.ndarray  # object (n,): str or None
    duration: np.ndarray  # float (n,): seconds per run of its batch
    worker: np.ndarray  # object (n,): str or None
    inputs: np.ndarray  # (n, parameters)
    values: np.ndarray  # (n, quantities), NaN where failed or absent

    @classmethod
    def blank(cls, ids: np.ndarray, inputs: np.ndarray, quantities: int) -> "RunTable":
        """Runs with nothing recorded yet."""
        n = len(ids)
        inputs = np.asarray(inputs, dtype=float)
        return cls(ids=np.asarray(ids, dtype=np.int64), found=np.zeros(n, bool),
                   ok=np.zeros(n, bool), errors=np.full(n, None, dtype=object),
                   duration=np.full(n, np.nan), worker=np.full(n, None, dtype=object),
                   inputs=inputs if inputs.ndim == 2 else inputs.reshape(n, -1),
                   values=np.full((n, quantities), np.nan))

    def __len__(self) -> int:
        return len(self.ids)

    def take(self, rows: np.ndarray) -> "RunTable":
        """The given rows, as a table of their own."""
        return RunTable(*(getattr(self, name)[rows] for name in FIELDS))


FIELDS = tuple(f.name for f in fields(RunTable))


def objects(items: Iterable[object]) -> np.ndarray:
    """A 1-d object array of the given items (strings, None), whatever they are; such an array
    itself as it is."""
    if isinstance(items, np.ndarray) and items.dtype == object and items.ndim == 1:
        return items
    items = items if isinstance(items, (list, tuple)) else list(items)
    # fromiter: ~8x faster than filling an empty array (15 ms for a million Nones)
    return np.fromiter(items, dtype=object, count=len(items))

