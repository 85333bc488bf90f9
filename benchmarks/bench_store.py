"""What recording one run costs: the store's row layout and runs.csv's formatting, per row.

    python benchmarks/bench_store.py [--rows 1000000]

1. SQLite inserts of 10-column rows in batches of 50,000, keyed by random 64-bit ids: into a
   table whose primary key is the id (store format 1) against appended in record order (format 2,
   `seq` as rowid), and `RunStore.write` itself.
2. runs.csv: Python's csv.writer on row tuples (format 1's export) against `runtable.write_csv`
   (columns of text), for the same runs.

CPU time per row (the best of 3). Figures are quoted in benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import csv
import shutil
import sqlite3
import tempfile
from pathlib import Path

import numpy as np
from harness import least_cpu as best

from studyrun.core.runtable import RunTable
from studyrun.results.runs_csv import write_csv
from studyrun.store.run_store import Batch, RunStore

BATCH = 50_000




def sqlite_rows(folder: Path, ids: np.ndarray, values: np.ndarray, keyed: bool) -> None:
    path = folder / f"rows-{keyed}.sqlite"
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=NORMAL")
    db.execute("PRAGMA cache_size=-131072")
    key = "id INTEGER PRIMARY KEY" if keyed else "seq INTEGER PRIMARY KEY, id INTEGER NOT NULL"
    db.execute(f"CREATE TABLE runs ({key}, status TEXT, error TEXT, duration REAL, worker TEXT, "
               "a REAL, b REAL, c REAL, y REAL, z REAL)")
    marks = ", ".join("?" * (10 if keyed else 11))
    for start in range(0, len(ids), BATCH):
        part = slice(start, start + BATCH)
        n = len(ids[part])
        order = np.argsort(ids[part]) if keyed else np.arange(n)  # format 1 sorted each batch
        lead = [ids[part][order].tolist()] if keyed else [list(range(start + 1, start + n + 1)),
                                                          ids[part].tolist()]
        rows = zip(*lead, ["ok"] * n, [None] * n, [0.001] * n, ["host:1"] * n,
                   *values[part][order].T.tolist())
        db.execute("BEGIN")
        db.executemany(f"INSERT INTO runs VALUES ({marks})", rows)
        db.execute("COMMIT")
    db.close()


def store_writes(folder: Path, ids: np.ndarray, values: np.ndarray) -> None:
    shutil.rmtree(folder / "store", ignore_errors=True)
    with RunStore.open(folder / "store" / "runs.sqlite") as store:
        store.prepare(["a", "b", "c"], ["y", "z"])
        for start in range(0, len(ids), BATCH):
            part = slice(start, start + BATCH)
            n = len(ids[part])
            store.write(Batch(ids=ids[part], ok=np.ones(n, bool), errors=[None] * n,
                              inputs=values[part, :3], values=values[part, 3:], duration=0.001,
                              worker="host:1"))


def csv_writer(path: Path, ids: np.ndarray, values: np.ndarray) -> None:
    n = len(ids)
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["run", "id", "status", "error", "duration", "worker", "a", "b", "c", "y", "z"])
        writer.writerows(zip(range(n), ids.tolist(), ["ok"] * n, [None] * n, [0.001] * n,
                             ["host:1"] * n, *values.T.tolist()))


def table_writer(path: Path, table: RunTable) -> None:
    write_csv(path, ["a", "b", "c"], ["y", "z"], [(0, table)])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    args = parser.parse_args()
    rng = np.random.default_rng(1)
    ids = rng.integers(-2**63, 2**63 - 1, args.rows)
    values = rng.random((args.rows, 5)) * 1000
    n = args.rows
    table = RunTable.blank(ids, values[:, :3], 2)
    table.found[:], table.ok[:], table.duration[:] = True, True, 0.001
    table.worker[:], table.values[:] = "host:1", values[:, 3:]
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        results = {
            "SQLite, keyed by id (format 1)": best(lambda: sqlite_rows(folder, ids, values, True)),
            "SQLite, appended (format 2)": best(lambda: sqlite_rows(folder, ids, values, False)),
            "RunStore.write (format 2)": best(lambda: store_writes(folder, ids, values)),
            "runs.csv, csv.writer on rows": best(lambda: csv_writer(folder / "a.csv", ids, values)),
            "runs.csv, runtable.write_csv": best(lambda: table_writer(folder / "b.csv", table)),
        }
    for name, seconds in results.items():
        print(f"{name}: {seconds / n * 1e6:.2f} us/row ({n:,} rows, CPU)")


if __name__ == "__main__":
    main()
