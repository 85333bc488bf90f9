"""Shared helpers of the benchmark scripts: run a command, time it, take its peak memory.

Every measurement runs in a fresh process (`measure`), so imports and start-up are counted as a
user sees them, and peak RSS is that process's (and its waited-for children's) own, read with
os.wait4. Results go to benchmarks/measured/*.csv; scratch folders to benchmarks/out/ (git-ignored).
"""

from __future__ import annotations

import csv
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
OUT = HERE / "out"
RESULTS = HERE / "measured"
STUDIES = OUT / "studies"
PEERS_PYTHON = OUT / "peers-venv" / "bin" / "python"
PI = 3.141592653589793
UNIFORM_PI = {"distribution": "uniform", "low": -PI, "high": PI}


TRACE_FILE = OUT / "trace.txt"
SOURCE = OUT / "src"  # the studyrun measured: a snapshot of a commit (see use_source)
_source: list[str] = []


def use_source(which: str | None = None) -> str:
    """Measure studyrun as committed (`head`, the default, or any commit: `git archive` into
    benchmarks/out/src, so edits in progress in the shared work tree do not disturb a run) or the
    work tree as it is (`tree`). Set by STUDYRUN_BENCH_SOURCE or the scripts' --source."""
    which = which or os.environ.get("STUDYRUN_BENCH_SOURCE", "head")
    _source.clear()
    if which != "tree":
        revision = "HEAD" if which == "head" else which
        commit = subprocess.run(["git", "rev-parse", revision], cwd=ROOT, capture_output=True,
                                text=True, check=True).stdout.strip()
        if SOURCE.exists():
            shutil.rmtree(SOURCE)
        SOURCE.mkdir(parents=True)
        archive = subprocess.run(["git", "archive", commit, "studyrun"], cwd=ROOT,
                                 capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", str(SOURCE)], input=archive, check=True)
        subprocess.run([sys.executable, "-m", "compileall", "-q", str(SOURCE)], check=True)
        _source.append(str(SOURCE))
        which = f"{which} ({commit[:10]})"
    os.environ["STUDYRUN_BENCH_SOURCE_USED"] = which
    return which


def bench_env() -> dict[str, str]:
    """The environment for a measured command: OPENBLAS_CORETYPE/L2_SIZE unset together (they
    slow a current numpy, see the env notes), the studyrun snapshot and the benchmark models on
    PYTHONPATH."""
    env = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")}
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (*_source, str(HERE / "models"), env.get("PYTHONPATH")) if p)
    return env


# This machine is shared (other sessions run test suites on its 2 cores): as root, measured
# commands run at a higher priority so that wall times come closer to an idle machine's.
PRIORITY = ["nice", "-n", "-10"] if hasattr(os, "geteuid") and os.geteuid() == 0 else []


def measure(cmd: list[str], cwd: Path | None = None, check: bool = True,
            env: dict | None = None) -> dict:
    """Run `cmd`; return wall seconds, its peak RSS in MB (os.wait4: this child and the children
    it waited for, such as a LocalCluster's workers) and its output."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        start = time.perf_counter()
        OUT.mkdir(exist_ok=True)  # not ROOT: `python -m` would import the work tree's studyrun
        proc = subprocess.Popen(PRIORITY + [str(c) for c in cmd], cwd=cwd or OUT, env=env or bench_env(),
                                stdout=out, stderr=err, text=True)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0), err.seek(0)
        stdout, stderr = out.read(), err.read()
    if check and proc.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, cmd))} exited {proc.returncode}:\n{stderr[-3000:]}")
    return {"wall": wall, "cpu": usage.ru_utime + usage.ru_stime, "rss_mb": usage.ru_maxrss / 1024,
            "stdout": stdout, "stderr": stderr, "returncode": proc.returncode}


def best(repeats: int, fn, *args, **kwargs) -> dict:
    """The fastest of `repeats` measurements (this machine is shared: the minimum is the least
    disturbed), with the CPU time of the same repeat."""
    return min((fn(*args, **kwargs) for _ in range(repeats)), key=lambda d: d["wall"])


def least_cpu(function, repeats: int = 3) -> float:
    """The least CPU time of `repeats` calls of `function` in this process (the least disturbed
    by whatever else the machine does)."""
    times = []
    for _ in range(repeats):
        start = time.process_time()
        function()
        times.append(time.process_time() - start)
    return min(times)


def studyrun(*args: str, **kwargs) -> dict:
    """`studyrun ARGS` as a user types it (the console script of this interpreter)."""
    cmd = [sys.executable, "-m", "studyrun", *args]
    return measure(cmd, **kwargs)


def write_study(name: str, study: dict) -> Path:
    """A study file under benchmarks/out/studies/, its models importable from benchmarks/models."""
    STUDIES.mkdir(parents=True, exist_ok=True)
    path = STUDIES / f"{name}.yaml"
    path.write_text(yaml.safe_dump({"name": name, **study}, sort_keys=False))
    for model in (HERE / "models").glob("*.py"):  # python models resolve from the study's folder
        target = STUDIES / model.name
        if not target.exists() or target.read_text() != model.read_text():
            target.write_text(model.read_text())
    return path


def run_study(path: Path, *extra: str, **kwargs) -> dict:
    """`studyrun run PATH --fresh --quiet` into benchmarks/out/measured/NAME."""
    out = OUT / "results" / path.stem
    return studyrun("run", str(path), "--out", str(out), "--fresh", "--quiet", *extra, **kwargs)


def python(code: str, interpreter: str | Path = sys.executable, **kwargs) -> dict:
    """Run a Python snippet in a fresh interpreter."""
    return measure([str(interpreter), "-c", code], **kwargs)


def last_float(text: str, key: str) -> float:
    """The number after `key=` on the last line that has it (how snippets report timings)."""
    for line in reversed(text.splitlines()):
        for word in line.split():
            if word.startswith(key + "="):
                return float(word.split("=", 1)[1])
    raise ValueError(f"no {key}= in output:\n{text[-2000:]}")


def write_rows(name: str, rows: list[dict]) -> Path:
    """benchmarks/measured/NAME.csv."""
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"{name}.csv"
    keys = list(dict.fromkeys(k for row in rows for k in row))
    with open(path, "w", newline="") as handle:
        writer = csv.DictWriter(handle, keys)
        writer.writeheader()
        writer.writerows([{k: fmt(v) for k, v in row.items()} for row in rows])
    return path


def fmt(value):
    if isinstance(value, float):
        return f"{value:.4g}"
    return value


def report(rows: list[dict]) -> None:
    """Print rows as an aligned table."""
    if not rows:
        return
    keys = list(dict.fromkeys(k for row in rows for k in row))
    table = [keys] + [[str(fmt(row.get(k, ""))) for k in keys] for row in rows]
    widths = [max(len(r[i]) for r in table) for i in range(len(keys))]
    for r in table:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)))
    sys.stdout.flush()


def show(row: dict) -> None:
    """One result as a line: measure, value, target and whether it is met."""
    target = f"  (target {row['target']}: {row['meets']})" if row.get("target") else ""
    extra = "".join(f"  {k}={v}" for k, v in row.items()
                    if k not in ("measure", "target", "measured", "unit", "meets", "command"))
    print(f"{row['measure']}: {fmt(row['measured'])} {row['unit']}{target}{extra}", flush=True)


def traced_run(path: Path, *extra: str) -> dict:
    """`run_study` with the benchmark models tracing each run; adds the throughput of the runs
    done off the driver (after the in-process pilot and the cluster start-up): runs over the
    window from the first start to the last end, and the start-up until the first such run."""
    trace = TRACE_FILE  # workers started elsewhere (dask worker) must trace to it too
    trace.unlink(missing_ok=True)
    env = bench_env()
    env["BENCH_TRACE"] = str(trace)
    before = time.time()
    done = run_study(path, *extra, env=env)
    rows = [line.split() for line in trace.read_text().splitlines()]
    runs = [(int(pid), float(a), float(b)) for pid, a, b in rows]
    driver = min(runs, key=lambda r: r[1])[0]  # the pilot runs first, in the driver
    off = [r for r in runs if r[0] != driver]
    if not off:
        raise RuntimeError(f"{path.name}: no run was traced off the driver (in-process, or the "
                           "workers do not have BENCH_TRACE)")
    window = max(r[2] for r in off) - min(r[1] for r in off)
    done.update(throughput=len(off) / window, window=window, runs_off_driver=len(off),
                startup=min(r[1] for r in off) - before,
                processes=len({r[0] for r in off}))
    return done
