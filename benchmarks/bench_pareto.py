"""Issue 20: NSGA-II on ZDT1 (5 variables, population 100). How many evaluations each tool
needs before the non-dominated set of everything it evaluated reaches 95% of the true front's
hypervolume against (1, 1) (2/3), studyrun beside EMA Workbench's NSGA-II (platypus, in the
peers' venv: `bash benchmarks/peers/setup_venv.sh`, then `pip install platypus-opt` there); and
studyrun's wall time per generation over pymoo alone (a slope between 20 and 120 generations).

    python benchmarks/bench_pareto.py [--seeds 5]

Writes benchmarks/measured/pareto.csv.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics

import numpy as np
from harness import (
    HERE,
    OUT,
    PEERS_PYTHON,
    ROOT,
    STUDIES,
    last_float,
    measure,
    python,
    report,
    run_study,
    write_rows,
    write_study,
)

TARGET = 0.95 * 2 / 3
POPULATION = 100
STEP = 100  # evaluations between two looks at the hypervolume


def evaluations_to_target(points: np.ndarray) -> int | None:
    """The first multiple of STEP evaluations whose non-dominated set reaches TARGET."""
    from pymoo.indicators.hv import HV

    volume = HV(ref_point=np.ones(2))
    for k in range(STEP, len(points) + 1, STEP):
        if volume(points[:k]) >= TARGET:
            return k
    return None


def zdt1_study(name: str, generations: int, seed: int, scheduler: str | None = None):
    STUDIES.mkdir(parents=True, exist_ok=True)
    shutil.copy(ROOT / "studies" / "zdt.py", STUDIES / "zdt.py")
    study = {"seed": seed,
             "model": {"type": "python", "function": "zdt:zdt1", "vectorized": True},
             "parameters": {f"x{i}": {"bounds": [0, 1]} for i in range(1, 6)},
             "quantities": {"f1": "f1", "f2": "f2"},
             "analysis": {"type": "optimize", "method": "nsga2",
                          "objectives": {"minimize": ["f1", "f2"]},
                          "population": POPULATION, "generations": generations,
                          "reference": {"f1": 1, "f2": 1}}}
    if scheduler:
        study["execution"] = {"scheduler": scheduler}
    return write_study(name, study)


def studyrun_evaluations(seed: int) -> int | None:
    path = zdt1_study(f"pareto-zdt1-seed{seed}", 200, seed, "sync")
    run_study(path)
    results = json.loads((OUT / "results" / path.stem / "analysis.json").read_text())["results"]
    points = np.array([p for p in results["evaluated"]["objectives"] if p is not None])
    return evaluations_to_target(points)


def ema_evaluations(seed: int) -> int | None:
    done = measure([PEERS_PYTHON, HERE / "peers" / "ema_zdt1.py", "--nfe", "20000",
                    "--population", str(POPULATION), "--seed", str(seed)])
    points = np.array(json.loads(done["stdout"].strip().splitlines()[-1]))
    return evaluations_to_target(points)


PYMOO = """
import time
from pymoo.algorithms.moo.nsga2 import NSGA2
from pymoo.optimize import minimize
from pymoo.problems import get_problem
problem = get_problem("zdt1", n_var=5)
start = time.perf_counter()
minimize(problem, NSGA2(pop_size=POPULATION), ("n_gen", GENERATIONS), seed=1)
print(f"seconds={time.perf_counter() - start}")
"""


def per_generation() -> list[dict]:
    """Seconds a generation (slope 20 -> 120 generations): pymoo alone, timed after its
    imports; `studyrun run` on one process (sync) and on the default scheduler."""
    rows = []
    alone = {g: min(last_float(python(PYMOO.replace("POPULATION", str(POPULATION)).replace(
        "GENERATIONS", str(g)))["stdout"], "seconds") for _ in range(3)) for g in (20, 120)}
    rows.append({"what": "pymoo alone: seconds a generation", "value": (alone[120] - alone[20]) / 100})
    for scheduler in ("sync", None):
        walls = {g: min(run_study(zdt1_study(f"pareto-zdt1-{g}-{scheduler}", g, 1, scheduler))["wall"]
                        for _ in range(3)) for g in (20, 120)}
        rows.append({"what": f"studyrun run ({scheduler or 'default scheduler'}): seconds a "
                             "generation", "value": (walls[120] - walls[20]) / 100})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5)
    args = parser.parse_args()
    seeds = range(1, args.seeds + 1)
    rows = []
    for tool, count in (("studyrun", studyrun_evaluations), ("EMA Workbench NSGAII", ema_evaluations)):
        found = [count(seed) for seed in seeds]
        reached = [n for n in found if n is not None]
        rows.append({"what": f"{tool}: evaluations to 95% of the true hypervolume (median of "
                             f"{len(found)} seeds; each: {found})",
                     "value": statistics.median(reached) if reached else None})
        report(rows[-1:])
    rows += per_generation()
    report(rows)
    write_rows("pareto", rows)


if __name__ == "__main__":
    main()
