"""Issue 4's performance target: Sobol' indices of Ishigami with N = 2^16 (327,680 runs).

    python benchmarks/bench_sobol.py [--source head|tree|COMMIT] [--samples 65536]

studyrun: `studyrun run` of the study (vectorized Ishigami, first and total order) from process
start to analysis.json and report (target < 20 s). SALib directly: a fresh interpreter that
imports SALib, samples with `SALib.sample.sobol` (N = 2^16, no second order), evaluates the same
vectorized function and calls `SALib.analyze.sobol` with the same resamples and confidence
(issue 4: studyrun within 2x of it; issue 33: 1.5x). Both are timed from process start.
The analysis alone: CPU seconds of SALib's `sobol.analyze` and of studyrun's computation of the
same numbers (studyrun/analyses/sobol/bootstrap.py) on the same outputs, the least of 5 each.

Writes benchmarks/measured/sobol.csv.
"""

from __future__ import annotations

import argparse
import json

from harness import (
    OUT,
    UNIFORM_PI,
    best,
    last_float,
    python,
    run_study,
    show,
    use_source,
    write_rows,
    write_study,
)

ROWS: list[dict] = []

SALIB_DIRECT = """
import time
t0 = time.perf_counter()
import numpy as np
from SALib.sample import sobol as sample
from SALib.analyze import sobol as analyze
from benchmodels import ishigami
problem = {{"num_vars": 3, "names": ["x1", "x2", "x3"], "bounds": [[-np.pi, np.pi]] * 3}}
t1 = time.perf_counter()
X = sample.sample(problem, {n}, calc_second_order=False, seed=1)
t2 = time.perf_counter()
Y = ishigami(X[:, 0], X[:, 1], X[:, 2])
t3 = time.perf_counter()
S = analyze.analyze(problem, Y, calc_second_order=False, num_resamples=100, conf_level=0.95, seed=1)
t4 = time.perf_counter()
print(f"runs={{len(Y)}} import={{t1 - t0}} sample={{t2 - t1}} evaluate={{t3 - t2}} analyse={{t4 - t3}} "
      f"S1_x1={{S['S1'][0]:.4f}}")
"""


ANALYSE_ONLY = """
import time, numpy as np
from SALib.analyze import sobol as salib
try:
    from studyrun.analyses.sobol import bootstrap
except ImportError:  # a studyrun that calls SALib's
    bootstrap = None
n = {n}
y = np.random.default_rng(1).normal(size=n * 5)
problem = {{"num_vars": 3, "names": ["a", "b", "c"], "bounds": [[0, 1]] * 3}}
tools = {{"salib": lambda: salib.analyze(problem, y, calc_second_order=False, seed=7)}}
if bootstrap is not None:
    tools["studyrun"] = lambda: bootstrap.analyze(y, 3, False, 100, 0.95, 7)
least = {{}}
for _ in range(5):
    for name, call in tools.items():
        start = time.process_time()
        call()
        least[name] = min(least.get(name, 1e9), time.process_time() - start)
print(" ".join(f"{{name}}={{cpu}}" for name, cpu in least.items()))
"""


def record(measure: str, target: str, value: float, unit: str, ok: bool | None, command: str,
           **extra) -> None:
    row = {"measure": measure, "target": target, "measured": round(value, 4), "unit": unit,
           "meets": "" if ok is None else ("yes" if ok else "NO"), "command": command, **extra}
    ROWS.append(row)
    show(row)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", help="head (default), a commit, or tree (the work tree)")
    parser.add_argument("--samples", type=int, default=1 << 16)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    print("studyrun measured:", use_source(args.source))
    n = args.samples
    path = write_study(f"sobol-ishigami-{n}", {
        "seed": 1, "model": {"type": "python", "function": "benchmodels:ishigami", "vectorized": True},
        "parameters": {"x1": UNIFORM_PI, "x2": UNIFORM_PI, "x3": UNIFORM_PI},
        "quantities": {"y": "value"},
        "analysis": {"type": "sobol", "samples": n, "second_order": False}})
    done = best(args.repeats, run_study, path)
    analysis = json.loads((OUT / "results" / path.stem / "analysis.json").read_text())
    runs = analysis["runs"]["planned"]
    command = f"studyrun run benchmarks/out/studies/{path.name}"
    record(f"Sobol' Ishigami N={n} ({runs:,} runs): studyrun wall", "< 20 s", done["wall"], "s",
           done["wall"] < 20, command, cpu_s=round(done["cpu"], 2), rss_mb=round(done["rss_mb"]),
           S1_x1=round(analysis["results"]["y"]["S1"]["x1"], 4))
    salib = best(args.repeats, python, SALIB_DIRECT.format(n=n))
    record(f"Sobol' Ishigami N={n}: SALib directly, wall", "", salib["wall"], "s", None,
           "python -c SALIB_DIRECT (bench_sobol.py)", cpu_s=round(salib["cpu"], 2),
           rss_mb=round(salib["rss_mb"]),
           **{k: round(last_float(salib["stdout"], k), 3)
              for k in ("import", "sample", "evaluate", "analyse")})
    ratio = done["wall"] / salib["wall"]
    record(f"Sobol' Ishigami N={n}: studyrun / SALib directly", "<= 1.5", ratio, "x",
           ratio <= 1.5, command)
    cpu = done["cpu"] / salib["cpu"]  # what a loaded machine inflates less
    record(f"Sobol' Ishigami N={n}: studyrun / SALib directly, CPU", "<= 1.5", cpu, "x",
           cpu <= 1.5, command)
    alone = python(ANALYSE_ONLY.format(n=n))["stdout"]
    if "studyrun=" in alone:
        mine, theirs = last_float(alone, "studyrun"), last_float(alone, "salib")
        record(f"Sobol' analysis alone, N={n}: studyrun / SALib's analyze, CPU", "", mine / theirs,
               "x", None, "python -c ANALYSE_ONLY (bench_sobol.py)", studyrun_cpu_s=round(mine, 3),
               salib_cpu_s=round(theirs, 3))
    print(f"\nwrote {write_rows('sobol', ROWS)}")


if __name__ == "__main__":
    main()
