"""Runs as columns: what the store reads back, what a plan collects in memory, what runs.csv is.

Columns rather than rows, so that a study of a million runs costs numpy operations, not a
million Python tuples; runs.csv is formatted column by column for the same reason.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from pathlib import Path
from typing import Iterable

import numpy as np

CSV_FIXED = ("run", "id", "status", "error", "duration", "worker")
CSV_ROWS = 1 << 16  # rows formatted at a time


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

    @classmethod
    def concat(cls, tables: list["RunTable"], parameters: int, quantities: int) -> "RunTable":
        """One table of the rows of several."""
        tables = [cls.blank(np.zeros(0, np.int64), np.zeros((0, parameters)), quantities), *tables]
        return cls(*(np.concatenate([getattr(t, name) for t in tables]) for name in FIELDS))

    def __len__(self) -> int:
        return len(self.ids)

    def take(self, rows: np.ndarray) -> "RunTable":
        """The given rows, as a table of their own."""
        return RunTable(*(getattr(self, name)[rows] for name in FIELDS))

    def put(self, rows: np.ndarray, other: "RunTable") -> None:
        """Copy what was recorded of the runs of `other` into the given rows of this table (the
        ids and inputs, which a plan knows before its runs, stay)."""
        if self.values.shape[1] != other.values.shape[1]:  # quantities named by the first batch
            self.values = np.full((len(self), other.values.shape[1]), np.nan)
        for name in RECORDED:
            getattr(self, name)[rows] = getattr(other, name)


FIELDS = tuple(f.name for f in fields(RunTable))
RECORDED = ("found", "ok", "errors", "duration", "worker", "values")


def objects(items) -> np.ndarray:
    """A 1-d object array of the given items (strings, None), whatever they are."""
    items = list(items)
    array = np.empty(len(items), dtype=object)
    array[:] = items
    return array


def write_csv(path: Path, parameters: list[str], quantities: list[str],
              tables: Iterable[tuple[int, RunTable]]) -> None:
    """runs.csv: one row per recorded run, `run` being its position in the plan; written
    whole or not at all."""
    from .outputs import replacing

    with replacing(path) as temporary, open(temporary, "w", newline="") as handle:
        handle.write(",".join(csv_field(c) for c in (*CSV_FIXED, *parameters, *quantities)) + "\r\n")
        for start, table in tables:
            for part in range(0, len(table), CSV_ROWS):  # in slices: text costs ~60 bytes a field
                kept = part + np.flatnonzero(table.found[part:part + CSV_ROWS])
                if len(kept):
                    handle.write(csv_text(start, table, kept))


def csv_text(start: int, table: RunTable, kept: np.ndarray) -> str:
    """The CSV lines of some rows of a table."""
    columns = [
        list(map(str, (kept + start).tolist())),
        list(map(str, table.ids[kept].tolist())),
        ["ok" if ok else "failed" for ok in table.ok[kept].tolist()],
        [csv_field(e) if e is not None else "" for e in table.errors[kept].tolist()],
        few_values(table.duration[kept], float_text),
        few_values(table.worker[kept], lambda w: "" if w is None else csv_field(str(w))),
        *(float_column(column) for column in table.inputs[kept].T),
        *(float_column(column) for column in table.values[kept].T),
    ]
    return "\r\n".join(map(",".join, zip(*columns))) + "\r\n"


def float_column(values: np.ndarray) -> list[str]:
    """Floats as Python writes them (shortest round-trip form); NaN as an empty field."""
    text = list(map(float.__repr__, values.tolist()))
    for i in np.flatnonzero(np.isnan(values)).tolist():
        text[i] = ""
    return text


def float_text(value: float) -> str:
    return "" if value != value else repr(float(value))


def few_values(values: np.ndarray, text) -> list[str]:
    """A column with few distinct values (a batch's duration or worker): each formatted once."""
    cache: dict = {}
    return [cache[v] if v in cache else cache.setdefault(v, text(v)) for v in values.tolist()]


def csv_field(text: str) -> str:
    """One CSV field, quoted as Python's csv module does when it holds a comma, quote or newline."""
    if any(c in text for c in ',"\r\n'):
        return '"' + text.replace('"', '""') + '"'
    return text
