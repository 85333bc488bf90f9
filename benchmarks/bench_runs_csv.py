"""Writing runs.csv and runs.parquet: cells a second for a wide study (a Sobol' design of 1,000
parameters has 1,002 rows a base sample; N = 64 gives 64,128 runs).

    python benchmarks/bench_runs_csv.py [--rows 8016] [--parameters 1000]

CPU seconds (user + sys of this process, the best of 3) of `runs_csv.write_csv` with its fast
path (floats by orjson, lines joined by pyarrow) and with Python's formatting (the writer before
issue 33), and of `runs_parquet.write_parquet`,
for the same table of random inputs and one quantity. Figures are quoted in docs/performance.md.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import numpy as np
from harness import least_cpu as best

import studyrun.results.runs_csv as runs_csv
from studyrun.core.runtable import RunTable
from studyrun.results.runs_parquet import write_parquet


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=8016)
    parser.add_argument("--parameters", type=int, default=1000)
    args = parser.parse_args()
    rng = np.random.default_rng(1)
    n, names = args.rows, [f"p{i}" for i in range(args.parameters)]
    table = RunTable(ids=rng.integers(0, 2**62, n), found=np.ones(n, bool), ok=np.ones(n, bool),
                     errors=np.full(n, None, object), duration=np.full(n, 0.0123),
                     worker=np.full(n, "tcp://127.0.0.1:40000", object),
                     inputs=rng.uniform(-np.pi, np.pi, (n, args.parameters)),
                     values=rng.normal(size=(n, 1)))
    cells = n * (6 + args.parameters + 1)
    folder = Path(tempfile.mkdtemp(prefix="bench-runs-csv-"))
    runs_csv.write_csv(folder / "warm.csv", names, ["y"], [(0, table)])  # imports pyarrow
    fast = best(lambda: runs_csv.write_csv(folder / "fast.csv", names, ["y"], [(0, table)]))
    parquet = best(lambda: write_parquet(folder / "runs.parquet", names, ["y"], [(0, table)]))
    arrow_text, runs_csv.arrow_text = runs_csv.arrow_text, lambda *_: None
    python = best(lambda: runs_csv.write_csv(folder / "python.csv", names, ["y"], [(0, table)]))
    runs_csv.arrow_text = arrow_text
    same = (folder / "fast.csv").read_bytes() == (folder / "python.csv").read_bytes()
    print(f"{n:,} runs x {args.parameters + 7} columns = {cells / 1e6:.1f} M cells (CPU s, M cells/s)")
    print(f"runs.csv, Python's formatting: {python:.2f} s, {cells / python / 1e6:.2f}")
    print(f"runs.csv, orjson + pyarrow:    {fast:.2f} s, {cells / fast / 1e6:.2f} (same bytes: {same})")
    print(f"runs.parquet:                  {parquet:.2f} s, {cells / parquet / 1e6:.2f}")


if __name__ == "__main__":
    main()
