"""Given data by the million: `analysis.from:` against pandas reading and summarising the file.

    python benchmarks/bench_given.py [--rows 1000000] [--keep DIR]

Writes a CSV of `rows` Ishigami runs (x1, x2, x3, y: 17 significant digits, as runs.csv writes
them), then measures, each as a whole process (start-up and imports included), CPU seconds
(user + sys, so a loaded machine inflates them less than wall time) and peak memory (max RSS):

1. pandas: `pd.read_csv(file).describe()` printed;
2. `studyrun validate` of the study below, which reads and checks the file once;
3. studyrun: `studyrun run` of a Monte Carlo study with `from:` the file (recording the rows
   in runs.sqlite, runs.csv, analysis.json and the report), and the same with `--no-report`
   (what the report's import of matplotlib and its two figures add).

`--repeat N` measures pandas and the two runs N times, one after the other (on a shared machine
compare the figures of one round, taken back to back).

`--only delta --only pawn` (issue 33: at most 10 s on 10,000 given rows) runs instead a delta
study (its default 100 bootstrap resamples, and 10) and a PAWN study from the first
`--given-rows` rows (default 10,000), each a whole `studyrun run --no-report`.

Figures are quoted in docs/performance.md.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import numpy as np

PANDAS = "import sys, pandas as pd; print(pd.read_csv(sys.argv[1]).describe())"
STUDY = textwrap.dedent("""\
    name: given-million
    seed: 1
    parameters:
      x1: {distribution: uniform, low: -3.141592653589793, high: 3.141592653589793}
      x2: {distribution: uniform, low: -3.141592653589793, high: 3.141592653589793}
      x3: {distribution: uniform, low: -3.141592653589793, high: 3.141592653589793}
    analysis:
      type: montecarlo
      from: runs.csv
""")


def write_data(path: Path, rows: int) -> None:
    x = np.random.default_rng(1).uniform(-np.pi, np.pi, (rows, 3))
    y = np.sin(x[:, 0]) + 7 * np.sin(x[:, 1]) ** 2 + 0.1 * x[:, 2] ** 4 * np.sin(x[:, 0])
    with open(path, "w") as handle:
        handle.write("x1,x2,x3,y\n")
        for start in range(0, rows, 100_000):
            part = np.column_stack([x[start:start + 100_000], y[start:start + 100_000]])
            handle.write("\n".join(",".join(map(repr, r)) for r in part.tolist()) + "\n")


def measure(command: list[str], cwd: Path) -> tuple[float, float, float]:
    """(CPU seconds, wall seconds, peak RSS in MB) of a child process."""
    start = time.perf_counter()
    pid = subprocess.Popen(command, cwd=cwd, stdout=subprocess.DEVNULL).pid
    _, status, usage = os.wait4(pid, 0)
    wall = time.perf_counter() - start
    if status:
        raise SystemExit(f"{command} failed ({status})")
    return usage.ru_utime + usage.ru_stime, wall, usage.ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--keep", type=Path, help="a folder for the files (default: temporary)")
    parser.add_argument("--only", choices=["pandas", "read", "run", "delta", "pawn"],
                        action="append")
    parser.add_argument("--given-rows", type=int, default=10_000, help="rows delta and pawn read")
    parser.add_argument("--repeat", type=int, default=1, help="rounds of pandas, validate and run")
    args = parser.parse_args()
    folder = args.keep or Path(tempfile.mkdtemp(prefix="bench-given-"))
    folder.mkdir(parents=True, exist_ok=True)
    data = folder / "runs.csv"
    if not data.exists():
        write_data(data, args.rows)
    (folder / "study.yaml").write_text(STUDY)
    python = sys.executable
    only = args.only or ["pandas", "read", "run"]
    print(f"{args.rows:,} rows, {data.stat().st_size / 1e6:.0f} MB: CPU s, wall s, peak MB")
    for kind in ("delta", "pawn"):
        if kind in only:
            given_analysis(kind, folder, data, args.given_rows)
    for _ in range(args.repeat):
        if "pandas" in only:
            print("pandas read_csv + describe: %.2f, %.2f, %.0f" % measure(
                [python, "-c", PANDAS, str(data)], folder), flush=True)
        if "read" in only:
            print("studyrun validate:          %.2f, %.2f, %.0f" % measure(
                [python, "-m", "studyrun", "validate", "study.yaml"], folder), flush=True)
        if "run" in only:
            out = folder / "results"
            print("studyrun run (whole):       %.2f, %.2f, %.0f" % measure(
                [python, "-m", "studyrun", "run", "study.yaml", "--out", str(out), "--fresh"],
                folder), flush=True)
            print("studyrun run --no-report:   %.2f, %.2f, %.0f" % measure(
                [python, "-m", "studyrun", "run", "study.yaml", "--out", str(out), "--fresh",
                 "--no-report"], folder), flush=True)


def given_analysis(kind: str, folder: Path, data: Path, rows: int) -> None:
    """CPU and wall seconds of a whole `studyrun run` of a delta or PAWN study from `rows` rows."""
    small = folder / f"given-{rows}.csv"
    with open(data) as source, open(small, "w") as handle:
        handle.writelines(line for _, line in zip(range(rows + 1), source))
    settings = {"delta": [", resamples: 100", ", resamples: 10"], "pawn": [""]}[kind]
    for extra in settings:
        study = STUDY.replace("montecarlo", kind).replace("runs.csv", small.name)
        given = f"  from: {small.name}\n"  # the analysis block's keys, as STUDY indents them
        assert given in study
        (folder / f"{kind}.yaml").write_text(study.replace(
            given, given + (f"  resamples: {extra.split(': ')[1]}\n" if extra else "")))
        out = folder / f"results-{kind}"
        print(f"studyrun run {kind}{extra} ({rows:,} rows): %.2f, %.2f, %.0f" % measure(
            [sys.executable, "-m", "studyrun", "run", f"{kind}.yaml", "--out", str(out), "--fresh",
             "--no-report"], folder), flush=True)


if __name__ == "__main__":
    main()
