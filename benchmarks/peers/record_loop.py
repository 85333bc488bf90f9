"""Sobol' of Ishigami with a plain Python loop and SALib that keeps the record studyrun keeps.

    python benchmarks/peers/record_loop.py [--samples 1024] [--batch 4096] [--where DIR]

As salib_loop.py (SALib.sample.sobol, a loop calling the scalar function, SALib.analyze.sobol),
and every run recorded durably as studyrun records it: a row (seq, id, status, error, duration,
worker, x1, x2, x3, y) in a SQLite table (WAL, synchronous=NORMAL, as studyrun's store),
inserted and committed once per batch of runs, and at the end a CSV of every run with runs.csv's
columns (csv.writer, from the records kept in memory). Prints runs=, import=, work=, per_run=.
"""

import argparse
import csv
import math
import os
import resource
import shutil
import socket
import sqlite3
import tempfile
import time
from pathlib import Path

t0 = time.perf_counter()
import numpy as np  # noqa: E402
from SALib.analyze import sobol as analyze  # noqa: E402
from SALib.sample import sobol as sample  # noqa: E402

T_IMPORT = time.perf_counter() - t0
NAMES = ["x1", "x2", "x3"]


def ishigami(x1, x2, x3, a=7.0, b=0.1):
    return math.sin(x1) + a * math.sin(x2) ** 2 + b * x3**4 * math.sin(x1)


def cpu_seconds() -> float:
    """CPU seconds of this process and the children it waited for (a loaded machine inflates
    wall times, much less CPU times)."""
    own, waited = (resource.getrusage(who) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
    return own.ru_utime + own.ru_stime + waited.ru_utime + waited.ru_stime  # to the microsecond


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--samples", type=int, default=1024)
    parser.add_argument("--batch", type=int, default=4096, help="runs per committed batch")
    parser.add_argument("--where", default=None, help="parent of the scratch folder")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="record-loop-", dir=args.where))
    problem = {"num_vars": 3, "names": NAMES, "bounds": [[-math.pi, math.pi]] * 3}
    worker = f"{socket.gethostname()}:{os.getpid()}"
    start, cpu = time.perf_counter(), cpu_seconds()
    db = sqlite3.connect(folder / "runs.sqlite")
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=NORMAL")
    db.execute("CREATE TABLE runs (seq INTEGER PRIMARY KEY, id INTEGER NOT NULL, status TEXT, "
               "error TEXT, duration REAL, worker TEXT, x1 REAL, x2 REAL, x3 REAL, y REAL)")
    X = sample.sample(problem, args.samples, calc_second_order=False, seed=1)
    rows, Y, records = X.tolist(), [], []
    for first in range(0, len(rows), args.batch):
        began = time.perf_counter()
        batch = [ishigami(*row) for row in rows[first:first + args.batch]]
        duration = (time.perf_counter() - began) / len(batch)
        records += [(first + k, first + k, "ok", None, duration, worker, *row, y)
                    for k, (row, y) in enumerate(zip(rows[first:first + args.batch], batch))]
        db.executemany("INSERT INTO runs VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", records[first:])
        db.commit()
        Y += batch
    db.close()
    with open(folder / "runs.csv", "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["run", "id", "status", "error", "duration", "worker", *NAMES, "y"])
        writer.writerows(records)
    indices = analyze.analyze(problem, np.array(Y), calc_second_order=False)
    work, cpu = time.perf_counter() - start, cpu_seconds() - cpu
    shutil.rmtree(folder)
    print(f"runs={len(Y)} import={T_IMPORT:.4f} work={work:.4f} cpu={cpu:.4f} per_run={work / len(Y):.3e} "
          f"S1_x1={indices['S1'][0]:.4f}")


if __name__ == "__main__":
    main()
