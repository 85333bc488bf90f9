"""Issue 34: model runs each optimiser needs to come within 1% of a known optimum.

    OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 python benchmarks/bench_bayesopt.py \
        [--seeds 5] [--problems branin,hartmann6,beam,sphere10] [--methods bayesian,...,peer]
        [--peer-python /tmp/bo-peer/bin/python] [--overhead]

Problems (minimise): Branin (two parameters; 0.397887 at three points), Hartmann 6 (six
parameters; -3.32237), a cantilever beam's cross-section (its area b h under the stress limit
6 F L / (b h^2) <= 250 MPa, active at the optimum, where h is at its upper bound: 720 mm^2)
and a ten-parameter shifted ellipsoid (1 + sum (i+1) (x_i - c_i)^2; 1).
Methods: studyrun's `bayesian`, `nelder-mead` and `differential-evolution`, each through the
analysis's own iterate() with the model evaluated in-process (the runs counted are those the
method asks for; a failed run counts as one), and a peer, scikit-optimize's gp_minimize
(`peer`, in a virtual environment of its own: python -m venv /tmp/bo-peer &&
/tmp/bo-peer/bin/pip install scikit-optimize; never a dependency of studyrun), with the same
run budget; the constrained problem is given to it with a penalty (it has no constraints).
"Runs to 1%": the first run, in order, whose objective is within 1% of the optimum (feasible
where there are constraints); past the budget: not reached. The median over seeds. Each search
stops at that run (runs "made" are those up to it), so a benchmark costs the runs it counts.

--overhead times the rounds (the GPs fitted, a point chosen) of a search of the ellipsoid on
90 to 109 runs, in CPU seconds of this process: the mean and the largest (target: at most 1 s,
every round); the benchmark prints it after the table too.
Writes benchmarks/measured/bayesopt.csv (--csv NAME: NAME.csv).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import numpy as np
from harness import ROOT, write_rows

sys.path.insert(0, str(ROOT))

BUDGET = {"branin": 60, "hartmann6": 150, "beam": 60, "sphere10": 250}
OTHER_BUDGET = 3000  # nelder-mead and differential evolution
BEAM_F, BEAM_L, BEAM_LIMIT = 2000.0, 1500.0, 250.0  # N, mm, MPa
H_MAX = 100.0  # mm
BEAM_OPTIMUM = 6 * BEAM_F * BEAM_L / (BEAM_LIMIT * H_MAX)  # b h (mm^2), h = H_MAX, at the limit
OPTIMUM = {"branin": 0.397887, "hartmann6": -3.32237, "beam": BEAM_OPTIMUM, "sphere10": 1.0}

HARTMANN_A = np.array([[10, 3, 17, 3.5, 1.7, 8], [0.05, 10, 17, 0.1, 8, 14],
                       [3, 3.5, 1.7, 10, 17, 8], [17, 8, 0.05, 10, 0.1, 14]])
HARTMANN_P = 1e-4 * np.array([[1312, 1696, 5569, 124, 8283, 5886],
                              [2329, 4135, 8307, 3736, 1004, 9991],
                              [2348, 1451, 3522, 2883, 3047, 6650],
                              [4047, 8828, 8732, 5743, 1091, 381]])
HARTMANN_ALPHA = np.array([1.0, 1.2, 3.0, 3.2])
SPHERE_CENTRE = np.linspace(0.15, 0.85, 10)


def branin(x):
    x1, x2 = x[:, 0], x[:, 1]
    b, c, t = 5.1 / (4 * np.pi ** 2), 5 / np.pi, 1 / (8 * np.pi)
    return {"f": (x2 - b * x1 ** 2 + c * x1 - 6) ** 2 + 10 * (1 - t) * np.cos(x1) + 10}


def hartmann6(x):
    inner = (HARTMANN_A[None] * (x[:, None, :] - HARTMANN_P[None]) ** 2).sum(axis=2)
    return {"f": -(HARTMANN_ALPHA[None] * np.exp(-inner)).sum(axis=1)}


def beam(x):
    b, h = x[:, 0], x[:, 1]
    return {"f": b * h, "stress": 6 * BEAM_F * BEAM_L / (b * h ** 2)}


def sphere10(x):
    return {"f": 1 + ((np.arange(1, 11) * (x - SPHERE_CENTRE) ** 2)).sum(axis=1)}


PROBLEMS = {
    "branin": (branin, {"x1": (-5, 10), "x2": (0, 15)}, []),
    "hartmann6": (hartmann6, {f"x{i}": (0, 1) for i in range(1, 7)}, []),
    "beam": (beam, {"b": (5.0, 50.0), "h": (10.0, H_MAX)}, [f"stress <= {BEAM_LIMIT}"]),
    "sphere10": (sphere10, {f"x{i}": (0, 1) for i in range(10)}, []),
}


def analysis_for(problem: str, method: str, seed: int, budget: int | None = None):
    """The study's analysis block and context (a study file written and loaded)."""
    from studyrun.study.loading import load_study

    _, bounds, constraints = PROBLEMS[problem]
    block = {"type": "optimize", "method": method, "minimize": "f"}
    if method == "bayesian":
        block |= {"max_evaluations": budget or BUDGET[problem], "constraints": constraints}
    else:
        block |= {"max_evaluations": OTHER_BUDGET}
    quantities = {"f": "f"} | ({"stress": "stress"} if constraints else {})
    study = {"name": problem, "seed": seed,
             "model": {"type": "python", "function": "bench_models:f"},
             "parameters": {n: {"bounds": list(b)} for n, b in bounds.items()},
             "quantities": quantities, "analysis": block}
    folder = Path(tempfile.mkdtemp())
    (folder / "bench_models.py").write_text("def f(**kw):\n    return {}\n")
    (folder / "study.yaml").write_text(json.dumps(study))
    loaded = load_study(folder / "study.yaml", check=False)
    return loaded.study.analysis, loaded.context


def runs_to_answer(problem: str, method: str, seed: int) -> tuple[int | None, int, float]:
    """(runs to 1%, runs made, CPU seconds) of one method on one problem and seed."""
    from studyrun.core.design import Outcome

    function, _, constraints = PROBLEMS[problem]
    analysis, context = analysis_for(problem, method, seed)
    seen: list[float] = []
    penalised = method != "bayesian" and constraints

    def evaluate(matrix):
        values = function(np.asarray(matrix, float))
        if penalised:  # nelder-mead and differential evolution have no constraints
            over = np.maximum(values["stress"] - BEAM_LIMIT, 0)
            values = {**values, "f": values["f"] + 10 * over}
        feasible = values["stress"] <= BEAM_LIMIT if constraints else np.ones(len(matrix), bool)
        seen.extend(np.where(feasible, values["f"], np.inf).tolist())
        if first_within(seen, OPTIMUM[problem]) is not None:
            raise Reached  # the answer is in: the runs after it count for nothing
        from studyrun.core.design import Design
        return Outcome(Design(list(context.varied), matrix), values, np.ones(len(matrix), bool))

    start = time.process_time()
    try:
        analysis.iterate(evaluate, context, np.random.SeedSequence(seed))
    except Reached:
        pass
    seconds = time.process_time() - start
    print(f"    best {min(seen):.6g} (optimum {OPTIMUM[problem]:.6g})")
    return first_within(seen, OPTIMUM[problem]), len(seen), seconds


class Reached(Exception):
    """A run came within 1% of the optimum: the search is stopped there."""


def first_within(values, optimum: float) -> int | None:
    close = np.abs(np.asarray(values) - optimum) <= 0.01 * abs(optimum)
    return int(np.argmax(close)) + 1 if close.any() else None


PEER = textwrap.dedent('''
    import json, sys, numpy as np
    from skopt import gp_minimize
    spec = json.loads(sys.argv[1])
    exec(spec["code"])
    f, bounds, budget, seed, optimum, constrained = (globals()[spec["problem"]], spec["bounds"],
        spec["budget"], spec["seed"], spec["optimum"], spec["constrained"])
    seen = []
    def objective(x):
        v = f(np.array([x], float))
        value = float(v["f"][0])
        if constrained:
            feasible = v["stress"][0] <= spec["limit"]
            seen.append(value if feasible else np.inf)
            return value + 10 * max(v["stress"][0] - spec["limit"], 0)
        seen.append(value)
        return value
    def close_to(values):
        return np.abs(np.array(values) - optimum) <= 0.01 * abs(optimum)
    gp_minimize(objective, [(float(a), float(b)) for a, b in bounds], n_calls=budget, random_state=seed,
                n_initial_points=2 * len(bounds) + 2, callback=lambda result: bool(close_to(seen).any()))
    close = close_to(seen)
    print(json.dumps({"runs": int(np.argmax(close)) + 1 if close.any() else None,
                      "made": len(seen), "best": float(np.min(seen))}))
''')


def peer_runs(problem: str, seed: int, python: str) -> tuple[int | None, int, float]:
    import inspect

    function, bounds, constraints = PROBLEMS[problem]
    code = "\n".join(inspect.getsource(g) for g in (branin, hartmann6, beam, sphere10))
    constants = {"HARTMANN_A": HARTMANN_A.tolist(), "HARTMANN_P": HARTMANN_P.tolist(),
                 "HARTMANN_ALPHA": HARTMANN_ALPHA.tolist(),
                 "SPHERE_CENTRE": SPHERE_CENTRE.tolist(), "BEAM_F": BEAM_F, "BEAM_L": BEAM_L}
    code = "\n".join(f"{k} = np.array({v!r})" if isinstance(v, list) else f"{k} = {v!r}"
                     for k, v in constants.items()) + "\n" + code
    spec = {"code": code, "problem": problem, "bounds": list(bounds.values()),
            "budget": BUDGET[problem], "seed": seed, "optimum": OPTIMUM[problem],
            "constrained": bool(constraints), "limit": BEAM_LIMIT}
    start = time.time()
    out = subprocess.run([python, "-c", PEER, json.dumps(spec)], capture_output=True, text=True,
                         check=True, env={"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"})
    answer = json.loads(out.stdout.strip().splitlines()[-1])
    print(f"    best {answer['best']:.6g} (optimum {OPTIMUM[problem]:.6g})")
    return answer["runs"], answer["made"], time.time() - start


def overhead(runs: int = 110, seed: int = 2) -> float:
    """CPU seconds of each round of a search of the 10-parameter ellipsoid, one run a round, to
    `runs` runs: between one round's evaluation and the next's (the GPs fitted, the point
    chosen; the evaluation in-process costs microseconds). scikit-learn's import (once a
    process, about 0.8 s) is not counted. Prints the rounds on 90 runs and more; returns the
    largest of them."""
    from sklearn.gaussian_process import GaussianProcessRegressor  # noqa: F401 (imported once)

    from studyrun.core.design import Design, Outcome

    analysis, context = analysis_for("sphere10", "bayesian", seed, budget=runs)
    stamps: list[tuple[int, float]] = []
    made = [0]

    def evaluate(matrix):
        stamps.append((made[0], time.process_time()))
        made[0] += len(matrix)
        return Outcome(Design(list(context.varied), matrix), sphere10(np.asarray(matrix, float)),
                       np.ones(len(matrix), bool))

    analysis.iterate(evaluate, context, np.random.SeedSequence(seed))
    late = [b - a for (n, a), (_, b) in zip(stamps, stamps[1:]) if n >= 90]
    if not late:
        print(f"overhead: the search stopped at {made[0]} runs, before 90: no round to time")
        return float("nan")
    print(f"overhead, rounds on 90 to {runs - 1} runs of 10 parameters, CPU seconds: mean "
          f"{np.mean(late):.2f}, largest {max(late):.2f} (target 1 s, every round)")
    return float(max(late))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--problems", default=",".join(PROBLEMS))
    parser.add_argument("--methods", default="bayesian,nelder-mead,differential-evolution,peer")
    parser.add_argument("--peer-python", default="/tmp/bo-peer/bin/python")
    parser.add_argument("--overhead", action="store_true")
    parser.add_argument("--csv", default="bayesopt", help="benchmarks/measured/CSV.csv")
    args = parser.parse_args()
    if args.overhead:
        overhead()
        return
    rows = []
    for problem in args.problems.split(","):
        for method in args.methods.split(","):
            found = []
            for seed in range(1, args.seeds + 1):
                runs, made, seconds = (peer_runs(problem, seed, args.peer_python)
                                       if method == "peer" else runs_to_answer(problem, method, seed))
                found.append(runs)
                print(f"{problem:10s} {method:24s} seed {seed}: runs to 1% {runs}, made {made}, "
                      f"{seconds:.1f} s", flush=True)
            reached = [np.inf if r is None else r for r in found]
            median = float(np.median(reached))
            rows.append({"problem": problem, "method": "skopt gp_minimize" if method == "peer"
                         else method, "median_runs_to_1pct": median if np.isfinite(median) else "",
                         "per_seed": " ".join("-" if r is None else str(r) for r in found)})
            print(f"== {problem} {method}: median {median}", flush=True)
            write_rows(args.csv, rows)  # after each method: a long run keeps what it measured
    write_rows(args.csv, rows)
    if "bayesian" in args.methods.split(","):
        overhead()


if __name__ == "__main__":
    main()
