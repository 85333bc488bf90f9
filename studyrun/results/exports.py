"""A results folder's exports of its runs (`execution.export`): runs.csv, and runs.parquet with
series.parquet, written from the store's records; each is kept while it is as it was written from
the same records (its stamp in the store), since records never change."""

from __future__ import annotations

import hashlib
import json
import os
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Protocol

import numpy as np

from studyrun.core.runtable import RunTable
from studyrun.results.runs_csv import CSV_FORMAT, WritingInParallel, write_csv
from studyrun.store.run_store import RunStore


class Runs(Protocol):
    """The runs of a plan as the exports read them (plan/runs.PlannedRuns)."""

    store: RunStore
    names: list[str]

    @property
    def chunked(self) -> bool: ...

    def seqs(self) -> np.ndarray: ...

    def parts(self) -> list[tuple[int, np.ndarray]]: ...

    def tables(self) -> Iterator[tuple[int, RunTable]]: ...


@contextmanager
def writing_exports(runs: Runs, folder: Path, export: list[str]) -> Iterator[None]:
    """The runs as `execution.export` asks: runs.csv (while the block runs, see writing_csv)
    and runs.parquet with series.parquet (after it); an export not asked for is removed, so
    none is left from an earlier run of the study."""
    remove_unexported(folder, export)
    if "csv" in export:
        with writing_csv(runs, Path(folder) / "runs.csv"):
            yield
    else:
        yield
    if "parquet" in export:
        write_parquets(folder, runs.names, runs.store, runs.tables, runs.seqs().tobytes())


@contextmanager
def writing_csv(runs: Runs, path: Path) -> Iterator[None]:
    """runs.csv, written while the block runs: by helper processes, a chunk each, for a plan of
    several chunks on a machine of several cores; otherwise after the block."""
    stamp = records_stamp(runs.seqs().tobytes(), CSV_FORMAT, runs.names, runs.store.quantities)
    processes = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1
    if up_to_date(path, stamp, runs.store, "runs_csv"):
        yield
        return
    if runs.chunked and processes > 1:
        with WritingInParallel(path, runs.store.path, runs.names, runs.store.quantities,
                               runs.parts(), processes):
            yield
    else:
        yield
        write_csv(path, runs.names, runs.store.quantities, runs.tables())
    runs.store.set_meta(runs_csv=file_stamp(path, stamp))


EXPORTED = {"csv": ("runs.csv",), "parquet": ("runs.parquet", "series.parquet")}


def remove_unexported(folder: Path, export: list[str]) -> None:
    """Remove the files of the formats `execution.export` no longer asks for, so that none is
    left from an earlier run of the study."""
    for kind, names in EXPORTED.items():
        if kind not in export:
            for name in names:
                (Path(folder) / name).unlink(missing_ok=True)


def write_parquets(folder: Path, names: list[str], store: RunStore, tables,
                   records: bytes) -> None:
    """runs.parquet, and series.parquet when the store keeps series, each kept as it is when
    written from these very records (its stamp in the store)."""
    from studyrun.results.runs_parquet import PARQUET_FORMAT, write_parquet, write_series_parquet

    stamp = records_stamp(records, PARQUET_FORMAT, names, store.quantities)
    path = Path(folder) / "runs.parquet"
    if not up_to_date(path, stamp, store, "runs_parquet"):
        write_parquet(path, names, store.quantities, tables())
        store.set_meta(runs_parquet=file_stamp(path, stamp))
    path = Path(folder) / "series.parquet"
    if not store.series_reader().longest():  # no series kept: no store-wide read for them
        path.unlink(missing_ok=True)
    elif not up_to_date(path, stamp, store, "series_parquet"):
        ids = np.concatenate([table.ids for _, table in tables()] + [np.zeros(0, np.int64)])
        if write_series_parquet(path, ids, store.series_reader()):
            store.set_meta(series_parquet=file_stamp(path, stamp))


def records_stamp(records: bytes, layout: int, names: list[str], quantities: list[str]) -> dict:
    """What an export of runs rests on: the records it was written from, and its layout."""
    return {"records": hashlib.sha256(records + json.dumps(
        [layout, names, quantities]).encode()).hexdigest()}


def up_to_date(path: Path, stamp: dict, store: RunStore, key: str) -> bool:
    """Whether the file is as it was written from these records (the store's meta `key`)."""
    written = file_stamp(path, stamp)
    return written is not None and written == store.meta(key)


def file_stamp(path: Path, stamp: dict) -> dict | None:
    """The stamp with the file's size and modification time; None for a missing file."""
    try:
        status = path.stat()
    except OSError:
        return None
    return {**stamp, "size": status.st_size, "mtime_ns": status.st_mtime_ns}
