"""The run store: every run of a study in one SQLite file, written a batch per transaction.

One process at a time holds a study's store (an exclusive lock file, released by the operating
system even when the process is killed), so a second process gets a clear error instead of a
corrupted file. WAL journaling makes each committed batch survive a SIGKILL of the driver.
"""

from __future__ import annotations

import csv
import fcntl
import json
import os
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import numpy as np

from .errors import StoreError

FIXED_COLUMNS = ("id", "status", "error", "duration", "worker")
FORMAT = "1"


def quote(name: str) -> str:
    """A column name as an SQL identifier."""
    return '"' + name.replace('"', '""') + '"'


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
    series: list[bytes] | None = None  # per run, npz bytes of the series kept


class RunStore:
    """The runs.sqlite of one results folder; open it with `RunStore.open`."""

    def __init__(self, path: Path, connection: sqlite3.Connection, lock) -> None:
        self.path = path
        self.db = connection
        self._lock = lock
        self.parameters: list[str] = []
        self.quantities: list[str] = []

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
            db.execute("PRAGMA cache_size=-131072")  # 128 MiB: runs arrive in random id order
            check_integrity(db, path)
            db.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT)")
        except sqlite3.DatabaseError as error:
            raise StoreError(f"{path}: the run store is corrupted or not a run store ({error}); "
                             "move it away, or start over with --fresh") from None
        store = cls(path, db, handle)
        store._read_columns()
        return store

    def close(self) -> None:
        self.db.close()
        if self._lock is not None:
            self._lock.close()
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

    def _read_columns(self) -> None:
        self.parameters = self.meta("parameters", [])
        self.quantities = self.meta("quantities", [])

    def prepare(self, parameters: list[str], quantities: list[str]) -> None:
        """Create the runs table for these columns, or check that an old one has them."""
        if self.meta("format") is not None:
            if (self.parameters, self.quantities) != (parameters, quantities):
                raise StoreError(
                    f"{self.path}: holds runs of a study with parameters {self.parameters} and "
                    f"quantities {self.quantities}, not {parameters} and {quantities}; run with "
                    "--fresh to start over, or --out to write elsewhere")
            return
        columns = ", ".join(f"{quote(n)} REAL" for n in parameters + quantities)
        with self.transaction():
            self.db.execute(
                "CREATE TABLE IF NOT EXISTS runs (id INTEGER PRIMARY KEY, status TEXT NOT NULL, "
                f"error TEXT, duration REAL, worker TEXT{', ' + columns if columns else ''})")
            self.db.execute("CREATE TABLE IF NOT EXISTS series (id INTEGER PRIMARY KEY, data BLOB)")
        self.set_meta(format=FORMAT, parameters=parameters, quantities=quantities)
        self.parameters, self.quantities = parameters, quantities

    def transaction(self):
        return _Transaction(self.db)

    def write(self, batch: Batch) -> None:
        """Record a finished batch in one transaction: all of it or, after a crash, none."""
        n_columns = 5 + len(self.parameters) + len(self.quantities)
        marks = ", ".join("?" * n_columns)
        n = len(batch.ids)
        order = np.argsort(batch.ids, kind="stable")  # in key order: B-tree inserts ~30% cheaper
        ids = batch.ids[order].tolist()
        status = np.where(np.asarray(batch.ok)[order], "ok", "failed").tolist()
        errors = [batch.errors[i] for i in order.tolist()]
        # SQLite stores NaN as NULL, which is what a failed run's quantities are.
        rows = zip(ids, status, errors, [batch.duration] * n, [batch.worker] * n,
                   *np.asarray(batch.inputs, dtype=float)[order].T.tolist(),
                   *np.asarray(batch.values, dtype=float)[order].T.tolist())
        try:
            with self.transaction():
                self.db.executemany(f"INSERT OR REPLACE INTO runs VALUES ({marks})", rows)
                if batch.series is not None:
                    self.db.executemany("INSERT OR REPLACE INTO series VALUES (?, ?)",
                                        zip(ids, [batch.series[i] for i in order.tolist()]))
        except sqlite3.OperationalError as error:
            raise StoreError(f"{self.path}: cannot record runs ({error}); the runs recorded "
                             "before are intact, free space and run again to resume") from None

    def succeeded_among(self, run_ids: np.ndarray) -> np.ndarray:
        """Which of the given runs the store holds as succeeded (a bool mask in their order)."""
        done = np.zeros(len(run_ids), dtype=bool)
        if self.meta("format") is None or not len(run_ids):
            return done
        self._probe(run_ids)
        rows = self.db.execute("SELECT probe.position FROM probe JOIN runs ON runs.id = probe.id "
                               "WHERE runs.status = 'ok'").fetchall()
        done[np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))] = True
        return done

    def read(self, run_ids: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(found, ok, values) for the given runs, in their order; values NaN where absent."""
        found = np.zeros(len(run_ids), dtype=bool)
        values = np.full((len(run_ids), len(self.quantities)), np.nan)
        if self.meta("format") is None or not len(run_ids):
            return found, found.copy(), values
        self._probe(run_ids)
        columns = "".join(f", runs.{quote(q)}" for q in self.quantities)
        rows = self.db.execute(f"SELECT probe.position, runs.status = 'ok'{columns} FROM probe "
                               "JOIN runs ON runs.id = probe.id").fetchall()
        table = np.array(rows, dtype=float).reshape(len(rows), 2 + len(self.quantities))
        position = table[:, 0].astype(np.int64)
        found[position] = True
        ok = found.copy()
        ok[position] = table[:, 1] == 1
        values[position] = table[:, 2:]
        return found, ok, values

    def _probe(self, run_ids: np.ndarray) -> None:
        """Fill the temporary table `probe` with (position, id) of the given runs."""
        self._fill_temporary("probe", 0, run_ids, clear=True)

    def _fill_temporary(self, table: str, start: int, run_ids: np.ndarray, clear: bool) -> None:
        self.db.execute(f"CREATE TEMP TABLE IF NOT EXISTS {table} "
                        "(position INTEGER PRIMARY KEY, id INTEGER)")
        self.db.execute("BEGIN")
        try:
            if clear:
                self.db.execute(f"DELETE FROM {table}")
            self.db.executemany(f"INSERT INTO {table} VALUES (?, ?)",
                                zip(range(start, start + len(run_ids)), np.asarray(run_ids).tolist()))
        finally:
            self.db.execute("COMMIT")

    def add_planned(self, start: int, run_ids: np.ndarray) -> None:
        """Register a slice of the study's plan (positions start, start+1, ...) for the reads
        that span the whole plan: chunks, order statistics, ranks and runs.csv."""
        self._fill_temporary("planned", start, run_ids, clear=start == 0)

    def read_planned(self, start: int, stop: int, parameters: list[str]) -> tuple[np.ndarray, ...]:
        """(ok, inputs, values) of planned positions [start, stop), in plan order."""
        columns = "".join(f", runs.{quote(c)}" for c in parameters + self.quantities)
        rows = self.db.execute(f"SELECT planned.position, runs.status = 'ok'{columns} FROM planned "
                               "JOIN runs ON runs.id = planned.id WHERE planned.position >= ? "
                               "AND planned.position < ?", (start, stop)).fetchall()
        width = 2 + len(parameters) + len(self.quantities)
        table = np.array(rows, dtype=float).reshape(len(rows), width)
        n = stop - start
        ok = np.zeros(n, dtype=bool)
        data = np.full((n, width - 2), np.nan)
        where = table[:, 0].astype(np.int64) - start
        ok[where] = table[:, 1] == 1
        data[where] = table[:, 2:]
        return ok, data[:, :len(parameters)], data[:, len(parameters):]

    def sorted_planned(self, quantity: str) -> Iterator[float]:
        """The finite values of a quantity over the planned, succeeded runs, in increasing order."""
        column = f"runs.{quote(quantity)}"
        cursor = self.db.execute(f"SELECT {column} FROM planned JOIN runs ON runs.id = planned.id "
                                 f"WHERE runs.status = 'ok' AND {column} IS NOT NULL ORDER BY {column}")
        while rows := cursor.fetchmany(65536):
            for (value,) in rows:
                yield value

    def rank_sums(self, quantity: str, parameters: list[str]) -> dict[str, tuple[float, ...]]:
        """Per parameter (n, sum rx, sum ry, sum rx^2, sum ry^2, sum rx*ry) of average ranks over
        the planned, succeeded runs: what Spearman's correlation needs, sorted by SQLite."""
        def rank(column: str) -> str:
            c = f"runs.{quote(column)}"
            # the first and (counting peers) last rank of a tie share one sort: their mean
            return f"((rank() OVER (ORDER BY {c}) + count(*) OVER (ORDER BY {c})) / 2.0)"

        ranks = ", ".join(f"{rank(p)} AS r{j}" for j, p in enumerate(parameters))
        sums = ", ".join(f"sum(r{j}), sum(r{j} * r{j}), sum(r{j} * ry)" for j in range(len(parameters)))
        column = f"runs.{quote(quantity)}"
        row = self.db.execute(
            f"SELECT count(*), sum(ry), sum(ry * ry), {sums} FROM (SELECT {rank(quantity)} AS ry, "
            f"{ranks} FROM planned JOIN runs ON runs.id = planned.id WHERE runs.status = 'ok' "
            f"AND {column} IS NOT NULL)").fetchone()
        n, sy, syy = row[:3]
        return {p: (n, row[3 + 3 * j], sy, row[4 + 3 * j], syy, row[5 + 3 * j])
                for j, p in enumerate(parameters)}

    def read_series(self, run_id: int) -> dict[str, np.ndarray] | None:
        row = self.db.execute("SELECT data FROM series WHERE id = ?", (int(run_id),)).fetchone()
        if row is None:
            return None
        import io

        with np.load(io.BytesIO(row[0])) as data:
            return {key: data[key] for key in data.files}

    def counts(self) -> dict[str, int]:
        rows = self.db.execute("SELECT status, count(*) FROM runs GROUP BY status").fetchall()
        return {status: count for status, count in rows}

    def columns(self) -> list[str]:
        return [row[1] for row in self.db.execute("PRAGMA table_info(runs)")]

    def export_csv(self, path: Path, chunk: int = 20000) -> None:
        """runs.csv: the planned runs in plan order (every run when none is planned), streamed."""
        planned = self.db.execute("SELECT count(*) FROM temp.sqlite_master WHERE name = 'planned'"
                                  ).fetchone()[0]
        with open(path, "w", newline="") as handle:
            writer = csv.writer(handle)
            writer.writerow(["run", *self.columns()])
            if not planned:
                cursor = self.db.execute("SELECT rowid - 1, * FROM runs ORDER BY rowid")
            else:
                cursor = self.db.execute("SELECT planned.position, runs.* FROM planned "
                                         "JOIN runs ON runs.id = planned.id ORDER BY planned.position")
            while rows := cursor.fetchmany(chunk):
                writer.writerows(rows)


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


def check_integrity(db: sqlite3.Connection, path: Path) -> None:
    """Refuse a store whose pages SQLite finds damaged."""
    result = db.execute("PRAGMA quick_check").fetchone()[0]
    if result != "ok":
        raise StoreError(f"{path}: the run store is corrupted ({result}); move it away, or start "
                         "over with --fresh")
