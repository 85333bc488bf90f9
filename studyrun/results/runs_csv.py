"""runs.csv: every recorded run of a plan, one row each, formatted column by column.

Column by column rather than row by row, so that a study of a million runs costs numpy
operations, not a million Python tuples. Text cells a spreadsheet would run as a formula get a
single quote before them (csv_table.escape_text); numbers are written as they are.
"""

from __future__ import annotations

import functools
import os
import shutil
import sys
import threading
from pathlib import Path
from typing import Iterable

import numpy as np

from studyrun.core import arrow
from studyrun.core.csv_table import escape_text
from studyrun.core.isolated import IsolatedExecutor
from studyrun.core.runtable import CSV_FIXED, RunTable
from studyrun.results.outputs import PARTIAL, replacing
from studyrun.store.run_store import RunStore

CSV_CELLS = 1 << 20  # fields formatted at a time (as text, ~60-80 bytes each): runs of a
# thousand parameters come a thousand at a time, not 65,536 (5 GB of strings)
CSV_FORMAT = 3  # the layout of runs.csv: a file written by another layout is written again
# (2: text cells a spreadsheet would run start with a quote; 3: studyrun's own columns are
# `run.index`, `run.id`, ... so that a model's `id` or `duration` is a column like any other)
ARROW_CELLS = 1 << 19  # numbers that pay for importing pyarrow (~0.3 s) to format them


def write_csv(path: Path, parameters: list[str], quantities: list[str],
              tables: Iterable[tuple[int, RunTable]]) -> None:
    """runs.csv: one row per recorded run, `run.index` being its position in the plan; written
    whole or not at all."""
    with replacing(path) as temporary, open(temporary, "wb") as handle:
        handle.write(header(parameters, quantities).encode())
        for start, table in tables:
            write_rows(handle, start, table)


def header(parameters: list[str], quantities: list[str]) -> str:
    return ",".join(csv_field(c) for c in (*CSV_FIXED, *parameters, *quantities)) + "\r\n"


def write_rows(handle, start: int, table: RunTable) -> None:
    """The lines of a table's recorded runs, the first at plan position `start`, into a binary
    file (UTF-8)."""
    rows = max(1, CSV_CELLS // (len(CSV_FIXED) + table.inputs.shape[1] + table.values.shape[1]))
    if table.inputs.size + table.values.size >= ARROW_CELLS:  # pays for pyarrow, part by part
        try:
            import pyarrow.compute  # noqa: F401
        except ImportError:
            pass
    for part in range(0, len(table), rows):
        kept = part + np.flatnonzero(table.found[part:part + rows])
        if len(kept):
            handle.write(csv_text(start, table, kept))


def write_part(store: Path, start: int, seqs: np.ndarray, path: str) -> None:
    """The lines of the runs recorded at `seqs` (plan positions start, start + 1, ...), read
    from the store at `store`, into the file `path` (in a helper process)."""
    with RunStore.open_readonly(store, check=False) as reader:
        table = reader.read_seqs(seqs)
    with open(path, "wb") as handle:
        write_rows(handle, start, table)


class WritingInParallel:
    """runs.csv of a plan of several chunks, each chunk's lines written by one of a few helper
    processes (IsolatedExecutor) while this process goes on (the analysis), then joined in
    order; whole or not at all, like write_csv."""

    def __init__(self, path: Path, store: Path, parameters: list[str], quantities: list[str],
                 parts: list[tuple[int, np.ndarray]], processes: int) -> None:
        self.path, self.store, self.head = Path(path), Path(store), header(parameters, quantities)
        self.files = [self.path.with_name(f".{self.path.name}.{os.getpid()}.{i}{PARTIAL}")
                      for i in range(len(parts))]
        self.pending = list(zip(parts, self.files))
        self.lock, self.errors = threading.Lock(), []
        self.executors = [IsolatedExecutor() for _ in range(min(processes, len(parts)))]
        self.threads = [threading.Thread(target=self.work, args=(e,), daemon=True)
                        for e in self.executors]

    def __enter__(self) -> "WritingInParallel":
        for thread in self.threads:
            thread.start()
        return self

    def work(self, executor: IsolatedExecutor) -> None:
        try:
            while True:
                with self.lock:
                    if not self.pending or self.errors:
                        return
                    (start, seqs), file = self.pending.pop(0)
                executor.submit(write_part, self.store, start, seqs, str(file)).result()
        except BaseException as error:
            self.errors.append(error)
        finally:
            executor.close()

    def __exit__(self, kind, value, tb) -> None:
        try:
            if kind is not None:  # the block failed: the helpers stop at once
                self.pending = []
                for executor in self.executors:
                    executor.stop(grace=0)
            for thread in self.threads:
                thread.join()
            if kind is None and self.errors:
                raise self.errors[0]
            if kind is None:
                with replacing(self.path) as temporary, open(temporary, "wb") as handle:
                    handle.write(self.head.encode())
                    for file in self.files:
                        with open(file, "rb") as part:
                            shutil.copyfileobj(part, handle, 1 << 24)
        finally:
            for file in self.files:
                file.unlink(missing_ok=True)


def csv_text(start: int, table: RunTable, kept: np.ndarray) -> bytes:
    """The CSV lines of some rows of a table, in UTF-8."""
    numbers = np.concatenate([table.inputs[kept], table.values[kept]], axis=1)
    text = arrow_text(start, table, kept, numbers)
    if text is not None:
        return text
    columns = [
        list(map(str, (kept + start).tolist())),
        list(map(str, table.ids[kept].tolist())),
        ["ok" if ok else "failed" for ok in table.ok[kept].tolist()],
        few_values(table.errors[kept], error_text),
        few_values(table.duration[kept], float_text),
        few_values(table.worker[kept], worker_text),
    ]
    columns += [float_column(column) for column in numbers.T]
    return ("\r\n".join(map(",".join, zip(*columns))) + "\r\n").encode()


def arrow_text(start: int, table: RunTable, kept: np.ndarray, numbers: np.ndarray) -> bytes | None:
    """The lines csv_text writes, joined by pyarrow (the floats in shortest round-trip digits,
    as Python's, by float_strings; studyrun's own columns each distinct value once), several
    times faster; None without pyarrow. Python formats the cells float_strings may write in
    another form (outside 1e-4 to 1e16, whole numbers, NaN and inf: '1e-05', '')."""
    if numbers.size < ARROW_CELLS and "pyarrow.compute" not in sys.modules:
        return None
    try:
        import pyarrow as pa
        import pyarrow.compute as pc
    except ImportError:
        return None
    rows, width = numbers.shape
    if not width:
        return None
    values = numbers.ravel()  # row after row
    text = float_strings(values)
    size = np.abs(values)
    low, high = plain_magnitudes()
    same = (size >= max(1e-4, low)) & (size < min(1e16, high))  # both write digits and a point
    same &= values != np.floor(values)  # ... and a whole number, in some form, in each
    other = ~same
    if other.any():
        cells = values[other].tolist()
        text = pc.replace_with_mask(text, arrow.boolean(other), arrow.strings(
            ["" if v != v else float.__repr__(v) for v in cells]))
    comma = arrow.text(",")
    lines = pc.binary_join(pa.ListArray.from_arrays(arrow.numeric(np.arange(
        0, rows * width + 1, width, dtype=np.int32)), text), comma)
    lines = pc.binary_join_element_wise(lines, arrow.text(""), arrow.text("\r\n"))
    own = [pc.cast(arrow.numeric(kept + start), pa.string()),
           pc.cast(arrow.numeric(table.ids[kept]), pa.string()),
           pc.take(arrow.strings(["failed", "ok"]), arrow.numeric(table.ok[kept].astype(np.int32))),
           each_distinct(*arrow.distinct_codes(table.errors[kept]), error_text),
           each_distinct(*arrow.distinct_codes(table.duration[kept]), float_text),
           each_distinct(*arrow.distinct_codes(table.worker[kept]), worker_text)]
    lines = pc.binary_join_element_wise(*own, lines, comma)
    offsets = np.frombuffer(lines.buffers()[1], np.int32)[lines.offset:lines.offset + rows + 1]
    return memoryview(lines.buffers()[2])[offsets[0]:offsets[-1]].tobytes()


def float_strings(values: np.ndarray):
    """Floats as a pyarrow string array, each in the shortest digits that read back to it:
    orjson's (Ryu), five times faster than pyarrow's cast; NaN and inf as 'null'."""
    import orjson
    import pyarrow as pa

    n = len(values)
    text = orjson.dumps(np.ascontiguousarray(values, np.float64),
                        option=orjson.OPT_SERIALIZE_NUMPY)[1:-1]  # "[1.5,0.25]" less [ and ]
    commas = np.flatnonzero(np.frombuffer(text, np.uint8) == ord(","))
    if len(commas) != max(n - 1, 0) or len(text) >= 2**31:
        raise ValueError("orjson wrote other than one number between commas")
    offsets = np.empty(n + 1, np.int64)  # each number's start once the commas are taken out
    offsets[0], offsets[-1] = 0, len(text) - len(commas)
    offsets[1:n] = commas - np.arange(len(commas))
    return pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(offsets.astype(np.int32)),
                                                  pa.py_buffer(text.replace(b",", b""))])


@functools.cache
def plain_magnitudes() -> tuple[float, float]:
    """The magnitudes [low, high) float_strings writes without an exponent, found by writing
    1.5 x each power of ten (the form is decided by the decimal exponent alone)."""
    powers = range(-30, 31)
    text = float_strings(np.array([1.5 * 10.0 ** p for p in powers])).to_pylist()
    plain = [p for p, cell in zip(powers, text) if "e" not in cell.lower()]
    low = high = 0
    while low - 1 in plain:
        low -= 1
    while high + 1 in plain:
        high += 1
    return (10.0 ** low, 10.0 ** (high + 1)) if 0 in plain else (1.0, 1.0)


def each_distinct(distinct: list, codes: np.ndarray, text):
    """Values given as their distinct values and each one's index among them (arrow.distinct_codes),
    as a pyarrow array of text(value), computed once a distinct value."""
    import pyarrow.compute as pc

    return pc.take(arrow.strings([text(v) for v in distinct]), arrow.numeric(codes))


def error_text(error: str | None) -> str:
    return "" if error is None else csv_field(escape_text(error))


def worker_text(worker: object) -> str:
    return "" if worker is None else csv_field(escape_text(str(worker)))


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
