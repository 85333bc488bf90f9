"""pyarrow arrays made from numpy arrays and Python strings, and numpy arrays read back, without
going through `pyarrow.array`, `pyarrow.scalar` or `to_numpy`: each of those imports pandas
(0.3 s of CPU) the first time, in a process that otherwise never needs it."""

from __future__ import annotations

from typing import Any

import numpy as np

# pyarrow is imported inside each function, by the caller's choice to use it (csv_table, runs_csv).


def numeric(values: np.ndarray) -> Any:
    """A pyarrow array of a 1-D numpy array of float64, int64 or int32 (no nulls), sharing its
    memory."""
    import pyarrow as pa  # type: ignore[import-untyped]

    values = np.ascontiguousarray(values)
    kind = {np.dtype(np.float64): pa.float64(), np.dtype(np.int64): pa.int64(),
            np.dtype(np.int32): pa.int32()}[values.dtype]
    return pa.Array.from_buffers(kind, len(values), [None, pa.py_buffer(values)])


def boolean(values: np.ndarray) -> Any:
    """A pyarrow boolean array of a 1-D numpy array of bool."""
    import pyarrow as pa

    bits = np.packbits(np.asarray(values, bool), bitorder="little")
    return pa.Array.from_buffers(pa.bool_(), len(values), [None, pa.py_buffer(bits)])


def strings(texts: list[str]) -> Any:
    """A pyarrow string array of Python strings (no nulls; under 2 GB in all)."""
    import pyarrow as pa

    encoded = [text.encode("utf-8") for text in texts]
    offsets = np.zeros(len(encoded) + 1, np.int64)
    np.cumsum([len(item) for item in encoded], out=offsets[1:])
    if offsets[-1] >= 2**31:
        raise ValueError("strings of 2 GB or more")
    return pa.Array.from_buffers(pa.string(), len(encoded), [
        None, pa.py_buffer(offsets.astype(np.int32)), pa.py_buffer(b"".join(encoded))])


def text(value: str) -> Any:
    """A pyarrow string scalar (a separator, a replacement) without pyarrow.scalar."""
    return strings([value])[0]


def float_values(chunked: Any) -> np.ndarray:
    """The float64 values of a pyarrow (chunked) array without nulls, as one numpy array."""
    chunks = getattr(chunked, "chunks", [chunked])
    parts = [np.frombuffer(chunk.buffers()[1], np.float64, len(chunk), chunk.offset * 8)
             for chunk in chunks]
    if any(chunk.null_count for chunk in chunks):
        raise ValueError("nulls among the values")
    return parts[0] if len(parts) == 1 else np.concatenate(parts) if parts else np.zeros(0)


def distinct_codes(values: np.ndarray) -> tuple[list[Any], np.ndarray]:
    """The distinct values of a 1-D array (numbers, or strings and None; in runs of equal values,
    as a store's batches record them) and each value's index among them (int32): one comparison
    of neighbours, then a Python step per run of equal values, not per value."""
    n = len(values)
    if not n:
        return [], np.zeros(0, np.int32)
    change = values[1:] != values[:-1]
    if values.dtype.kind == "f":  # a run of NaN (durations not known) is one run too
        change &= ~(np.isnan(values[1:]) & np.isnan(values[:-1]))
    starts = np.flatnonzero(np.concatenate([[True], change]))
    index: dict[Any, int] = {}
    heads = [index.setdefault(value, len(index)) for value in values[starts].tolist()]
    codes = np.repeat(np.asarray(heads, np.int32), np.diff(np.append(starts, n)))
    return list(index), codes
