"""EMA Workbench's NSGA-II (platypus) on ZDT1 with 5 levers: every evaluation's (f1, f2), in
the order made, as JSON on the last line, after `seconds=`. Run in benchmarks/out/peers-venv.

    python ema_zdt1.py --nfe 10000 --population 100 --seed 1
"""

import argparse
import json
import random
import time

import numpy as np
from ema_workbench import Model, RealParameter, ScalarOutcome, SequentialEvaluator
from platypus import NSGAII

SEEN: list[tuple[float, float]] = []


def zdt1(x1, x2, x3, x4, x5):
    g = 1 + 9 * (x2 + x3 + x4 + x5) / 4
    f1, f2 = x1, g * (1 - np.sqrt(x1 / g))
    SEEN.append((float(f1), float(f2)))
    return {"f1": f1, "f2": f2}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nfe", type=int, default=10000)
    parser.add_argument("--population", type=int, default=100)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    random.seed(args.seed)  # platypus draws from the random module
    np.random.seed(args.seed)
    model = Model("zdt1", function=zdt1)
    model.levers = [RealParameter(f"x{i}", 0, 1) for i in range(1, 6)]
    model.outcomes = [ScalarOutcome("f1", kind=ScalarOutcome.MINIMIZE),
                      ScalarOutcome("f2", kind=ScalarOutcome.MINIMIZE)]
    start = time.perf_counter()
    with SequentialEvaluator(model) as evaluator:
        try:
            evaluator.optimize(nfe=args.nfe, searchover="levers", algorithm=NSGAII,
                               population_size=args.population)
        except TypeError as error:  # EMA 2.5.3 logs len(optimizer.archive): None for NSGAII
            if "NoneType" not in str(error):
                raise
    print(f"seconds={time.perf_counter() - start}")
    print(json.dumps(SEEN))


if __name__ == "__main__":
    main()
