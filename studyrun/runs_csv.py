"""runs.csv: every recorded run of a plan, one row each, formatted column by column.

Column by column rather than row by row, so that a study of a million runs costs numpy
operations, not a million Python tuples.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterable

import numpy as np

from .core.runtable import CSV_FIXED, RunTable
from .outputs import replacing

CSV_CELLS = 1 << 20  # fields formatted at a time (as text, ~60-80 bytes each): rows of a
# thousand parameters come a thousand at a time, not 65,536 (5 GB of strings)


def write_csv(path: Path, parameters: list[str], quantities: list[str],
              tables: Iterable[tuple[int, RunTable]]) -> None:
    """runs.csv: one row per recorded run, `run` being its position in the plan; written
    whole or not at all."""
    header = (*CSV_FIXED, *parameters, *quantities)
    rows = max(1, CSV_CELLS // len(header))
    with replacing(path) as temporary, open(temporary, "w", newline="") as handle:
        handle.write(",".join(map(csv_field, header)) + "\r\n")
        for start, table in tables:
            for part in range(0, len(table), rows):
                kept = part + np.flatnonzero(table.found[part:part + rows])
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
