"""Issue 28: the memory each analysis's sizes take, measured, beside the footprint studyrun
states for them at validate (`studyrun/core/sizes.py`, each analysis's `footprint()`).

    python benchmarks/bench_memory.py [--only montecarlo,gp,...] [--source tree|head|COMMIT]

Each case is a study run fresh with `studyrun run --scheduler sync` (the analysis and the
model in the driver: no worker process) at two or three sizes; its peak RSS (os.wait4) above
that of the smallest size, over the size's growth, is the memory a unit of the size takes (the
slope the footprint's formula must follow). `footprint` is what studyrun says at validate for
the same study (`studyrun plan`'s memory line). The terms that grow faster than the runs (a
GP's n x n matrices, NSGA's population x population sorting) are also traced alone with
tracemalloc (`parts`; a unit's bytes are the slope from the first size), at sizes whose full
runs would take hours, or whose arrays a run's RSS hides in memory freed before. Writes
benchmarks/measured/memory.csv.
"""

from __future__ import annotations

import argparse
import shutil

from harness import (
    OUT,
    ROOT,
    STUDIES,
    last_float,
    python,
    report,
    run_study,
    use_source,
    write_rows,
    write_study,
)

MODEL = {"type": "python", "function": "benchmodels:total", "vectorized": True}


def sums(parameters: int, quantities: int, analysis: dict) -> dict:
    """A study of `parameters` uniform inputs whose quantities are multiples of their sum."""
    return {"seed": 1, "model": MODEL,
            "parameters": {f"p{i}": {"bounds": [0, 1]} for i in range(parameters)},
            "quantities": {f"q{i}": f"value * {i + 1}" for i in range(quantities)},
            "analysis": analysis}


def zdt1(analysis: dict) -> dict:
    STUDIES.mkdir(parents=True, exist_ok=True)
    shutil.copy(ROOT / "studies" / "zdt.py", STUDIES / "zdt.py")
    return {"seed": 1, "model": {"type": "python", "function": "zdt:zdt1", "vectorized": True},
            "parameters": {f"x{i}": {"bounds": [0, 1]} for i in range(1, 6)},
            "quantities": {"f1": "f1", "f2": "f2"},
            "analysis": {"type": "optimize", "method": "nsga2",
                         "objectives": {"minimize": ["f1", "f2"]}, **analysis}}


def logistic_mcmc(iterations: int) -> dict:
    for folder in ("models", "data"):
        shutil.copytree(ROOT / "studies" / folder, STUDIES / folder, dirs_exist_ok=True)
    return {"seed": 1, "model": {"file": "models/logistic.yaml"},
            "parameters": {"initial_population": 0.1,
                           "rate": {"distribution": "uniform", "low": 0.1, "high": 2, "nominal": 1},
                           "capacity": {"distribution": "uniform", "low": 20, "high": 300,
                                        "nominal": 50}},
            "analysis": {"type": "calibrate", "method": "mcmc",
                         "data": {"file": "data/logistic-noisy.csv", "format": "wide", "x": "time"},
                         "mcmc": {"iterations": iterations, "burnin": 10, "chains": 4,
                                  "prediction_draws": 10}}}


# name -> (unit the size counts, study for a size, sizes)
CASES = {
    "montecarlo": ("runs", lambda n: sums(3, 1, {"type": "montecarlo", "samples": n}),
                   [100_000, 400_000, 1_600_000]),
    "montecarlo-40": ("runs", lambda n: sums(30, 10, {"type": "montecarlo", "samples": n}),
                      [50_000, 200_000]),
    "montecarlo-wide": ("runs", lambda n: sums(1000, 1, {"type": "montecarlo", "samples": n}),
                        [5_000, 20_000]),
    "sweep": ("levels", lambda n: sums(3, 1, {"type": "sweep", "levels": n}), [40, 80]),
    "sobol": ("base samples", lambda n: sums(3, 1, {"type": "sobol", "samples": n}),
              [2**14, 2**16]),
    "sobol-resamples": ("resamples", lambda n: sums(3, 1, {"type": "sobol", "samples": 2**12,
                                                           "resamples": n}), [1000, 4000]),
    "morris": ("trajectories", lambda n: sums(30, 1, {"type": "morris", "trajectories": n}),
               [1000, 4000]),
    "morris-optimal": ("trajectories", lambda n: sums(4, 1, {"type": "morris", "trajectories": n,
                                                             "optimal_trajectories": 4}),
                       [500, 1000, 2000]),
    "fast": ("samples", lambda n: sums(3, 1, {"type": "fast", "samples": n}), [2**14, 2**16]),
    "rbd_fast": ("samples", lambda n: sums(3, 1, {"type": "rbd_fast", "samples": n}),
                 [50_000, 200_000]),
    "delta": ("samples", lambda n: sums(3, 1, {"type": "delta", "samples": n}), [2_000, 8_000]),
    "pawn": ("samples", lambda n: sums(3, 1, {"type": "pawn", "samples": n}), [50_000, 200_000]),
    "dgsm": ("samples", lambda n: sums(3, 1, {"type": "dgsm", "samples": n}), [2**13, 2**15]),
    "doe-lhs": ("samples", lambda n: sums(10, 1, {"type": "doe", "design": "lhs", "samples": n}),
                [2000, 8000]),
    "doe-bbd": ("parameters", lambda k: sums(k, 1, {"type": "doe", "design": "bbd"}), [8, 16]),
    "pce": ("samples", lambda n: sums(5, 1, {"type": "surrogate", "method": "pce", "degree": 4,
                                             "samples": n}), [500, 2000]),
    "gp": ("samples", lambda n: sums(2, 1, {"type": "surrogate", "method": "gp", "samples": n}),
           [50, 100]),
    "nsga2": ("population", lambda n: zdt1({"population": n, "generations": 2}),
              [1000, 2000, 4000]),
    "nsga2-generations": ("generations", lambda n: zdt1({"population": 200, "generations": n}),
                          [50, 200]),
    "mcmc": ("iterations", logistic_mcmc, [500, 2000]),
}

FOOTPRINT = """
from studyrun.study.loading import load_study
loaded = load_study({path!r})
footprint = loaded.study.analysis.footprint(loaded.context)
print(f"bytes={{footprint.bytes if footprint else 0}}")
"""

# Terms traced alone (tracemalloc): code -> bytes per unit, printed as per_unit=...
GP_LIKELIHOOD = """
import tracemalloc, numpy as np
from sklearn.gaussian_process import GaussianProcessRegressor
from studyrun.analyses.surrogate import gp
n, d = {n}, {d}
x = np.random.default_rng(1).random((n, d))
model = GaussianProcessRegressor(gp.kernel(d), normalize_y=True, optimizer=None).fit(x, x.sum(1))
tracemalloc.start()
model.log_marginal_likelihood(model.kernel_.theta, eval_gradient=True)
print(f"peak={{tracemalloc.get_traced_memory()[1]}} units={{n * n * (d + 2)}}")
"""
NSGA_GENERATION = """
import tracemalloc, numpy as np
from pymoo.algorithms.moo.nsga2 import NSGA2
from pymoo.core.problem import Problem
class Zdt1(Problem):
    def _evaluate(self, x, out, *args, **kwargs):
        g = 1 + 9 * x[:, 1:].mean(axis=1)
        out["F"] = np.column_stack([x[:, 0], g * (1 - np.sqrt(x[:, 0] / g))])
        out["G"] = np.zeros((len(x), 1))
n = {n}
algorithm = NSGA2(pop_size=n, seed=1)
algorithm.setup(Zdt1(n_var=5, n_obj=2, n_ieq_constr=1, xl=np.zeros(5), xu=np.ones(5)),
                termination=("n_gen", 3))
tracemalloc.start()
while algorithm.has_next():
    algorithm.next()
print(f"peak={{tracemalloc.get_traced_memory()[1]}} units={{n ** 2}}")
"""
PCE_FIT = """
import tracemalloc, numpy as np
from pydantic import TypeAdapter
from studyrun.blocks.params import ParameterSpec
from studyrun.analyses.surrogate.basis import term_count
from studyrun.analyses.surrogate.fitting import Inputs, Settings, fit_quantity
n, d, degree = {n}, {d}, {degree}
bounds = TypeAdapter(ParameterSpec).validate_python({{"bounds": [0, 1]}})
inputs = Inputs({{f"x{{i}}": bounds for i in range(d)}})
x = np.random.default_rng(1).random((n, d))
tracemalloc.start()
fit_quantity(x, np.sin(6 * x[:, 0]) + x.sum(1) ** 2, inputs,
             Settings("pce", degree, 1.0, "lars", 5, False, 0.95, 20), 7)
print(f"peak={{tracemalloc.get_traced_memory()[1]}} units={{n * term_count(d, degree)}}")
"""
PARTS = {  # name -> (unit, code template, sizes)
    "gp-likelihood": ("samples^2 x (parameters + 2)", GP_LIKELIHOOD,
                      [{"n": 1000, "d": 2}, {"n": 2000, "d": 2}, {"n": 2000, "d": 6}]),
    "nsga2-sorting": ("population^2", NSGA_GENERATION, [{"n": 2000}, {"n": 4000}]),
    "pce-basis": ("samples x terms", PCE_FIT, [{"n": 2000, "d": 8, "degree": 4},
                                               {"n": 4000, "d": 8, "degree": 4},
                                               {"n": 2000, "d": 8, "degree": 5}]),
}


def measure_case(name: str) -> list[dict]:
    unit, study, sizes = CASES[name]
    rows = []
    for size in sizes:
        path = write_study(f"memory-{name}-{size}", study(size))
        done = run_study(path, "--scheduler", "sync")
        stated = last_float(python(FOOTPRINT.format(path=str(path)))["stdout"], "bytes")
        rows.append({"case": name, "unit": unit, "size": size, "peak_mb": done["rss_mb"],
                     "footprint_mb": stated / 2**20, "wall_s": done["wall"]})
    first = rows[0]
    for row in rows[1:]:
        grown = row["size"] - first["size"]
        row["measured_mb_growth"] = row["peak_mb"] - first["peak_mb"]
        row["footprint_mb_growth"] = row["footprint_mb"] - first["footprint_mb"]
        row["measured_bytes_per_unit"] = row["measured_mb_growth"] * 2**20 / grown
        row["footprint_over_measured"] = row["footprint_mb_growth"] / row["measured_mb_growth"]
    return rows


def measure_part(name: str) -> list[dict]:
    """Peak bytes traced at each size; a unit's bytes, the slope from the first size."""
    unit, code, sizes = PARTS[name]
    rows = []
    for size in sizes:
        out = python(code.format(**size))["stdout"]
        rows.append({"case": name, "unit": unit, "size": str(size),
                     "peak_mb": last_float(out, "peak") / 2**20, "units": last_float(out, "units")})
    for row in rows[1:]:
        row["bytes_per_unit"] = ((row["peak_mb"] - rows[0]["peak_mb"]) * 2**20
                                 / (row["units"] - rows[0]["units"]))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", default=None, help=f"cases: {', '.join([*CASES, *PARTS])}")
    parser.add_argument("--source", default=None)
    args = parser.parse_args()
    print("studyrun:", use_source(args.source))
    wanted = args.only.split(",") if args.only else [*CASES, *PARTS]
    rows: list[dict] = []
    for name in wanted:
        found = measure_case(name) if name in CASES else measure_part(name)
        report(found)
        rows += found
    OUT.mkdir(exist_ok=True)
    if not args.only:
        write_rows("memory", rows)


if __name__ == "__main__":
    main()
