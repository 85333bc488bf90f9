"""Issue 3's performance targets: equation models as vectorized ensembles, through `studyrun run`.

    python benchmarks/bench_equations.py [--source head|tree|COMMIT]

1. 10,000 runs of the flowers model (studies/models/flowers.yaml: Euler, step 0.125, 20 years)
   as a Monte Carlo, analysis and report included. "After start-up" is the wall time of 10,000
   runs less that of the same study with 16 runs (interpreter, imports, step check, report
   set-up); target < 3 s. Per run (CPU time of 10,000 runs less that of 16, over 9,984): >= 20x
   faster than a pure-Python Euler loop (timed here)
   and >= 1,000x faster than PySD (timed by peers/pysd_flowers.py in the peers venv when it
   exists; else the issue's 0.75 s/run).
2. A 10,000-member adaptive RK45 ensemble of logistic growth (studies/models/logistic.yaml):
   target < 15 s.

Writes benchmarks/measured/equations.csv.
"""

from __future__ import annotations

import argparse
import shutil
import sys

from harness import (
    HERE,
    PEERS_PYTHON,
    ROOT,
    STUDIES,
    best,
    last_float,
    measure,
    python,
    run_study,
    show,
    use_source,
    write_rows,
    write_study,
)

ROWS: list[dict] = []
PYSD_REFERENCE = 0.75  # s/run, issue 3, when the peers venv is absent

PURE_PYTHON_FLOWERS = """
import time, numpy as np
def flowers(r, d, s, area=10.0, dt=0.125, steps=160, stride=8):
    final, peak = area, -1e300
    for k in range(steps + 1):
        fraction = area / s
        multiplier = 1.0 - min(max(fraction, 0.0), 1.0)  # lookup x [0, 1], y [1, 0], clamped
        growth = area * r * multiplier
        decay = area * d
        if k % stride == 0:
            peak = max(peak, growth)
        if k == steps:
            break
        area += dt * (growth - decay)
    return area, peak
rng = np.random.default_rng(1)
n = 10000
r, d, s = rng.uniform(0.8, 1.2, n).tolist(), rng.normal(0.2, 0.02, n).tolist(), rng.uniform(800, 1200, n).tolist()
t = time.process_time()
out = [flowers(*p) for p in zip(r, d, s)]
print(f"per_run={(time.process_time() - t) / n}")
"""


MODEL_ONLY = """
import sys, time
from pathlib import Path
import numpy as np
from studyrun.commands.pipeline import make_job
try:  # the layout since issue 15; the older one, to measure earlier commits too
    from studyrun.core.batch import RunContext
    from studyrun.study.loading import load_study
    from studyrun.plan.study import plan_study
except ImportError:
    from studyrun.models.base import RunContext
    from studyrun.commands.pipeline import load_study, plan_study
loaded = load_study(sys.argv[1]); plan = plan_study(loaded)
job = make_job(loaded, Path(sys.argv[2]))
inputs = plan.inputs(np.arange(plan.size))
context = RunContext(run_ids=plan.run_ids, workdir=None)
job.evaluator(inputs, context)
t = time.process_time(); out = job.evaluator(inputs, context); m = time.process_time()
values = job.quantities.evaluate(out, inputs); q = time.process_time()
print(f"model={(m - t) / plan.size} quantities={(q - m) / plan.size}")
"""


def record(measure: str, target: str, value: float, unit: str, ok: bool | None, command: str,
           **extra) -> None:
    row = {"measure": measure, "target": target, "measured": round(value, 6), "unit": unit,
           "meets": "" if ok is None else ("yes" if ok else "NO"), "command": command, **extra}
    ROWS.append(row)
    show(row)


def equation_study(name: str, model: str, parameters: dict, quantities: dict, samples: int):
    path = write_study(name, {"seed": 1, "model": {"file": f"models/{model}.yaml"},
                              "parameters": parameters, "quantities": quantities,
                              "analysis": {"type": "montecarlo", "samples": samples,
                                           "sampling": "lhs"}})
    (STUDIES / "models").mkdir(exist_ok=True)
    shutil.copy(ROOT / "studies" / "models" / f"{model}.yaml", STUDIES / "models" / f"{model}.yaml")
    return path


FLOWERS = {"intrinsic_growth_rate": {"distribution": "uniform", "low": 0.8, "high": 1.2},
           "decay_rate": {"distribution": "normal", "mean": 0.2, "std": 0.02},
           "suitable_area": {"bounds": [800, 1200]}}


def flowers(repeats: int) -> None:
    quantities = {"final_area": "final(area)", "peak_growth": "max(growth)"}
    runs = {n: best(repeats, run_study, equation_study(f"flowers-{n}", "flowers", FLOWERS,
                                                       quantities, n))
            for n in (16, 10_000)}
    total, fixed = runs[10_000]["wall"], runs[16]["wall"]
    after = total - fixed
    after_cpu = runs[10_000]["cpu"] - runs[16]["cpu"]
    per_run = after_cpu / (10_000 - 16)  # CPU time: least disturbed by other load on the machine
    command = "studyrun run benchmarks/out/studies/flowers-10000.yaml"
    record("flowers 10,000 runs: wall, end to end", "", total, "s", None, command,
           cpu_s=round(runs[10_000]["cpu"], 2))
    record("flowers: start-up (same study, 16 runs)", "", fixed, "s", None,
           "studyrun run benchmarks/out/studies/flowers-16.yaml", cpu_s=round(runs[16]["cpu"], 2))
    record("flowers 10,000 runs: after start-up (wall)", "< 3 s", after, "s", after < 3, command,
           cpu_s=round(after_cpu, 3))
    record("flowers: studyrun per run (CPU, after start-up)", "", per_run * 1e6, "us", None, command)
    loop = best(repeats, python, PURE_PYTHON_FLOWERS)
    loop_per_run = last_float(loop["stdout"], "per_run")
    record("flowers: pure-Python Euler loop per run", "", loop_per_run * 1e6, "us", None,
           "benchmarks/bench_equations.py PURE_PYTHON_FLOWERS")
    record("flowers: pure-Python loop / studyrun", ">= 20", loop_per_run / per_run, "x",
           loop_per_run / per_run >= 20, command)
    alone = best(repeats, measure, [sys.executable, "-c", MODEL_ONLY,
                                    STUDIES / "flowers-10000.yaml", STUDIES / "work"])
    model = last_float(alone["stdout"], "model") + last_float(alone["stdout"], "quantities")
    record("flowers: ensemble integration + quantities alone, per run (one batch of 10,000)",
           "", model * 1e6, "us", None, "bench_equations.py MODEL_ONLY",
           loop_ratio=round(loop_per_run / model, 1))
    pysd, source = pysd_per_run()
    record(f"flowers: PySD per run ({source})", "", pysd, "s", None,
           "benchmarks/peers/pysd_flowers.py")
    record("flowers: PySD / studyrun", ">= 1000", pysd / per_run, "x", pysd / per_run >= 1000,
           command)


def pysd_per_run() -> tuple[float, str]:
    """PySD's seconds per run of the flowers model, measured in the peers venv if it exists."""
    if not PEERS_PYTHON.exists():
        return PYSD_REFERENCE, "issue 3's figure; no peers venv"
    done = measure([PEERS_PYTHON, HERE / "peers" / "pysd_flowers.py", "--runs", "20"],
                   check=False)
    if done["returncode"] != 0:
        print(done["stderr"][-2000:], file=sys.stderr)
        return PYSD_REFERENCE, "issue 3's figure; the PySD run failed"
    return last_float(done["stdout"], "per_run"), "measured, peers venv"


def logistic(repeats: int) -> None:
    parameters = {"rate": {"distribution": "lognormal", "mean": 0.4, "std": 0.05},
                  "capacity": {"distribution": "normal", "mean": 1000, "std": 100}}
    quantities = {"population_10": "at(population, 10)", "final_population": "final(population)",
                  "peak_growth": "max(growth)"}
    done = best(repeats, run_study, equation_study("logistic-10000", "logistic", parameters,
                                                   quantities, 10_000))
    record("logistic RK45 ensemble, 10,000 members: wall, end to end", "< 15 s", done["wall"], "s",
           done["wall"] < 15, "studyrun run benchmarks/out/studies/logistic-10000.yaml",
           cpu_s=round(done["cpu"], 2))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", help="head (default), a commit, or tree (the work tree)")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    print("studyrun measured:", use_source(args.source))
    flowers(args.repeats)
    logistic(args.repeats)
    print(f"\nwrote {write_rows('equations', ROWS)}")


if __name__ == "__main__":
    main()
