"""Issue 32: model runs each way to Shapley effects needs until every effect is within 0.02 of
the closed form, and the runs and CPU seconds of the permutation estimator against the number
of inputs.

    OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 python benchmarks/bench_shapley.py \
        [--seeds 5] [--only permutations,random,knn,pce,peer,coverage,nonlinear,inputs]
        [--coverage-seeds 40] [--peer-python PATH]

Cases: y = X1 + X2 + X3, X1 independent, corr(X2, X3) = 0.5, sd(X3) = 2 (Iooss and Prieur's
closed form: 0.125, 0.2969, 0.5781), and y = b'X with ten correlated normal inputs (b and the
covariance of tests/analyses/test_shapley.py's ten_inputs; exact effects from the conditional
variances). Ways, each on a ladder of sizes and per seed: studyrun's permutation estimator
(exact; and 100-ish random orders for ten inputs) as `type: shapley` draws and estimates it;
knn on given rows drawn from the joint distribution; a PCE (`method: surrogate`) fitted to a
correlated Latin hypercube; and shapleyx (its `shapley_effects`, exhaustive, exact conditional
normals; benchmarks/peers/shapleyx_linear.py, run by --peer-python, a venv of its own:
`python3 -m venv benchmarks/out/shapley-peer-venv && benchmarks/out/shapley-peer-venv/bin/pip
install shapleyx==0.7.0`). The peers that do not fit: SALib 1.6's `shapley` assumes independent
inputs; shapley-effects 0.1 (PyPI) does not install (its sdist's setup.py reads a
requirements.txt it lacks); R's sensitivity and UQLab are not here; OpenTURNS has none.

`coverage`: knn's 95% intervals over many seeds (the six Iooss-Prieur cases on 5,000 given
rows, the ten-input case on 1,000). `nonlinear`: a PCE's and a GP's runs to Ishigami's effects,
independent and with corr(x1, x3) = 0.5, where no surrogate of low degree is exact.

"Runs to an answer" of a seed: the smallest size from which every larger size tested has
max_i |Sh_i - exact_i| <= 0.02; the table gives the median over the seeds (None: not reached
on the ladder). The model costs nothing, so CPU is the estimator's own.
Writes benchmarks/measured/shapley.csv (--csv NAME: another file there).
"""

from __future__ import annotations

import argparse
import csv
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "analyses"))
sys.path.insert(0, str(ROOT / "tests"))

from studyrun.analyses.shapley.estimator import Sizes, on_function  # noqa: E402
from studyrun.analyses.shapley.knn import knn_indices  # noqa: E402

TOLERANCE = 0.02


def cases():
    from test_shapley import covariance, linear_gaussian, ten_inputs

    three = (np.ones(3), covariance(0.5, 2.0))
    beta, cov = ten_inputs()
    return {"3 inputs": (*three, linear_gaussian(*three)["shapley"]),
            "10 inputs": (beta, cov, linear_gaussian(beta, cov)["shapley"])}


def scales(cov):
    scale = np.sqrt(np.diag(cov))
    return cov / np.outer(scale, scale), scale


def permutations(beta, cov, outer, seed, orders=None):
    from scipy.special import ndtri

    correlation, scale = scales(cov)
    d = len(beta)
    sizes = Sizes(3 * outer, outer, 3)
    found = on_function(lambda x: x @ beta, lambda u: ndtri(u) * scale, d, correlation, sizes,
                        orders, 2, 0.95, seed)
    blocks = (1 << d) - 2 if orders is None else orders * (d - 1) + 2 * d
    return found["shapley"], sizes.total + blocks * outer * 3


def given_rows(cov, n, seed, lhs=False):
    from scipy.special import ndtri

    from studyrun.blocks.params import correlate_unit, sample_unit

    correlation, scale = scales(cov)
    u = sample_unit(n, len(cov), "lhs" if lhs else "random", np.random.SeedSequence(seed))
    return ndtri(correlate_unit(u, correlation, "lhs" if lhs else "random")) * scale


def knn(beta, cov, n, seed):
    x = given_rows(cov, n, seed)
    return knn_indices(x, x @ beta, 3, 10, 0.95, seed)["shapley"], n


def pce(beta, cov, n, seed):
    from studyrun.analyses.shapley.estimator import on_surrogate
    from studyrun.analyses.surrogate.fitting import Inputs, Settings, fit_quantity
    from studyrun.blocks.params import Normal

    correlation, scale = scales(cov)
    x = given_rows(cov, n, seed, lhs=True)
    parameters = {f"x{i}": Normal(distribution="normal", mean=0, std=float(s))
                  for i, s in enumerate(scale)}
    inputs = Inputs(parameters)
    fitted = fit_quantity(x, x @ beta, inputs, Settings("pce", None, 1.0, "lars", 5, False, 0.95, 2),
                          seed)
    found = on_surrogate(fitted.surrogate, inputs.natural, len(beta), correlation, 0.95, seed)
    return found["shapley"], n


def peer(python):
    def run(beta, cov, n, seed):
        done = subprocess.run([python, str(ROOT / "benchmarks" / "peers" / "shapleyx_linear.py"),
                               json.dumps({"beta": beta.tolist(), "cov": cov.tolist(), "N": n,
                                           "seed": seed})], capture_output=True, text=True,
                              check=True)
        out = json.loads(done.stdout)
        run.version = out["version"]
        return np.array(out["effects"]), out["runs"]
    return run


LADDERS = {  # way -> case -> sizes
    "permutations": {"3 inputs": [25, 50, 100, 200, 400, 800, 1600], "10 inputs": [2, 4, 8, 16, 32, 64]},
    "random": {"10 inputs": [50, 100, 200, 400, 800, 1600, 3200]},
    "knn": {"3 inputs": [250, 500, 1000, 2000, 4000, 8000, 16000],
            "10 inputs": [500, 1000, 2000, 4000]},
    "pce": {"3 inputs": [20, 30, 50, 100, 200], "10 inputs": [30, 50, 100, 200, 400]},
    "peer": {"3 inputs": [250, 500, 1000, 2000, 4000, 8000, 16000],
             "10 inputs": [100, 200, 400, 800, 1600]},
}


def reached(errors: list[float], runs: list[int]) -> int | None:
    """The fewest runs from which every larger size tested is within TOLERANCE."""
    best = None
    for error, n in sorted(zip(errors, runs), key=lambda pair: -pair[1]):
        if error > TOLERANCE:
            break
        best = n
    return best


def runs_to_answer(ways, seeds, writer):
    table = []
    for way, call in ways.items():
        for case, (beta, cov, exact) in cases().items():
            if case not in LADDERS[way]:
                continue
            per_seed = []
            for seed in range(1, seeds + 1):
                errors, runs = [], []
                for size in LADDERS[way][case]:
                    start = time.process_time()
                    found, n = call(beta, cov, size, seed)
                    cpu = time.process_time() - start
                    error = float(np.abs(found - exact).max())
                    errors.append(error)
                    runs.append(n)
                    writer.writerow([way, case, seed, size, n, f"{error:.4f}", f"{cpu:.2f}"])
                per_seed.append(reached(errors, runs))
            known = sorted(r for r in per_seed if r is not None)
            median = (known[len(per_seed) // 2] if len(known) > len(per_seed) // 2 else None)
            table.append((way, case, median, per_seed))
            print(f"{way:13} {case:10} runs to an answer (median of {seeds}): {median}  "
                  f"per seed: {per_seed}", flush=True)
    return table


def coverage(seeds, writer):
    """knn on given rows: how often the 95% interval holds each effect and how often every
    effect is within 0.02, over many seeds: the six Iooss-Prieur cases on 5,000 rows, and the
    ten-input case on 1,000 rows (a fifth of the seeds: 20 s of CPU each)."""
    from test_shapley import CASES, covariance, iooss_prieur, linear_gaussian, ten_inputs

    beta, cov = ten_inputs()
    runs = [(f"rho {rho} sigma {sigma}", np.ones(3), covariance(rho, sigma),
             iooss_prieur(rho, sigma), 5000, seeds) for rho, sigma in CASES]
    runs.append(("10 inputs", beta, cov, linear_gaussian(beta, cov)["shapley"], 1000,
                 max(2, seeds // 5)))
    for name, b, c, exact, n, count in runs:
        held, close, errors, widths, kucherenko = [], [], [], [], []
        exact_k = linear_gaussian(b, c)
        start = time.process_time()
        for seed in range(count):
            rng = np.random.default_rng(1000 + seed)
            x = rng.standard_normal((n, len(b))) @ np.linalg.cholesky(c).T
            found = knn_indices(x, x @ b, 3, 10, 0.95, seed)
            error = found["shapley"] - exact
            held.append(np.abs(error) <= found["shapley_conf"])
            close.append(np.abs(error).max() <= TOLERANCE)
            errors.append(error)
            widths.append(found["shapley_conf"])
            kucherenko.append([np.abs(found[k] - exact_k[k]) <= found[f"{k}_conf"]
                               for k in ("S1", "ST")])
        cpu = (time.process_time() - start) / count
        cover = np.mean(held, axis=0)
        line = (f"{name}: {n} rows, {count} seeds: 95% intervals held each effect "
                f"{cover.min():.0%}-{cover.max():.0%} of the time; every effect within 0.02 in "
                f"{np.mean(close):.0%}; mean error (bias) at most {np.abs(np.mean(errors, axis=0)).max():.4f}, "
                f"largest error {np.abs(errors).max():.4f}, mean half-width {np.mean(widths):.4f}, "
                f"{cpu:.2f} s CPU each; Kucherenko's S1 and ST held "
                f"{np.mean(kucherenko, axis=(0, 2)).round(2).tolist()}")
        writer.writerow(["coverage", name, count, n, n, f"{np.abs(errors).max():.4f}", f"{cpu:.2f}",
                         f"{cover.min():.3f}", f"{np.mean(close):.3f}"])
        print(line, flush=True)


def ishigami(x):
    return np.sin(x[:, 0]) + 7 * np.sin(x[:, 1]) ** 2 + 0.1 * x[:, 2] ** 4 * np.sin(x[:, 0])


NONLINEAR = {"pce": [50, 100, 200, 300, 500], "gp": [100, 200, 300, 500]}


def nonlinear(seeds, writer):
    """A surrogate's runs to Ishigami's effects (nonlinear: no PCE of low degree is exact), with
    independent inputs (exact: S1_1 + S13/2, S1_2, S13/2) and with corr(x1, x3) = 0.5 under the
    Gaussian copula (reference: the permutation estimator on Ishigami itself, N_V = 400,000 and
    100,000 x 3 a cost), through `type: shapley, method: surrogate` as a study runs it."""
    import types

    from studyrun.analyses.salib import map_to_natural
    from studyrun.analyses.shapley import Shapley
    from studyrun.blocks.params import correlate_unit, sample_unit
    from studyrun.blocks.params.continuous import Uniform

    varied = {n: Uniform(low=-np.pi, high=np.pi) for n in ("x1", "x2", "x3")}
    correlated = np.eye(3)
    correlated[0, 2] = correlated[2, 0] = 0.5
    found = on_function(ishigami, lambda u: (2 * u - 1) * np.pi, 3, correlated,
                        Sizes(400_000, 100_000, 3), None, 30, 0.95, 99)
    print(f"reference, corr(x1, x3) = 0.5: {np.round(found['shapley'], 4)} +- "
          f"{np.round(found['shapley_conf'], 4)}", flush=True)
    cases = {"Ishigami": (None, np.array([0.3139 + 0.2437 / 2, 0.4424, 0.2437 / 2])),
             "Ishigami corr 0.5": (correlated, found["shapley"])}
    for which, sizes in NONLINEAR.items():
        analysis = Shapley(type="shapley", method="surrogate", surrogate=which)
        for case, (correlation, exact) in cases.items():
            context = types.SimpleNamespace(varied=varied, correlation=correlation)
            per_seed, held = [], []
            for seed in range(1, seeds + 1):
                errors = []
                for n in sizes:
                    start = time.process_time()
                    unit = correlate_unit(sample_unit(n, 3, "lhs", np.random.SeedSequence(seed)),
                                          correlation, "lhs")
                    x = map_to_natural(unit, varied, list(varied))
                    out = analysis.by_surrogate(x, ishigami(x), np.zeros(n, bool),
                                                {"analysis_seed": seed}, context)
                    error = np.abs(out["shapley"] - exact)
                    errors.append(float(error.max()))
                    held.append(bool((error <= out["shapley_conf"]).all()))
                    writer.writerow([which, case, seed, n, n, f"{error.max():.4f}",
                                     f"{time.process_time() - start:.2f}", f"{out['q2']:.4f}"])
                per_seed.append(reached(errors, sizes))
            known = sorted(r for r in per_seed if r is not None)
            median = known[len(per_seed) // 2] if len(known) > len(per_seed) // 2 else None
            print(f"{which:4} {case:18} runs to an answer (median of {seeds}): {median}  per seed: "
                  f"{per_seed}; every effect within its interval in {np.mean(held):.0%} of fits",
                  flush=True)


def by_inputs(writer):
    """Runs and CPU of the permutation estimator (design and estimate, default sizes) by d."""
    from scipy.special import ndtri

    from studyrun.analyses.shapley import Sizes as Defaults

    default = Defaults()
    for d in range(2, 13):
        rng = np.random.default_rng(d)
        a = rng.standard_normal((d, d))
        cov = a @ a.T / d + np.eye(d)
        correlation, scale = scales(cov)
        orders = None if d <= 8 else 100
        start = time.process_time()
        on_function(lambda x: x.sum(axis=1), lambda u, scale=scale: ndtri(u) * scale, d, correlation,
                    Sizes(default.total, default.outer, default.inner), orders, 100, 0.95, 1)
        cpu = time.process_time() - start
        blocks = (1 << d) - 2 if orders is None else orders * (d - 1) + 2 * d
        runs = default.total + blocks * default.outer * default.inner
        writer.writerow(["inputs", d, "exact" if orders is None else orders, "", runs, "",
                         f"{cpu:.2f}"])
        print(f"d = {d:2}: {'exact' if orders is None else f'{orders} orders':10} {runs:>9,} runs, "
              f"{cpu:6.2f} s CPU (design and estimate, 100 resamples)", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--only", default="permutations,random,knn,pce,peer,coverage,nonlinear,inputs")
    parser.add_argument("--peer-python", default=str(ROOT / "benchmarks" / "out" /
                                                     "shapley-peer-venv" / "bin" / "python"))
    parser.add_argument("--coverage-seeds", type=int, default=40)
    parser.add_argument("--csv", default="shapley.csv", help="in benchmarks/measured/")
    args = parser.parse_args()
    only = args.only.split(",")
    ways = {"permutations": lambda b, c, n, s: permutations(b, c, n, s),
            "random": lambda b, c, n, s: permutations(b, c, 2, s, orders=n),
            "knn": knn, "pce": pce, "peer": peer(args.peer_python)}
    ways = {k: v for k, v in ways.items() if k in only}
    out = ROOT / "benchmarks" / "measured" / args.csv
    with out.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["way", "case", "seed", "size", "runs", "max_error", "cpu_s"])
        runs_to_answer(ways, args.seeds, writer)
        if "coverage" in only:
            coverage(args.coverage_seeds, writer)
        if "nonlinear" in only:
            nonlinear(args.seeds, writer)
        if "inputs" in only:
            by_inputs(writer)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
