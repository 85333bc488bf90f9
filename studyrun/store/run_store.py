"""The run store: every run of a study in one SQLite file, written a batch per transaction.

One process at a time holds a study's store (an exclusive lock file, released by the operating
system even when the process is killed), so a second process gets a clear error instead of a
corrupted file. WAL journaling makes each committed batch survive a SIGKILL of the driver.

A batch of runs is one record of the table `batches`: its runs' identities, status, inputs and
quantities as numpy arrays (little-endian bytes, a column after another), the failed runs'
errors as JSON, and the batch's duration per run and worker. Recording and reading runs back
therefore cost numpy time, not a Python tuple per run: ten million runs are written and read
in seconds. Runs are numbered in the order they were recorded (`seq`: a batch's `first`, then
one more per run); a run recorded again (a failure made again) is found at its latest number.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Iterator

import numpy as np

from studyrun.core.errors import StoreError
from studyrun.core.numbers import sorted_search
from studyrun.core.runtable import RunTable, objects
from studyrun.core.text import encodable
from studyrun.store import series as series_store

FORMAT = "3"  # a record per batch; a store of any other format is refused (`refuse_other`)
RECORD_BYTES = 1 << 26  # a batch's record holds at most this many bytes of inputs and quantities
Index = tuple[np.ndarray, np.ndarray, np.ndarray]  # run ids, their records' seqs, whether ok


@dataclass
class Batch:
    """The finished runs of one batch, as they are written to the store."""

    ids: np.ndarray  # int64 (n,)
    ok: np.ndarray  # bool (n,)
    errors: list[str | None] | np.ndarray  # or an object array of them
    inputs: np.ndarray  # (n, parameters)
    values: np.ndarray  # (n, quantities), NaN where failed
    duration: float  # seconds per run
    worker: str
    series: list[series_store.Block] | None = None  # the series kept, packed on the worker


class RunStore:
    """The runs.sqlite of one results folder; open it with `RunStore.open` (or `open_readonly`).

    Runs are found by id through an index held in memory (id -> seq, ok), read from the batches'
    identity arrays once and kept up to date by `write`; the batches' first numbers (`firsts`)
    say which record holds a given seq.
    """

    def __init__(self, path: Path, connection: sqlite3.Connection, lock: IO[str] | None) -> None:
        self.path = path
        self.db = connection
        self._lock = lock
        self.parameters: list[str] = []
        self.quantities: list[str] = []
        self._index: Index | None = None  # ids, seq, ok
        self._recent: list[Index] = []
        self._batches: tuple[np.ndarray, np.ndarray] | None = None  # record seq, first run seq
        # the last locate: its ids, the index, the answer
        self._located: tuple[np.ndarray, Index, tuple[np.ndarray, np.ndarray]] | None = None
        self._next_seq = 1
        self._leaves_journal = False  # a reader that made the -wal and -shm files, to remove

    @classmethod
    def open(cls, path: Path, *, fresh: bool = False, lock: bool = True) -> "RunStore":
        """Open (or create) the store at `path`, holding its lock; `fresh` deletes old runs."""
        path = Path(path)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            handle = acquire_lock(path) if lock else None
        except OSError as error:
            raise StoreError(f"{path.parent}: cannot write the results folder: {error.strerror}") from None
        if fresh:
            for suffix in ("", "-wal", "-shm"):
                Path(f"{path}{suffix}").unlink(missing_ok=True)
        try:
            db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            db.execute("PRAGMA cache_size=-131072")  # 128 MiB
            check_integrity(db, path)
            db.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT)")
        except sqlite3.DatabaseError as error:
            raise unreadable(path, error) from None
        return cls(path, db, handle)._ready()

    def _ready(self) -> "RunStore":
        """The store opened, once it is known to be of this layout, its columns and records
        read; closed if it is of another."""
        try:
            self._refuse_other()
        except StoreError:
            self.close()
            raise
        self._read_columns()
        self._count_records()
        return self

    @classmethod
    def open_readonly(cls, path: Path, check: bool = True) -> "RunStore":
        """Open an existing store for reading only, without its lock: it may be in use, or in a
        folder this process cannot write; `check=False` skips the pages' check, for a store
        this study has just checked."""
        path = Path(path)
        journal = [Path(f"{path}-wal"), Path(f"{path}-shm")]
        made_journal = not any(f.exists() for f in journal) and os.access(path.parent, os.W_OK)
        try:
            db = connect_readonly(path)
            if check:
                check_integrity(db, path)
            if db.execute("SELECT 1 FROM sqlite_master WHERE name = 'meta'").fetchone() is None:
                db.execute("CREATE TEMP TABLE meta (key TEXT PRIMARY KEY, value TEXT)")  # empty
            store = cls(path, db, None)
            store._leaves_journal = made_journal
            return store._ready()
        except sqlite3.DatabaseError as error:
            raise unreadable(path, error) from None

    def _refuse_other(self) -> None:
        """Refuse a store this studyrun does not write: another format (the row per run of
        development versions 1 and 2, or a newer one), or series kept as an npz per run."""
        found = self.meta("format")
        old_series = self.db.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'series'").fetchone()
        if found not in (None, FORMAT) or old_series:
            what = f"format {found}" if found not in (None, FORMAT) else "series as an npz per run"
            raise StoreError(f"{self.path}: a run store of another layout ({what}), which this "
                             f"studyrun (format {FORMAT}) does not read; run the study again into "
                             "a new folder (--out DIR), or here with --fresh")

    def _count_records(self) -> None:
        if self.meta("format") is not None:
            self._next_seq = self.db.execute(
                "SELECT coalesce(max(first + size), 1) FROM batches").fetchone()[0]

    def close(self) -> None:
        self.db.close()
        if self._leaves_journal:
            remove_journal(self.path)
        if self._lock is not None:
            release_lock(self._lock)
            self._lock = None

    def __enter__(self) -> "RunStore":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def meta(self, key: str, default: Any = None) -> Any:
        row = self.db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return default if row is None else json.loads(row[0])

    def set_meta(self, **values: Any) -> None:
        with self.transaction():
            self.db.executemany("INSERT OR REPLACE INTO meta VALUES (?, ?)",
                                [(k, json.dumps(v)) for k, v in values.items()])

    def record_identity(self, parts: dict[str, Any]) -> None:
        """Remember the context (files' digests, ...) this study's runs are made in, as the latest,
        so `studyrun plan` can say later what changed (a table of its own: the runs keep theirs)."""
        text = json.dumps(parts, sort_keys=True)
        with self.transaction():
            self.db.execute("CREATE TABLE IF NOT EXISTS identities "
                            "(seq INTEGER PRIMARY KEY, parts TEXT UNIQUE NOT NULL)")
            self.db.execute("DELETE FROM identities WHERE parts = ?", (text,))
            self.db.execute("INSERT INTO identities (parts) VALUES (?)", (text,))

    def _read_columns(self) -> None:
        self.parameters = self.meta("parameters", [])
        self.quantities = self.meta("quantities", [])

    def check(self, parameters: list[str], quantities: list[str] | None) -> None:
        """Refuse a store of runs with other parameters or quantities (None: not known yet)."""
        if self.meta("format") is not None and (
                self.parameters != parameters
                or (quantities is not None and self.quantities != quantities)):
            raise StoreError(
                f"{self.path}: holds runs of a study with parameters {self.parameters} and "
                f"quantities {self.quantities}, not {parameters} and "
                f"{'the model outputs' if quantities is None else quantities}; run with "
                "--fresh to start over, or --out to write elsewhere")

    def prepare(self, parameters: list[str], quantities: list[str]) -> None:
        """Create the tables for runs of these parameters and quantities, or check that an old
        store has them."""
        if self.meta("format") is not None:
            self.check(parameters, quantities)
            return
        self.parameters, self.quantities = parameters, quantities
        with self.transaction():
            self._create_tables()
        self.set_meta(format=FORMAT, parameters=parameters, quantities=quantities)

    def _create_tables(self) -> None:
        self.db.execute("CREATE TABLE batches (seq INTEGER PRIMARY KEY, first INTEGER NOT NULL, "
                        "size INTEGER NOT NULL, failed INTEGER NOT NULL, ids BLOB NOT NULL, "
                        "ok BLOB NOT NULL, inputs BLOB NOT NULL, outputs BLOB NOT NULL, "
                        "errors TEXT, duration REAL, worker TEXT)")
        series_store.create(self.db)

    def transaction(self) -> "_Transaction":
        return _Transaction(self.db)

    def write(self, batch: Batch) -> np.ndarray:
        """Record a finished batch in one transaction: all of it or, after a crash, none; the
        seqs its runs were recorded at, in its order."""
        n = len(batch.ids)
        worker = np.empty(n, dtype=object)
        worker.fill(batch.worker)
        return self._append(RunTable(
            ids=np.asarray(batch.ids, dtype=np.int64), found=np.ones(n, bool),
            ok=np.asarray(batch.ok, dtype=bool),
            errors=encodable_errors(objects(batch.errors)),
            duration=np.full(n, batch.duration), worker=worker,
            inputs=np.asarray(batch.inputs, dtype=float).reshape(n, len(self.parameters)),
            values=np.asarray(batch.values, dtype=float).reshape(n, len(self.quantities))),
            batch.series)

    def adopt(self, other: "RunStore", run_ids: np.ndarray) -> int:
        """Copy in the runs among `run_ids` that `other` (an earlier study's store) holds as
        succeeded and this one does not; an identity names what a run depends on, so the same
        identity is the same run. Returns how many were copied."""
        run_ids = np.unique(np.asarray(run_ids, dtype=np.int64))
        wanted = run_ids[other.succeeded_among(run_ids) & ~self.succeeded_among(run_ids)]
        if not len(wanted):
            return 0
        if self.meta("format") is None:
            self.prepare(other.parameters, other.quantities)
        if (self.parameters, self.quantities) != (other.parameters, other.quantities):
            return 0
        self._append(other.read(wanted), series_store.extract(other.db, wanted))
        return len(wanted)

    def _append(self, table: RunTable, series: list[series_store.Block] | None) -> np.ndarray:
        """Append runs in one transaction; each is found afterwards at its new record (the
        seqs returned)."""
        try:
            with self.transaction():
                seq = self._insert(table)
                if series:
                    series_store.write(self.db, series)
        except sqlite3.OperationalError as error:
            self._count_records()
            raise StoreError(f"{self.path}: cannot record runs ({error}); the runs recorded "
                             "before are intact, free space and run again to resume") from None
        self._recent.append((table.ids, seq, table.ok))
        return seq

    def _insert(self, table: RunTable) -> np.ndarray:
        """Insert a table's runs as records (within the caller's transaction); their seqs."""
        first = self._next_seq
        for rows in _record_parts(table, len(self.parameters) + len(self.quantities)):
            part = table.take(rows) if len(rows) < len(table) else table
            failed = np.flatnonzero(~part.ok)
            errors = (json.dumps([[i, part.errors[i]] for i in failed.tolist()])
                      if len(failed) else None)
            cursor = self.db.execute(
                "INSERT INTO batches (first, size, failed, ids, ok, inputs, outputs, errors, "
                "duration, worker) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (self._next_seq, len(part), len(failed), _blob(part.ids, "<i8"),
                 _blob(part.ok, "u1"), _blob(part.inputs.T, "<f8"), _blob(part.values.T, "<f8"),
                 errors, _number(part.duration[0]), part.worker[0]))
            if self._batches is not None:
                self._batches = (np.r_[self._batches[0], cursor.lastrowid],
                                 np.r_[self._batches[1], self._next_seq])
            self._next_seq += len(part)
        return np.arange(first, self._next_seq, dtype=np.int64)

    def locate(self, run_ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(seq, ok) of the latest record of each run; seq 0 where the store has none. The
        same array located again with no run recorded in between is answered from the last
        call (a plan is located before it runs and again after, reusing every run)."""
        index = self._merged_index()
        last = self._located
        if last is not None and last[0] is run_ids and last[1] is index:
            return last[2]
        ids, seqs, oks = index
        wanted = np.asarray(run_ids, dtype=np.int64)
        if not len(ids):
            found = np.zeros(len(wanted), np.int64), np.zeros(len(wanted), bool)
        else:
            where = np.minimum(sorted_search(ids, wanted), len(ids) - 1)
            hit = ids[where] == wanted
            found = np.where(hit, seqs[where], 0), hit & oks[where]
        self._located = (run_ids, index, found)
        return found

    def _merged_index(self) -> Index:
        """The id -> (seq, ok) index, sorted by id, the latest record of an id winning."""
        if self._index is None:
            parts = [(_array(ids, "<i8"), first + np.arange(size, dtype=np.int64),
                      _array(ok, "u1").astype(bool))
                     for first, size, ids, ok in self._query(
                         "SELECT first, size, ids, ok FROM batches ORDER BY seq")]
            ids, seqs, oks = (np.concatenate([p[k] for p in parts] + [empty[:0]])
                              for k, empty in enumerate(_EMPTY_INDEX))
            loaded = (ids, seqs, oks)
            newer = [part for part in self._recent if part[1][0] > loaded[1].max(initial=0)]
            self._index, self._recent = _EMPTY_INDEX, [loaded, *newer]
        if self._recent:
            # the index (sorted, older) then the newer parts in record order, each part sorted
            # by id: a stable sort merges these sorted runs (timsort) and keeps the later of
            # equal ids after the earlier
            parts = [self._index] if len(self._index[0]) else []
            for ids, seqs, oks in self._recent:
                order = np.argsort(ids, kind="stable")
                parts.append((ids[order], seqs[order], oks[order]))
            ids, seqs, oks = parts[0]  # the store read whole: one part, sorted already
            if len(parts) > 1:
                ids, seqs, oks = (np.concatenate([p[k] for p in parts]) for k in range(3))
                order = np.argsort(ids, kind="stable")
                ids, seqs, oks = ids[order], seqs[order], oks[order]
            last = np.r_[ids[1:] != ids[:-1], True] if len(ids) else np.zeros(0, bool)
            if not last.all():
                ids, seqs, oks = ids[last], seqs[last], oks[last]
            self._index, self._recent = (ids, seqs, oks), []
        return self._index

    def _query(self, sql: str, arguments: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        """Rows of an SQL query on the batches; none where the store has no runs yet."""
        if self.meta("format") is None:
            return []
        return self.db.execute(sql, arguments).fetchall()

    def release_index(self) -> None:
        """Let the index of runs by identity go (17 bytes a run): it is read again from the
        store, where every run recorded is, when it is next needed."""
        self._index, self._recent, self._located = None, [], None

    def recorded_ids(self) -> np.ndarray:
        """Every run identity the store holds a record of, sorted."""
        return self._merged_index()[0]

    def succeeded_among(self, run_ids: np.ndarray) -> np.ndarray:
        """Which of the given runs the store holds as succeeded (a bool mask in their order)."""
        return self.locate(run_ids)[1]

    def read(self, run_ids: np.ndarray, inputs: np.ndarray | None = None) -> RunTable:
        """The given runs in their order (not found where the store has none); their inputs
        are the given ones, or else the stored ones."""
        run_ids = np.asarray(run_ids, dtype=np.int64)
        table = self.read_seqs(self.locate(run_ids)[0])
        table.ids = run_ids.copy()
        if inputs is not None:
            table.inputs = np.asarray(inputs, dtype=float).reshape(len(run_ids), -1)
        return table

    def read_seqs(self, seqs: np.ndarray) -> RunTable:
        """The runs recorded at these seqs, in their order (not found where seq is 0)."""
        seqs = np.asarray(seqs, dtype=np.int64)
        table = RunTable.blank(np.zeros(len(seqs), np.int64),
                               np.full((len(seqs), len(self.parameters)), np.nan),
                               len(self.quantities))
        for record, first, positions in self._records_of(seqs):
            ids, ok, inputs, outputs, errors, duration, worker = self.db.execute(
                "SELECT ids, ok, inputs, outputs, errors, duration, worker FROM batches "
                "WHERE seq = ?", (record,)).fetchone()
            at, rows = _stretch(seqs[positions] - first), _stretch(positions)
            record_ids = _array(ids, "<i8")
            table.ids[rows] = record_ids[at]
            table.found[rows] = True
            table.ok[rows] = _array(ok, "u1")[at].astype(bool)
            table.inputs[rows] = _columns(inputs, len(self.parameters), len(record_ids))[:, at].T
            table.values[rows] = _columns(outputs, len(self.quantities), len(record_ids))[:, at].T
            table.duration[rows] = np.nan if duration is None else duration
            table.worker[rows] = worker
            if errors is not None:  # [[row, message], ...] of the record's failed runs
                failed = json.loads(errors)
                where = np.array([i for i, _ in failed], dtype=np.int64)
                at, rows = np.arange(len(record_ids))[at], np.arange(len(table))[rows]
                k = np.minimum(np.searchsorted(where, at), len(where) - 1)
                hit = where[k] == at
                table.errors[rows[hit]] = objects([encodable(str(message))  # a crafted store's too
                                                   for _, message in failed])[k[hit]]
        return table

    def _records_of(self, seqs: np.ndarray) -> Iterator[tuple[int, int, np.ndarray]]:
        """(record, its first seq, the positions of `seqs` it holds), record by record."""
        if self._batches is None:
            rows = self._query("SELECT seq, first FROM batches ORDER BY seq")
            table = np.array(rows, dtype=np.int64).reshape(-1, 2)
            self._batches = (table[:, 0], table[:, 1])
        records, firsts = self._batches
        found = np.flatnonzero(seqs > 0)
        where = np.searchsorted(firsts, seqs[found], side="right") - 1
        order = np.argsort(where, kind="stable")
        starts = np.flatnonzero(np.r_[True, np.diff(where[order]) != 0])
        for part in np.split(order, starts[1:]) if len(order) else []:
            b = int(where[part[0]])
            yield int(records[b]), int(firsts[b]), found[part]

    def recorded(self) -> tuple[np.ndarray, np.ndarray]:
        """The identity of every run the store holds, and whether its latest record succeeded."""
        ids, _, ok = self._merged_index()
        return ids, ok

    def latest_records(self, failed_only: bool = False, limit: int | None = None) -> RunTable:
        """The latest record of every run the store holds (or of those that failed), in the
        order they were recorded (the first `limit` of them)."""
        _, seqs, ok = self._merged_index()
        return self.read_seqs(np.sort(seqs[~ok] if failed_only else seqs)[:limit])

    def series_reader(self) -> series_store.Reader:
        """What reads the runs' stored series back (see series_store.Reader): one per store."""
        if getattr(self, "_series_reader", None) is None:
            self._series_reader = series_store.Reader(self.db)
        return self._series_reader

    def counts(self) -> dict[str, int]:
        """How many runs the store holds as succeeded (`ok`) and as failed, by their latest record."""
        _, _, ok = self._merged_index()
        succeeded = int(ok.sum())
        return {name: count for name, count in (("ok", succeeded), ("failed", len(ok) - succeeded))
                if count}

    def timing(self) -> tuple[float | None, int]:
        """The mean duration of a recorded run, and how many workers recorded runs."""
        rows = self._query("SELECT sum(duration * size) / sum(size), count(DISTINCT worker) "
                           "FROM batches WHERE duration IS NOT NULL")
        return rows[0] if rows else (None, 0)


def encodable_errors(errors: np.ndarray) -> np.ndarray:
    """Runs' errors (None where a run succeeded) as text SQLite and runs.csv can encode: a lone
    surrogate kept as its escape. Only the failed runs' errors are looked at (a million given
    runs that succeeded cost no Python step each); the caller's array is not changed."""
    failed = np.flatnonzero(np.not_equal(errors, np.array(None, object)))
    if not len(failed):
        return errors
    errors = errors.copy()
    errors[failed] = objects([encodable(error) for error in errors[failed]])
    return errors


def _blob(array: np.ndarray, dtype: str) -> np.ndarray:
    """An array as a blob of little-endian values of the given type, a column after another:
    SQLite copies it from the array's buffer (a copy of it as bytes first touched 40 MB more
    memory a million runs)."""
    return np.ascontiguousarray(array, dtype=dtype)


def _array(blob: bytes, dtype: str) -> np.ndarray:
    return np.frombuffer(blob, dtype=dtype)


def _columns(blob: bytes, width: int, size: int) -> np.ndarray:
    """A blob of `width` float64 columns of `size` runs, as an array with a row per column
    (none: a study of no quantities, only series() ones, or of no parameters)."""
    return np.frombuffer(blob, dtype="<f8").reshape(width, size)


def _stretch(index: np.ndarray) -> np.ndarray | slice:
    """Positions as a slice where they are one stretch in order (a record read whole: its rows
    then cost views and copies, not gathers and scatters), else as they are."""
    if len(index) > 1 and index[-1] - index[0] == len(index) - 1 and (np.diff(index) == 1).all():
        return slice(int(index[0]), int(index[-1]) + 1)
    return index


def _number(value: float) -> float | None:
    return None if value != value else float(value)


def _record_parts(table: RunTable, width: int) -> Iterator[np.ndarray]:
    """The rows of each record a table is stored as: a stretch of runs of one duration and
    worker, of at most RECORD_BYTES of inputs and quantities."""
    n = len(table)
    if not n:
        return
    duration = np.where(np.isnan(table.duration), -1.0, table.duration)
    change = np.flatnonzero((duration[1:] != duration[:-1]) | (table.worker[1:] != table.worker[:-1]))
    most = max(1, RECORD_BYTES // (8 * max(width, 1)))
    bounds = np.r_[0, change + 1, n]
    for start, stop in zip(bounds[:-1].tolist(), bounds[1:].tolist()):
        for part in range(start, stop, most):
            yield np.arange(part, min(part + most, stop))


def latest_identity(db: sqlite3.Connection) -> dict[str, Any] | None:
    """The context the latest run of a store was made in; None for a store without one."""
    try:
        row = db.execute("SELECT parts FROM identities ORDER BY seq DESC LIMIT 1").fetchone()
    except sqlite3.OperationalError as error:
        if "no such table" in str(error):
            return None
        raise
    return None if row is None else json.loads(row[0])


_EMPTY_INDEX: Index = (np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, bool))


class _Transaction:
    """BEGIN IMMEDIATE ... COMMIT, rolled back on any error."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self.db = db

    def __enter__(self) -> None:
        self.db.execute("BEGIN IMMEDIATE")

    def __exit__(self, kind: type[BaseException] | None, *rest: object) -> None:
        self.db.execute("ROLLBACK" if kind else "COMMIT")


def acquire_lock(path: Path) -> IO[str]:
    """Hold an exclusive lock next to the store, or fail at once with who holds it."""
    lock_path = Path(f"{path}.lock")
    handle = open(lock_path, "a+")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.seek(0)
        holder = handle.read().strip() or "another process"
        handle.close()
        raise StoreError(f"{path.parent}: another studyrun ({holder}) is using this results "
                         "folder; wait for it to finish, or use --out to write elsewhere") from None
    handle.seek(0)
    handle.truncate()
    handle.write(f"pid {os.getpid()}")
    handle.flush()
    return handle


def release_lock(handle: IO[str]) -> None:
    """Let the folder go; its lock file names no holder any more (`studyrun status` reads it)."""
    try:
        handle.seek(0)
        handle.truncate()
    except OSError:
        pass  # the lock is released all the same
    handle.close()


def connect_readonly(path: Path) -> sqlite3.Connection:
    """The store opened read-only. Reading a WAL store needs its shared-memory file (-shm): where
    the folder cannot be written (a read-only mount, another user's folder) and no writer left
    one, the store, all of it in runs.sqlite then, is opened as immutable."""
    path = Path(path)
    if not path.is_file():
        found = "a file, not a results folder" if path.parent.is_file() else "no runs.sqlite here"
        raise StoreError(f"{path.parent}: {found}; give the results folder of a study "
                         "(results/<name>, or the --out of its run)")
    uri = f"{path.resolve().as_uri()}?mode=ro"
    wal, shm = Path(f"{path}-wal"), Path(f"{path}-shm")
    if not shm.exists() and not os.access(path.parent, os.W_OK):
        if wal.exists() and wal.stat().st_size > 0:
            raise StoreError(f"{path}: its journal {wal.name} holds recorded runs that SQLite can "
                             f"read only where it may create {shm.name}, and {path.parent} cannot "
                             "be written; copy the folder somewhere writable and read the copy")
        uri += "&immutable=1"
    return sqlite3.connect(uri, uri=True, timeout=10, check_same_thread=False)


def remove_journal(path: Path) -> None:
    """Removes the -wal and -shm files a read-only connection made and cannot remove itself (a
    results folder tracked by DVC or Snakemake should look as `studyrun run` left it): the last
    connection to close a WAL store removes them, so one is opened for writing and closed. A
    study writing the store meanwhile keeps them, as SQLite's locks decide."""
    with contextlib.suppress(sqlite3.Error):
        db = sqlite3.connect(path, timeout=0)
        try:
            db.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchall()
        finally:
            db.close()


def unreadable(path: Path, error: sqlite3.DatabaseError) -> StoreError:
    """An SQLite error on opening or reading a store, as one line: a damaged store is said to be
    damaged; any other failure (permissions, a lock, a full disk) leaves the store be."""
    code = getattr(error, "sqlite_errorcode", None)
    damaged = (code & 0xFF in (SQLITE_CORRUPT, SQLITE_NOTADB) if code is not None
               else type(error) is sqlite3.DatabaseError)
    if damaged:
        return StoreError(f"{path}: the run store is corrupted or not a run store ({error}); its "
                          "runs cannot be trusted: move it away, or start over with --fresh")
    return StoreError(f"{path}: cannot open the run store ({error}); the store itself is left "
                      "as it is: check the folder's permissions and free space, and try again")


SQLITE_CORRUPT, SQLITE_NOTADB = 11, 26


def check_integrity(db: sqlite3.Connection, path: Path) -> None:
    """Refuse a store whose pages SQLite finds damaged."""
    result = db.execute("PRAGMA quick_check").fetchone()[0]
    if result != "ok":
        raise StoreError(f"{path}: the run store is corrupted ({result}); move it away, or start "
                         "over with --fresh")
