"""Sobol' of Ishigami with a plain Python loop and SALib: the floor any tool adds to.

    python benchmarks/peers/salib_loop.py [--samples 1024] [--vectorized]

SALib.sample.sobol, then a loop calling the scalar function once per run (or one call of the
vectorized function), then SALib.analyze.sobol. Prints runs=, import=, work=, per_run=.
"""

import argparse
import math
import resource
import time

t0 = time.perf_counter()
import numpy as np  # noqa: E402
from SALib.analyze import sobol as analyze  # noqa: E402
from SALib.sample import sobol as sample  # noqa: E402

T_IMPORT = time.perf_counter() - t0


def ishigami(x1, x2, x3, a=7.0, b=0.1):
    return math.sin(x1) + a * math.sin(x2) ** 2 + b * x3**4 * math.sin(x1)


def cpu_seconds() -> float:
    """CPU seconds of this process and the children it waited for (a loaded machine inflates
    wall times, much less CPU times)."""
    own, waited = (resource.getrusage(who) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
    return own.ru_utime + own.ru_stime + waited.ru_utime + waited.ru_stime  # to the microsecond


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--samples", type=int, default=1024)
    parser.add_argument("--vectorized", action="store_true")
    args = parser.parse_args()
    problem = {"num_vars": 3, "names": ["x1", "x2", "x3"], "bounds": [[-math.pi, math.pi]] * 3}
    start, cpu = time.perf_counter(), cpu_seconds()
    X = sample.sample(problem, args.samples, calc_second_order=False, seed=1)
    if args.vectorized:
        Y = np.sin(X[:, 0]) + 7 * np.sin(X[:, 1]) ** 2 + 0.1 * X[:, 2] ** 4 * np.sin(X[:, 0])
    else:
        Y = np.array([ishigami(*row) for row in X.tolist()])
    indices = analyze.analyze(problem, Y, calc_second_order=False)
    work, cpu = time.perf_counter() - start, cpu_seconds() - cpu
    print(f"runs={len(Y)} import={T_IMPORT:.4f} work={work:.4f} cpu={cpu:.4f} per_run={work / len(Y):.3e} "
          f"S1_x1={indices['S1'][0]:.4f}")


if __name__ == "__main__":
    main()
