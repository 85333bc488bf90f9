"""Issue 2's performance targets, measured through `studyrun run` as a user types it.

    python benchmarks/bench_core.py [--quick]

1. A Monte Carlo of 1,000,000 runs of a vectorized cheap model (Ishigami): wall time and peak RSS
   of the whole `studyrun run` process (target < 30 s, < 2 GB).
2. A scalar python model: studyrun's cost per run over a plain Python loop calling the same
   function with the same keyword arguments. studyrun's per-run cost is the slope between 10k and
   100k runs (start-up cancels), the loop's is timed in a fresh interpreter (target < 20 us/run).
3. A 20 ms/run model (time.sleep) on a LocalCluster of 1 and of 2 workers (500 runs per worker):
   throughput of the runs on the workers, from the model's trace of each run, so the pilot and
   the cluster start-up (reported as start-up) are left out (target >= 1.8x).
4. A small study (studies/ishigami-montecarlo.yaml, 10,000 runs) end to end (target < 3 s).
5. `studyrun validate` of one study and of every study in studies/ (target < 1 s).

Writes benchmarks/measured/core.csv.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

from harness import (
    OUT,
    ROOT,
    UNIFORM_PI,
    best,
    last_float,
    python,
    run_study,
    show,
    studyrun,
    traced_run,
    use_source,
    write_rows,
    write_study,
)

ROWS: list[dict] = []


def record(measure: str, target: str, value: float, unit: str, ok: bool | None, command: str,
           **extra) -> None:
    row = {"measure": measure, "target": target, "measured": round(value, 4), "unit": unit,
           "meets": "" if ok is None else ("yes" if ok else "NO"), "command": command, **extra}
    ROWS.append(row)
    show(row)


def analysis_of(name: str) -> dict:
    return json.loads((OUT / "results" / name / "analysis.json").read_text())


def startup() -> None:
    """Interpreter + `import studyrun.cli` (what every command pays), and a LocalCluster start."""
    done = best(3, python, "import time;t=time.perf_counter();import studyrun.cli, studyrun.commands.pipeline;"
                  "print(f'import={time.perf_counter()-t}')")
    record("start-up: import studyrun (cli + pipeline)", "", last_float(done["stdout"], "import"),
           "s", None, "python -c 'import studyrun.commands.pipeline'")
    done = best(3, python, "import time,logging;t=time.perf_counter();"
                  "from distributed import Client, LocalCluster;"
                  "c=LocalCluster(n_workers=2,threads_per_worker=1,processes=True,"
                  "dashboard_address=':0',silence_logs=logging.ERROR);cl=Client(c);"
                  "cl.wait_for_workers(2);s=time.perf_counter()-t;cl.close();c.close();"
                  "print(f'cluster={s}')")
    record("start-up: LocalCluster of 2 workers (import + start)", "",
           last_float(done["stdout"], "cluster"), "s", None, "distributed.LocalCluster(2)")


def million_vectorized(samples: int) -> None:
    path = write_study("core-mc-vectorized", {
        "seed": 1, "model": {"type": "python", "function": "benchmodels:ishigami", "vectorized": True},
        "parameters": {"x1": UNIFORM_PI, "x2": UNIFORM_PI, "x3": UNIFORM_PI},
        "quantities": {"y": "value"},
        "analysis": {"type": "montecarlo", "samples": samples, "sampling": "random"}})
    done = run_study(path)
    execution = analysis_of(path.stem)["execution"]
    command = f"studyrun run {path.relative_to(ROOT)} --fresh --quiet"
    record(f"Monte Carlo {samples:,} runs, vectorized: wall", "< 30 s", done["wall"], "s",
           done["wall"] < 30, command, scheduler=execution["scheduler"], cpu_s=round(done["cpu"], 2))
    record(f"Monte Carlo {samples:,} runs, vectorized: peak RSS", "< 2 GB", done["rss_mb"], "MB",
           done["rss_mb"] < 2048, command)


def scalar_overhead(small: int, large: int, repeats: int) -> None:
    """Per-run cost as the slope between two sizes, in one process (`--scheduler sync`), on CPU
    time (user + system), which other load on this shared machine disturbs less than wall time."""
    runs = {}
    for n in (small, large):
        path = write_study(f"core-scalar-{n}", {
            "seed": 1, "model": {"type": "python", "function": "benchmodels:ishigami_scalar"},
            "parameters": {"x1": UNIFORM_PI, "x2": UNIFORM_PI, "x3": UNIFORM_PI},
            "quantities": {"y": "value"},
            "analysis": {"type": "montecarlo", "samples": n, "sampling": "random"}})
        runs[n] = best(repeats, run_study, path, "--scheduler", "sync")
    per_run = (runs[large]["cpu"] - runs[small]["cpu"]) / (large - small)
    per_run_wall = (runs[large]["wall"] - runs[small]["wall"]) / (large - small)
    loop = best(repeats, python,
        "import sys,time,numpy as np;"
        "from benchmodels import ishigami_scalar as f;"
        f"x=np.random.default_rng(1).uniform(-3.14159,3.14159,({large},3));"
        "cols=[c.tolist() for c in x.T];t=time.process_time();"
        "out=[f(x1=a,x2=b,x3=c) for a,b,c in zip(*cols)];"
        f"print(f'loop={{(time.process_time()-t)/{large}}}')")
    loop_per_run = last_float(loop["stdout"], "loop")
    overhead = per_run - loop_per_run
    command = f"studyrun run --scheduler sync (scalar Ishigami, {small:,} and {large:,} runs)"
    record("scalar python: plain loop per run", "", loop_per_run * 1e6, "us", None,
           "[f(**kw) for kw in rows]")
    record("scalar python: studyrun per run (CPU slope)", "", per_run * 1e6, "us", None, command,
           wall_slope_us=round(per_run_wall * 1e6, 2))
    record("scalar python: studyrun overhead per run", "< 20 us", overhead * 1e6, "us",
           overhead < 20e-6, command)
    record("scalar python: studyrun / plain loop", "<= 1.5 (issue 9)", per_run / loop_per_run, "x",
           per_run / loop_per_run <= 1.5, command)
    evaluator = best(repeats, python,
        "import time,numpy as np;from pathlib import Path;"
        "from studyrun.models.python import Python\n"
        "try: from studyrun.core.batch import RunContext\n"  # since issue 15; before, models.base
        "except ImportError: from studyrun.models.base import RunContext\n"
        "import benchmodels;"
        "m=Python(type='python',function='benchmodels:ishigami_scalar')"
        ".build(Path(benchmodels.__file__).parent);"
        f"x=np.random.default_rng(1).uniform(-3.14159,3.14159,({large},3));"
        "inputs={'x1':x[:,0],'x2':x[:,1],'x3':x[:,2]};c=RunContext(run_ids=np.arange(len(x)));"
        "m(inputs,c);t=time.process_time();out=m(inputs,c);"
        f"print(f'evaluator={{(time.process_time()-t)/{large}}}')")
    model_per_run = last_float(evaluator["stdout"], "evaluator")
    record("scalar python: model call path alone (evaluator, no store), per run", "",
           model_per_run * 1e6, "us", None, "PythonEvaluator on one batch",
           over_loop_us=round((model_per_run - loop_per_run) * 1e6, 2),
           ratio_to_loop=round(model_per_run / loop_per_run, 2))


def parallel_speedup(cost: float, runs: int) -> None:
    """Throughput of the runs on the cluster's workers, from the model's own trace of each run
    (first start to last end on the workers: the pilot and the cluster start-up are left out and
    reported as start-up)."""
    throughput = {}
    for workers in (1, 2):
        path = write_study(f"core-sleep-{workers}", {
            "seed": 1, "model": {"type": "python", "function": "benchmodels:sleeper",
                                 "constants": {"cost": cost}},
            "parameters": {"x": {"distribution": "uniform", "low": 0, "high": 1}},
            "quantities": {"y": "value"},
            "analysis": {"type": "montecarlo", "samples": runs * workers, "sampling": "random"}})
        done = traced_run(path, "--workers", str(workers))
        throughput[workers] = done["throughput"]
        record(f"{cost * 1e3:g} ms/run (sleep), {workers} worker(s): throughput on the workers", "",
               done["throughput"], "runs/s", None, f"studyrun run --workers {workers}",
               runs=runs * workers, wall_s=round(done["wall"], 2),
               startup_s=round(done["startup"], 2), efficiency=round(
                   done["throughput"] * cost / workers, 3),
               scheduler=analysis_of(path.stem)["execution"]["scheduler"])
    ratio = throughput[2] / throughput[1]
    record(f"{cost * 1e3:g} ms/run: throughput 2 workers / 1 worker", ">= 1.8", ratio, "x",
           ratio >= 1.8, "studyrun run --workers 1|2")


def small_study() -> None:
    path = ROOT / "studies" / "ishigami-montecarlo.yaml"
    done = best(5, run_study, path)
    record("small study end to end (ishigami-montecarlo, 10,000 runs)", "< 3 s", done["wall"], "s",
           done["wall"] < 3, "studyrun run studies/ishigami-montecarlo.yaml",
           cpu_s=round(done["cpu"], 3))


def validate() -> None:
    one = best(5, studyrun, "validate", str(ROOT / "studies/ishigami-montecarlo.yaml"))["wall"]
    record("studyrun validate (one study)", "< 1 s", one, "s", one < 1,
           "studyrun validate studies/ishigami-montecarlo.yaml")
    listed = subprocess.run(["git", "ls-files", "studies/*.yaml"], cwd=ROOT, capture_output=True,
                            text=True, check=True).stdout.split()  # committed studies only
    studies = [str(ROOT / p) for p in listed if p.count("/") == 1]
    every = best(5, studyrun, "validate", *studies)["wall"]
    record(f"studyrun validate (all {len(studies)} studies)", "< 1 s", every, "s", every < 1,
           "studyrun validate studies/*.yaml")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes, for a smoke test")
    parser.add_argument("--source", help="head (default), a commit, or tree (the work tree)")
    args = parser.parse_args()
    print("studyrun measured:", use_source(args.source))
    startup()
    validate()
    small_study()
    million_vectorized(100_000 if args.quick else 1_000_000)
    scalar_overhead(*((2_000, 20_000) if args.quick else (20_000, 200_000)), repeats=2)
    parallel_speedup(0.02, 200 if args.quick else 500)
    if not args.quick:
        print(f"\nwrote {write_rows('core', ROWS)}")


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT / "benchmarks"))
    main()
