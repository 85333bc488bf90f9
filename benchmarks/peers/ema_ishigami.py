"""Sobol' of Ishigami (N base samples, first and total order) with EMA Workbench.

    benchmarks/out/peers-venv/bin/python benchmarks/peers/ema_ishigami.py --evaluator sequential|multiprocessing

perform_experiments with the SOBOL sampler (second_order=False) over a scalar Model, then
SALib.analyze.sobol on the outcomes, as EMA Workbench's own Sobol' examples do. Prints
runs=, import=, work= (seconds after imports: sampling, experiments, analysis) and per_run=.
"""

import argparse
import logging
import math
import resource
import time

t0 = time.perf_counter()
from ema_workbench import (  # noqa: E402
    Model,
    MultiprocessingEvaluator,
    RealParameter,
    ScalarOutcome,
    SequentialEvaluator,
)
from ema_workbench.em_framework.evaluators import Samplers  # noqa: E402
from ema_workbench.em_framework.salib_samplers import get_SALib_problem  # noqa: E402
from SALib.analyze import sobol  # noqa: E402

T_IMPORT = time.perf_counter() - t0


def ishigami(x1, x2, x3, a=7.0, b=0.1):
    return {"y": math.sin(x1) + a * math.sin(x2) ** 2 + b * x3**4 * math.sin(x1)}


def cpu_seconds() -> float:
    """CPU seconds of this process and the children it waited for (a loaded machine inflates
    wall times, much less CPU times)."""
    own, waited = (resource.getrusage(who) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
    return own.ru_utime + own.ru_stime + waited.ru_utime + waited.ru_stime  # to the microsecond


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--evaluator", choices=("sequential", "multiprocessing"), default="sequential")
    parser.add_argument("--samples", type=int, default=1024)
    parser.add_argument("--processes", type=int, default=2)
    args = parser.parse_args()
    logging.disable(logging.WARNING)
    model = Model("ishigami", function=ishigami)
    model.uncertainties = [RealParameter(f"x{i}", -math.pi, math.pi) for i in (1, 2, 3)]
    model.outcomes = [ScalarOutcome("y")]
    start, cpu = time.perf_counter(), cpu_seconds()
    Samplers.SOBOL.value.second_order = False  # N (D + 2) runs, as studyrun's study
    if args.evaluator == "sequential":
        evaluator = SequentialEvaluator(model)
    else:
        evaluator = MultiprocessingEvaluator(model, n_processes=args.processes)
    with evaluator:
        started = time.perf_counter()
        experiments, outcomes = evaluator.perform_experiments(args.samples,
                                                              uncertainty_sampling=Samplers.SOBOL)
        ran = time.perf_counter()
    problem = get_SALib_problem(model.uncertainties)
    indices = sobol.analyze(problem, outcomes["y"], calc_second_order=False)
    work, cpu = time.perf_counter() - start, cpu_seconds() - cpu
    runs = len(outcomes["y"])
    print(f"runs={runs} import={T_IMPORT:.4f} pool_start={started - start:.4f} "
          f"experiments={ran - started:.4f} work={work:.4f} cpu={cpu:.4f} per_run={work / runs:.3e} "
          f"S1_x1={indices['S1'][0]:.4f}")


if __name__ == "__main__":
    main()
