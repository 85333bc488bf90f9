"""OpenTURNS's FORM, SORM, crude Monte Carlo, importance sampling and subset simulation on the
reliability benchmark's cases, counting model calls.

    benchmarks/out/peers-venv/bin/python benchmarks/peers/reliability_peers.py SEEDS OUT.json

Run by bench_reliability.py in the peer environment (openturns; never studyrun's). OUT.json:
{"openturns": version, "cases": {case: {method: [[setting, seed, runs, pf], ...]}}}: FORM and
SORM once, each sampling method at each of its SETTINGS (a target cov, runs a level) for seeds
0 to SEEDS - 1. FORM and SORM: the Abdo-Rackwitz solver from the median point (OpenTURNS's
default tolerances), gradients by its default centered differences. Monte Carlo: blocks of
1,000 runs until the cov is reached. Importance sampling: around FORM's design point, a
standard normal there, blocks of 100 runs, FORM's runs included. Subset: SubsetSampling,
conditional probability 0.1, N runs a level.
"""

import json
import sys

import numpy as np

REFERENCE = {"r-s": 1.3498980316300946e-3, "linear-10d": 1.0170832425687034e-06,
             "four-branch": 4.4573314906264875e-3}
CASES = tuple(REFERENCE)
CAP = 10 ** 6  # runs of a simulation at most (IS around one of the four-branch's points)
# each sampling method's settings, the same in both tools: a target cov, or runs a level
SETTINGS = {"monte_carlo": (0.1, 0.05), "importance": (0.1, 0.05), "subset": (1000, 3000)}


def g_of(case):
    if case == "r-s":
        return 2, lambda u: (5 + 0.8 * u[:, 0]) - (2 + 0.6 * u[:, 1])
    if case == "linear-10d":
        return 10, lambda u: 4.75 - u.sum(axis=1) / np.sqrt(10)

    def four_branch(u):
        x1, x2 = u[:, 0], u[:, 1]
        c, s = 3 + 0.1 * (x1 - x2) ** 2, (x1 + x2) / np.sqrt(2)
        return np.minimum.reduce([c - s, c + s, (x1 - x2) + 6 / np.sqrt(2),
                                  (x2 - x1) + 6 / np.sqrt(2)])
    return 2, four_branch


def event(ot, case):
    """The failure event g < 0 over independent standard normals, and a call counter."""
    d, g = g_of(case)
    calls = [0]

    def sample(x):
        x = np.array(x)
        calls[0] += len(x)
        return g(x)[:, None]

    function = ot.PythonFunction(d, 1, func_sample=sample)
    inputs = ot.RandomVector(ot.Normal(d))
    return ot.ThresholdEvent(ot.CompositeRandomVector(function, inputs), ot.Less(), 0.0), calls, d


def form(ot, case, second_order=False):
    """From the median point; where the solver stops there (a zero gradient: the four-branch
    system is symmetric about it), again from u = 0.1 (1, ..., 1), the runs of both counted."""
    evt, calls, d = event(ot, case)
    for start in (0.0, 0.1):
        solver = ot.AbdoRackwitz()
        solver.setStartingPoint([start] * d)
        algo = (ot.SORM if second_order else ot.FORM)(solver, evt, [start] * d)
        try:
            algo.run()
            break
        except RuntimeError:
            continue
    result = algo.getResult()
    pf = (result.getEventProbabilityHohenbichler() if second_order
          else result.getEventProbability())
    return calls[0], float(pf), result


def simulation(ot, case, seed, cov, kind):
    ot.RandomGenerator.SetSeed(seed)
    evt, calls, d = event(ot, case)
    extra = 0
    if kind == "importance":
        found, _, result = form(ot, case)
        extra = found
        centre = result.getStandardSpaceDesignPoint()
        experiment = ot.ImportanceSamplingExperiment(ot.Normal(centre, ot.CovarianceMatrix(d)))
        block = 100
    else:
        experiment = ot.MonteCarloExperiment()
        block = 1000
    algo = ot.ProbabilitySimulationAlgorithm(evt, experiment)
    algo.setMaximumCoefficientOfVariation(cov)
    algo.setMaximumOuterSampling(CAP // block)
    algo.setBlockSize(block)
    algo.setMaximumStandardDeviation(0.0)
    algo.run()
    return calls[0] + extra, float(algo.getResult().getProbabilityEstimate())


def subset(ot, case, seed, level_runs):
    ot.RandomGenerator.SetSeed(seed)
    evt, calls, _ = event(ot, case)
    algo = ot.SubsetSampling(evt)
    algo.setConditionalProbability(0.1)
    algo.setMaximumOuterSampling(level_runs)
    algo.setBlockSize(1)
    algo.run()
    return calls[0], float(algo.getResult().getProbabilityEstimate())


def runs_of(case, method):
    """Whether the method applies: crude Monte Carlo at pf 1e-6 needs 4e8 runs for a cov of
    0.05."""
    return not (method == "monte_carlo" and case == "linear-10d")


def main():
    import openturns as ot

    ot.Log.Show(ot.Log.NONE)
    seeds, out = int(sys.argv[1]), sys.argv[2]
    found = {}
    for case in CASES:
        rows = found[case] = {}
        for name, second in (("form", False), ("sorm", True)):
            runs, pf, _ = form(ot, case, second)
            rows[name] = [[0, 0, runs, pf]]
        for method, settings in SETTINGS.items():
            if not runs_of(case, method):
                continue
            rows[method] = [
                [setting, seed, *(subset(ot, case, seed, setting) if method == "subset"
                                  else simulation(ot, case, seed, setting, method))]
                for setting in settings for seed in range(seeds)]
        print(case, "done", flush=True)
    with open(out, "w") as handle:
        json.dump({"openturns": ot.__version__, "cases": found}, handle)


if __name__ == "__main__":
    main()
