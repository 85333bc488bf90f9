"""The run store: every run of a study in one SQLite file, written a batch per transaction.

One process at a time holds a study's store (an exclusive lock file, released by the operating
system even when the process is killed), so a second process gets a clear error instead of a
corrupted file. WAL journaling makes each committed batch survive a SIGKILL of the driver.
"""

from __future__ import annotations

import fcntl
import json
import os
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import numpy as np

from . import series_store
from .core.errors import StoreError
from .core.runtable import RunTable, objects

FIXED_COLUMNS = ("seq", "id", "status", "error", "duration", "worker")
FORMAT = "2"  # 1: runs keyed by id; 2: runs appended in record order (seq), found by id in memory


def quote(name: str) -> str:
    """A column name as an SQL identifier."""
    return '"' + name.replace('"', '""') + '"'


def column_names(names: list[str]) -> list[str]:
    """The runs table's column for each parameter and quantity: its own name, unless SQLite, for
    which names differ only beyond case, would take it for a fixed column or an earlier one; then
    the name with `:2` (`:3`, ...) after it (`Duration` beside `duration`, `k` after `K`)."""
    taken = set(FIXED_COLUMNS)
    columns = []
    for name in names:
        column, k = name, 1
        while column.lower() in taken:
            k += 1
            column = f"{name}:{k}"
        taken.add(column.lower())
        columns.append(column)
    return columns


@dataclass
class Batch:
    """The finished runs of one batch, as they are written to the store."""

    ids: np.ndarray  # int64 (n,)
    ok: np.ndarray  # bool (n,)
    errors: list[str | None]
    inputs: np.ndarray  # (n, parameters)
    values: np.ndarray  # (n, quantities), NaN where failed
    duration: float  # seconds per run
    worker: str
    series: list[series_store.Block] | None = None  # the series kept, packed on the worker

    def table(self) -> RunTable:
        n = len(self.ids)
        return RunTable(ids=np.asarray(self.ids, dtype=np.int64), found=np.ones(n, bool),
                        ok=np.asarray(self.ok, dtype=bool),
                        errors=objects(self.errors), duration=np.full(n, float(self.duration)),
                        worker=objects([self.worker] * n),
                        inputs=np.asarray(self.inputs, dtype=float).reshape(n, -1),
                        values=np.asarray(self.values, dtype=float).reshape(n, -1))


class RunStore:
    """The runs.sqlite of one results folder; open it with `RunStore.open`.

    Runs are appended in the order they finish (`seq`, SQLite's rowid): appending is about twice
    as cheap as inserting into a B-tree keyed by a random 64-bit id. Runs are found by id through
    an index held in memory (id -> seq), read from the table once and kept up to date by `write`.
    """

    def __init__(self, path: Path, connection: sqlite3.Connection, lock) -> None:
        self.path = path
        self.db = connection
        self._lock = lock
        self.parameters: list[str] = []
        self.quantities: list[str] = []
        self.columns: dict[str, str] = {}  # a parameter's or quantity's column in `runs`
        self._index: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None  # ids, seq, ok
        self._recent: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        self._failed: set[int] | None = None  # ids whose record is a failure
        self._next_seq = 1

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
        store = cls(path, db, handle)
        store._read_columns()
        if store.meta("format") == "1":
            store._upgrade_from_1()
        store._count_records()
        return store

    @classmethod
    def open_readonly(cls, path: Path) -> "RunStore":
        """Open an existing store for reading only, without its lock: it may be in use, or in a
        folder this process cannot write (an old format is upgraded in a copy in memory)."""
        path = Path(path)
        try:
            db = connect_readonly(path)
            check_integrity(db, path)
            if db.execute("SELECT 1 FROM sqlite_master WHERE name = 'meta'").fetchone() is None:
                db.execute("CREATE TEMP TABLE meta (key TEXT PRIMARY KEY, value TEXT)")  # empty
            store = cls(path, db, None)
            store._read_columns()
            if store.meta("format") == "1":
                store.db = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
                db.backup(store.db)
                db.close()
                store._upgrade_from_1()
            store._count_records()
        except sqlite3.DatabaseError as error:
            raise unreadable(path, error) from None
        return store

    def _count_records(self) -> None:
        if self.meta("format") is not None:
            self._next_seq = 1 + self.db.execute("SELECT coalesce(max(seq), 0) FROM runs").fetchone()[0]

    def close(self) -> None:
        self.db.close()
        if self._lock is not None:
            release_lock(self._lock)
            self._lock = None

    def __enter__(self) -> "RunStore":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def meta(self, key: str, default=None):
        row = self.db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return default if row is None else json.loads(row[0])

    def set_meta(self, **values) -> None:
        with self.transaction():
            self.db.executemany("INSERT OR REPLACE INTO meta VALUES (?, ?)",
                                [(k, json.dumps(v)) for k, v in values.items()])

    def record_identity(self, parts: dict) -> None:
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
        self.columns = stored_columns(self.parameters, self.quantities, self.meta("columns"))

    def column(self, name: str) -> str:
        """A parameter's or quantity's column of `runs`, quoted for SQL."""
        return quote(self.columns[name])

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
        """Create the runs table for these columns, or check that an old one has them."""
        if self.meta("format") is not None:
            self.check(parameters, quantities)
            return
        self.parameters, self.quantities = parameters, quantities
        self.columns = stored_columns(parameters, quantities)
        with self.transaction():
            self._create_tables()
        self.set_meta(format=FORMAT, parameters=parameters, quantities=quantities,
                      columns=list(self.columns.values()))

    def _create_tables(self) -> None:
        columns = "".join(f", {quote(c)} REAL" for c in self.columns.values())
        self.db.execute("CREATE TABLE runs (seq INTEGER PRIMARY KEY, id INTEGER NOT NULL, "
                        f"status TEXT NOT NULL, error TEXT, duration REAL, worker TEXT{columns})")
        # failed runs are replaced when they are run again; only they need finding by id in SQL
        self.db.execute("CREATE INDEX runs_failed ON runs (id) WHERE status != 'ok'")
        series_store.create(self.db)

    def _upgrade_from_1(self) -> None:
        """A store of format 1 (runs keyed by id) rewritten in place as format 2."""
        with self.transaction():
            self.db.execute("ALTER TABLE runs RENAME TO runs_1")
            self._create_tables()
            self.db.execute("INSERT INTO runs SELECT NULL, * FROM runs_1 ORDER BY rowid")
            self.db.execute("DROP TABLE runs_1")
            self.db.execute("INSERT OR REPLACE INTO meta VALUES ('format', ?)", (json.dumps(FORMAT),))

    def transaction(self):
        return _Transaction(self.db)

    def write(self, batch: Batch) -> None:
        """Record a finished batch in one transaction: all of it or, after a crash, none."""
        n = len(batch.ids)
        self._append(RunTable(
            ids=np.asarray(batch.ids, dtype=np.int64), found=np.ones(n, bool),
            ok=np.asarray(batch.ok, dtype=bool), errors=objects(batch.errors),
            duration=np.full(n, batch.duration), worker=objects([batch.worker] * n),
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

    def _append(self, table: RunTable, series: list[series_store.Block] | None) -> None:
        """Append runs in one transaction, each replacing a failed record of the same run."""
        n = len(table)
        ids, ok = table.ids, table.ok
        seq = np.arange(self._next_seq, self._next_seq + n, dtype=np.int64)
        marks = ", ".join("?" * (6 + len(self.parameters) + len(self.quantities)))
        # SQLite stores NaN as NULL, which is what a failed run's quantities are.
        rows = zip(seq.tolist(), ids.tolist(), np.where(ok, "ok", "failed").tolist(),
                   table.errors.tolist(), table.duration.tolist(), table.worker.tolist(),
                   *table.inputs.T.tolist(), *table.values.T.tolist())
        replaced = self._replaced_failures(ids)
        try:
            with self.transaction():
                if len(replaced):
                    self.db.execute("DELETE FROM runs WHERE status != 'ok' AND id IN "
                                    "(SELECT value FROM json_each(?))", (json.dumps(replaced),))
                self.db.executemany(f"INSERT INTO runs VALUES ({marks})", rows)
                if series:
                    series_store.write(self.db, series)
        except sqlite3.OperationalError as error:
            raise StoreError(f"{self.path}: cannot record runs ({error}); the runs recorded "
                             "before are intact, free space and run again to resume") from None
        self._next_seq += n
        self._recent.append((ids, seq, ok))
        self._failed.difference_update(replaced)
        self._failed.update(ids[~ok].tolist())

    def _replaced_failures(self, ids: np.ndarray) -> list[int]:
        """Which of these runs the store holds as failed: their old rows give way to new ones."""
        if self._failed is None:
            self._failed = ({row[0] for row in self.db.execute(
                "SELECT id FROM runs WHERE status != 'ok'")} if self._next_seq > 1 else set())
        if not self._failed:
            return []
        return [i for i in ids.tolist() if i in self._failed]

    def locate(self, run_ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(seq, ok) of the latest record of each run; seq 0 where the store has none."""
        run_ids = np.asarray(run_ids, dtype=np.int64)
        ids, seqs, oks = self._merged_index()
        if not len(ids):
            return np.zeros(len(run_ids), np.int64), np.zeros(len(run_ids), bool)
        where = np.minimum(np.searchsorted(ids, run_ids), len(ids) - 1)
        hit = ids[where] == run_ids
        return np.where(hit, seqs[where], 0), hit & oks[where]

    def _merged_index(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The id -> (seq, ok) index, sorted by id, the latest record of an id winning."""
        if self._index is None:
            cursor = self.db.execute("SELECT id, seq, status = 'ok' FROM runs"
                                     if self.meta("format") is not None else "SELECT 1 WHERE 0")
            table = np.concatenate([np.array(rows, dtype=np.int64).reshape(-1, 3)  # in slices
                                    for rows in iter(lambda: cursor.fetchmany(65536), [])]
                                   + [np.zeros((0, 3), np.int64)])
            loaded = (table[:, 0], table[:, 1], table[:, 2].astype(bool))
            newer = [part for part in self._recent if part[1][0] > table[:, 1].max(initial=0)]
            self._index, self._recent = _EMPTY_INDEX, [loaded, *newer]
        if self._recent:
            parts = [self._index, *self._recent]
            ids, seqs, oks = (np.concatenate([p[k] for p in parts]) for k in range(3))
            order = np.lexsort((seqs, ids))
            ids, seqs, oks = ids[order], seqs[order], oks[order]
            last = np.r_[ids[1:] != ids[:-1], True] if len(ids) else np.zeros(0, bool)
            self._index, self._recent = (ids[last], seqs[last], oks[last]), []
        return self._index

    def succeeded_among(self, run_ids: np.ndarray) -> np.ndarray:
        """Which of the given runs the store holds as succeeded (a bool mask in their order)."""
        return self.locate(run_ids)[1]

    def read(self, run_ids: np.ndarray, inputs: np.ndarray | None = None) -> RunTable:
        """The given runs in their order (not found where the store has none); their inputs
        are the given ones, or else the stored ones."""
        run_ids = np.asarray(run_ids, dtype=np.int64)
        seq, _ = self.locate(run_ids)
        where = np.flatnonzero(seq > 0)
        stored = inputs is None
        if stored:
            inputs = np.full((len(run_ids), len(self.parameters)), np.nan)
        table = RunTable.blank(run_ids, inputs, len(self.quantities))
        if len(where):
            rows = self._select("runs.seq", "runs WHERE seq IN (SELECT value FROM json_each(?)) "
                                "ORDER BY seq", (json.dumps(seq[where].tolist()),))
            part = rows.table.take(np.searchsorted(rows.key, seq[where]))
            table.put(where, part)
            if stored:
                table.inputs[where] = part.inputs
        return table

    def _select(self, key: str, source: str, arguments: tuple) -> "_Rows":
        """Rows of runs from an SQL source (runs, or a join with it), each with a key column."""
        columns = "".join(f", runs.{self.column(c)}" for c in self.parameters + self.quantities)
        cursor = self.db.execute(
            f"SELECT {key}, runs.id, runs.status = 'ok', runs.error, runs.duration, "
            f"runs.worker{columns} FROM {source}", arguments)
        parts = [_Rows.of(rows, len(self.parameters), len(self.quantities))  # a slice at a time:
                 for rows in iter(lambda: cursor.fetchmany(65536), [])]     # rows cost ~300 B
        if len(parts) == 1:
            return parts[0]
        return _Rows(np.concatenate([p.key for p in parts] + [np.zeros(0, np.int64)]),
                     RunTable.concat([p.table for p in parts], len(self.parameters),
                                     len(self.quantities)))

    def add_planned(self, start: int, run_ids: np.ndarray) -> None:
        """Register a slice of the study's plan (positions start, start+1, ...) for the reads
        that span a plan too big for memory: chunks and streams of columns."""
        seq, _ = self.locate(run_ids)
        self.db.execute("CREATE TEMP TABLE IF NOT EXISTS planned "
                        "(position INTEGER PRIMARY KEY, seq INTEGER)")
        self.db.execute("BEGIN")
        try:
            if start == 0:
                self.db.execute("DELETE FROM planned")
            self.db.executemany("INSERT INTO planned VALUES (?, ?)",
                                zip(range(start, start + len(seq)), seq.tolist()))
        finally:
            self.db.execute("COMMIT")

    def read_planned(self, start: int, stop: int) -> RunTable:
        """The planned positions [start, stop), in plan order (inputs NaN where absent)."""
        table = RunTable.blank(np.zeros(stop - start, np.int64),
                               np.full((stop - start, len(self.parameters)), np.nan),
                               len(self.quantities))
        rows = self._select("planned.position", "planned JOIN runs ON runs.seq = planned.seq "
                            "WHERE planned.position >= ? AND planned.position < ?", (start, stop))
        where = rows.key - start
        table.put(where, rows.table)
        table.ids[where] = rows.table.ids
        table.inputs[where] = rows.table.inputs
        return table

    def planned_succeeded(self) -> int:
        return self.db.execute("SELECT count(*) FROM planned JOIN runs ON runs.seq = planned.seq "
                               "WHERE runs.status = 'ok'").fetchone()[0]

    def stream_planned(self, names: list[str], order_by: str | None = None,
                       rows: int = 65536) -> Iterator[np.ndarray]:
        """Columns of the planned runs the store holds, `rows` runs at a time, each time as an
        array of floats with a row per name (NaN for NULL: a failed run's quantities): in plan
        order, or in increasing order of the named column `order_by` (NaN first). A name is a
        parameter, a quantity, or as in runs.csv `run` (the position in the plan) or `status` (1
        for a run that succeeded, 0 for one that failed)."""
        fixed = {"run": "planned.position", "status": "runs.status = 'ok'"}
        selected = [fixed.get(name) or f"runs.{self.column(name)}" for name in names]
        order = "planned.position" if order_by is None else selected[names.index(order_by)]
        cursor = self.db.execute(f"SELECT {', '.join(selected)} FROM planned JOIN runs "
                                 f"ON runs.seq = planned.seq ORDER BY {order}")
        while chunk := cursor.fetchmany(rows):
            yield np.array(chunk, dtype=float).reshape(len(chunk), len(names)).T

    def series_reader(self) -> series_store.Reader:
        """What reads the runs' stored series back (see series_store.Reader): one per store."""
        if getattr(self, "_series_reader", None) is None:
            self._series_reader = series_store.Reader(self.db)
        return self._series_reader

    def counts(self) -> dict[str, int]:
        rows = self.db.execute("SELECT status, count(*) FROM runs GROUP BY status").fetchall()
        return {status: count for status, count in rows}


def latest_identity(db: sqlite3.Connection) -> dict | None:
    """The context the latest run of a store was made in; None for a store without one."""
    try:
        row = db.execute("SELECT parts FROM identities ORDER BY seq DESC LIMIT 1").fetchone()
    except sqlite3.OperationalError as error:
        if "no such table" in str(error):
            return None
        raise
    return None if row is None else json.loads(row[0])


def stored_columns(parameters: list[str], quantities: list[str],
                   recorded: list[str] | None = None) -> dict[str, str]:
    """Each parameter's and quantity's column: as the store's meta records them, or (a store
    written before they were recorded, whose names never clashed) by `column_names`."""
    names = parameters + quantities
    return dict(zip(names, recorded or column_names(names)))


_EMPTY_INDEX = (np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, bool))


@dataclass
class _Rows:
    """Rows read from the runs table: their key (seq, or plan position) and a RunTable of them."""

    key: np.ndarray
    table: RunTable

    @classmethod
    def of(cls, rows: list[tuple], parameters: int, quantities: int) -> "_Rows":
        n = len(rows)
        columns = list(zip(*rows)) if n else [()] * (6 + parameters + quantities)
        numbers = np.array(columns[6:], dtype=float).reshape(parameters + quantities, n).T
        table = RunTable(ids=np.array(columns[1], dtype=np.int64), found=np.ones(n, bool),
                         ok=np.array(columns[2], dtype=bool),
                         errors=objects(columns[3]), duration=np.array(columns[4], dtype=float),
                         worker=objects(columns[5]),
                         inputs=numbers[:, :parameters], values=numbers[:, parameters:])
        return cls(np.array(columns[0], dtype=np.int64), table)


class _Transaction:
    """BEGIN IMMEDIATE ... COMMIT, rolled back on any error."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self.db = db

    def __enter__(self):
        self.db.execute("BEGIN IMMEDIATE")

    def __exit__(self, kind, value, tb):
        self.db.execute("ROLLBACK" if kind else "COMMIT")


def acquire_lock(path: Path):
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


def release_lock(handle) -> None:
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
        raise StoreError(f"{path.parent}: no runs.sqlite here; give the results folder of a "
                         "study (results/<name>, or the --out of its run)")
    uri = f"{path.resolve().as_uri()}?mode=ro"
    wal, shm = Path(f"{path}-wal"), Path(f"{path}-shm")
    if not shm.exists() and not os.access(path.parent, os.W_OK):
        if wal.exists() and wal.stat().st_size > 0:
            raise StoreError(f"{path}: its journal {wal.name} holds recorded runs that SQLite can "
                             f"read only where it may create {shm.name}, and {path.parent} cannot "
                             "be written; copy the folder somewhere writable and read the copy")
        uri += "&immutable=1"
    return sqlite3.connect(uri, uri=True, timeout=10, check_same_thread=False)


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
