"""Issue 17: model runs each approach needs until every total Sobol' index is within 0.02.

    OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 python benchmarks/bench_surrogate.py \
        [--seeds 3] [--only sobol,pce,gp,peers] [--functions ishigami,gfunction,borehole]

Functions: Ishigami (a = 7, b = 0.1; analytic ST), the Sobol' G function (8 inputs,
a = 0, 1, 4.5, 9, 99, 99, 99, 99; analytic ST) and the borehole function (8 inputs, the
distributions of studies/borehole-gp.yaml; reference ST: the mean of 8 independent Saltelli
estimates of N = 2^16 (655,360 runs each), its error their standard error).

Approaches, each on a grid of sample sizes and per seed: `sobol`, Saltelli's design as studyrun's
sobol analysis makes it (SALib.sample.sobol, SALib.analyze.sobol; N(D + 2) runs, N a power of
two); studyrun's PCE (`fit_quantity`, degree auto, LARS; q = 1 and, on the G function, 0.75)
and GP (up to 400 runs, one seed; --gp-max); OpenTURNS and chaospy PCEs (up to 400 runs,
--peer-max) (benchmarks/peers/surrogate_peers.py in
the peer environment, on the same Latin-hypercube samples). "Runs to an answer": the smallest
size from which every larger size tested has max_i |ST_i - ST_i ref| <= 0.02.

Also times fitting 1,000 borehole runs with studyrun's PCE (target < 5 s) and GP.

`--only fits` (issue 33) measures instead the CPU seconds (user + sys of every thread) of one
fit and its indices: a GP of 5,000 borehole runs (target 30 s on 2 cores), PCEs of 2,000 runs
with q 0.75 on the G function and borehole (target 10 s), and a GP of --gp-compare runs both as
studyrun fits it and with the hyperparameters fitted on all runs (their Q2 within 0.002). Run it
with another tree's studyrun as `--root DIR` for a before.
Writes benchmarks/measured/surrogate.csv (summary) and surrogate_curves.csv (every fit).
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from harness import HERE, OUT, ROOT, write_rows

if "--root" in sys.argv:  # another tree's studyrun (a before)
    ROOT = Path(sys.argv[sys.argv.index("--root") + 1]).resolve()
sys.path.insert(0, str(ROOT))  # studyrun as in this work tree (PYTHONPATH may say otherwise)

TOLERANCE = 0.02
SOBOL = "sobol (Saltelli)"
SIZES = [25, 50, 75, 100, 150, 200, 300, 400, 600, 800, 1000, 1500, 2000]
GP_MAX = 400  # a GP of 1,000 runs of 8 inputs takes ~2.5 min here
SALTELLI_BASE = [2 ** k for k in range(2, 16)]
PEER_PYTHON = "/tmp/peerenv/bin/python"
PI = math.pi

G_A = np.array([0, 1, 4.5, 9, 99, 99, 99, 99])


def ishigami(x):
    return np.sin(x[:, 0]) + 7 * np.sin(x[:, 1]) ** 2 + 0.1 * x[:, 2] ** 4 * np.sin(x[:, 0])


def gfunction(x):
    return np.prod((np.abs(4 * x - 2) + G_A) / (1 + G_A), axis=1)


def borehole(x):
    rw, r, Tu, Hu, Tl, Hl, L, Kw = x.T  # as studies/borehole.py
    log_ratio = np.log(r / rw)
    return (2 * np.pi * Tu * (Hu - Hl)
            / (log_ratio * (1 + 2 * L * Tu / (log_ratio * rw**2 * Kw) + Tu / Tl)))


def g_reference():
    v = 1 / (3 * (1 + G_A) ** 2)
    total = np.prod(1 + v) - 1
    return np.array([v[i] * np.prod(np.delete(1 + v, i)) for i in range(len(v))]) / total


U = "uniform"
CASES = {  # name: (function, [(kind, a, b)] as the peers take them, hyperbolic q values tried)
    "ishigami": (ishigami, [(U, -PI, PI)] * 3, [1.0]),
    "gfunction": (gfunction, [(U, 0.0, 1.0)] * 8, [1.0, 0.75]),
    "borehole": (borehole, [("normal", 0.10, 0.0161812), ("lognormal", 7.71, 1.0056),
                            (U, 63070, 115600), (U, 990, 1110), (U, 63.1, 116), (U, 700, 820),
                            (U, 1120, 1680), (U, 9855, 12045)], [1.0]),
}
NAMES = {"borehole": ["rw", "r", "Tu", "Hu", "Tl", "Hl", "L", "Kw"]}


def inputs_of(name):
    from pydantic import TypeAdapter

    from studyrun.analyses.surrogate.fitting import Inputs
    from studyrun.blocks.params import ParameterSpec

    adapter = TypeAdapter(ParameterSpec)
    keys = {U: ("low", "high"), "normal": ("mean", "std"), "lognormal": ("mu", "sigma")}
    specs = CASES[name][1]
    names = NAMES.get(name, [f"x{i + 1}" for i in range(len(specs))])
    return Inputs({n: adapter.validate_python({"distribution": kind, **dict(zip(keys[kind], ab))})
                   for n, (kind, *ab) in zip(names, specs)})


def saltelli_st(name, base, seed):
    """ST by studyrun's sobol analysis' route: SALib's sample and analyze, through each ppf."""
    from SALib.analyze import sobol as analyze
    from SALib.sample import sobol as sample

    inputs = inputs_of(name)
    d = len(inputs.names)
    problem = {"num_vars": d, "names": inputs.names, "bounds": [[0, 1]] * d}
    unit = sample.sample(problem, base, calc_second_order=False, seed=seed)
    y = CASES[name][0](inputs.natural(unit))
    return analyze.analyze(problem, y, calc_second_order=False, num_resamples=10,
                           seed=seed)["ST"], len(y)


def references(names):
    """name -> (ST, its standard error) and a note on how it was obtained."""
    refs = {"ishigami": (np.array([0.5576, 0.4424, 0.2437]), np.zeros(3), "analytic"),
            "gfunction": (g_reference(), np.zeros(8), "analytic")}
    if "borehole" in names:
        from studyrun.analyses.salib.saltelli import saltelli_unit
        from studyrun.analyses.surrogate.fitting import sobol_estimates

        inputs = inputs_of("borehole")
        estimates = []
        for seed in range(8):
            unit = saltelli_unit(8, 1 << 16, False, 1000 + seed)
            values = borehole(inputs.natural(unit))[:, None]
            estimates.append(sobol_estimates(values, 8, False)[1][:, 0])
        estimates = np.array(estimates)
        refs["borehole"] = (estimates.mean(axis=0), estimates.std(axis=0, ddof=1) / np.sqrt(8),
                            "Saltelli/Jansen, 8 x N = 2^16 (5.2M runs)")
    return refs


def training(name, n, seed):
    """The Latin-hypercube training runs every surrogate of (name, n, seed) shares."""
    from studyrun.blocks.params.sampling import sample_unit

    inputs = inputs_of(name)
    unit = sample_unit(n, len(inputs.names), "lhs", np.random.SeedSequence([seed, n]))
    x = inputs.natural(unit)
    return x, CASES[name][0](x)


def studyrun_st(name, x, y, method, q=1.0, seed=0):
    from studyrun.analyses.surrogate.fitting import Settings, fit_quantity

    inputs = inputs_of(name)
    settings = Settings(method=method, degree=None, q=q, fit="lars", folds=None,
                        second_order=False, confidence=0.95, resamples=10)
    fitted = fit_quantity(x, y, inputs, settings, seed)
    info = {"q2": round(fitted.q2, 4)}
    if method == "pce":
        info["degree"] = fitted.results["degree"]
    return np.array([fitted.results["ST"][k] for k in inputs.names]), info


def runs_to_answer(curve):
    """Smallest size from which every larger size tested meets the tolerance (None: never)."""
    answer = None
    for runs, error in sorted(curve):
        if error <= TOLERANCE:
            answer = answer or runs
        else:
            answer = None
    return answer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--only", default="sobol,pce,gp,peers")
    parser.add_argument("--functions", default="ishigami,gfunction,borehole")
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)))
    parser.add_argument("--peer-python", default=PEER_PYTHON)
    parser.add_argument("--peer-seeds", type=int, default=3, help="seeds the peers fit")
    parser.add_argument("--gp-seeds", type=int, default=1, help="seeds the GP fits (slow)")
    parser.add_argument("--gp-max", type=int, default=GP_MAX, help="largest GP training set")
    parser.add_argument("--peer-max", type=int, default=400,
                        help="largest training set the peers fit (OpenTURNS' degree search at "
                        "2,000 runs takes many minutes)")
    parser.add_argument("--keep", action="store_true",
                        help="keep the rows of measured/surrogate*.csv this run does not redo")
    parser.add_argument("--root", help="the studyrun tree to measure (default: this one)")
    parser.add_argument("--gp-runs", type=int, default=5000, help="the GP fit timed (fits)")
    parser.add_argument("--pce-runs", type=int, default=2000, help="the PCE fits timed (fits)")
    parser.add_argument("--gp-compare", type=int, default=0,
                        help="runs of the GP compared with the full fit (fits; 0: none)")
    args = parser.parse_args()
    if args.only == "fits":
        return fit_costs(args)
    only, names = args.only.split(","), args.functions.split(",")
    sizes = [int(s) for s in args.sizes.split(",")]
    seeds = range(1, args.seeds + 1)
    refs = references(names)
    for name in names:
        ref, err, how = refs[name]
        print(f"{name} reference ST ({how}): {np.round(ref, 4).tolist()}"
              f" +- {np.round(err, 4).tolist()}", flush=True)
    curves: list[dict] = []

    def record(name, approach, seed, runs, st, seconds, **info):
        error = float(np.max(np.abs(np.asarray(st) - refs[name][0])))
        curves.append({"function": name, "approach": approach, "seed": seed, "runs": runs,
                       "max_error": round(error, 4), "ok": error <= TOLERANCE,
                       "seconds": round(seconds, 3), **info})
        print(f"  {name} {approach} seed {seed} runs {runs}: max error {error:.4f} "
              f"({seconds:.2f} s) {info}", flush=True)

    samples = {(name, seed, n): training(name, n, seed)
               for name in names for seed in seeds for n in sizes}
    with tempfile.TemporaryDirectory() as tmp:
        peer = None
        if "peers" in only:  # on the other core while studyrun fits
            np.savez(Path(tmp) / "samples.npz",
                     **{f"{k[0]}/{k[1]}/{k[2]}/{v}": xy[i] for k, xy in samples.items()
                        if k[1] <= args.peer_seeds and k[2] <= args.peer_max
                        for i, v in enumerate("xy")})
            (Path(tmp) / "cases.json").write_text(json.dumps(
                {name: {"inputs": CASES[name][1], "q": CASES[name][2]} for name in names}))
            OUT.mkdir(exist_ok=True)  # its progress: benchmarks/out/surrogate_peers.log
            peer = subprocess.Popen([args.peer_python, str(HERE / "peers" / "surrogate_peers.py"),
                                     f"{tmp}/samples.npz", f"{tmp}/cases.json", f"{tmp}/out.json"],
                                    stdout=open(OUT / "surrogate_peers.log", "w"))
        for name in names:
            for seed in seeds:
                if "sobol" in only:
                    for base in SALTELLI_BASE:
                        start = time.perf_counter()
                        st, runs = saltelli_st(name, base, seed)
                        record(name, SOBOL, seed, runs, st, time.perf_counter() - start)
                for n in sizes:
                    x, y = samples[name, seed, n]
                    jobs = []
                    if "pce" in only:
                        jobs += [(f"studyrun pce q={q:g}", "pce", q) for q in CASES[name][2]]
                    if "gp" in only and n <= args.gp_max and seed <= args.gp_seeds:
                        jobs.append(("studyrun gp", "gp", 1.0))
                    for approach, method, q in jobs:
                        start = time.perf_counter()
                        st, info = studyrun_st(name, x, y, method, q, seed)
                        record(name, approach, seed, n, st, time.perf_counter() - start, **info)
        timed = timings() if "pce" in only and "borehole" in names else []
        if peer is not None:
            if peer.wait() != 0:
                print("the peer script failed: see benchmarks/out/surrogate_peers.log")
            if (Path(tmp) / "out.json").exists():  # written after every sample
                add_peers(json.loads((Path(tmp) / "out.json").read_text()), curves, record)
    if args.keep:
        curves, timed = kept(curves, timed)
    write_rows("surrogate_curves", curves)
    summary = summarize(curves, names, refs) + timed
    print(f"\nwrote {write_rows('surrogate', summary)}")


def kept(curves, timed):
    """This run's rows and the earlier ones of the (function, approach) pairs it did not redo."""
    import csv

    from harness import RESULTS

    redone = {(c["function"], c["approach"]) for c in curves}
    with open(RESULTS / "surrogate_curves.csv") as handle:
        for row in csv.DictReader(handle):
            if (row["function"], row["approach"]) not in redone:
                row.update(seed=int(row["seed"]), runs=int(row["runs"]),
                           max_error=float(row["max_error"]) if row["max_error"] else "")
                curves.append({k: v for k, v in row.items() if v != "" or k == "max_error"})
    if not timed:
        with open(RESULTS / "surrogate.csv") as handle:
            timed = [row for row in csv.DictReader(handle) if "fit 1,000" in row["approach"]]
    return curves, timed


def add_peers(peers, curves, record):
    for approach, by_function in peers.items():
        if approach.endswith(":info"):
            continue
        for name, by_seed in by_function.items():
            for seed, by_n in by_seed.items():
                for n, st in by_n.items():
                    info = dict(peers[approach + ":info"][name][seed][n])
                    seconds = info.pop("seconds")
                    if isinstance(st, str):
                        curves.append({"function": name, "approach": approach, "seed": int(seed),
                                       "runs": int(n), "max_error": "", "ok": False,
                                       "seconds": seconds, "note": st})
                        print(f"  {name} {approach} seed {seed} runs {n}: {st}")
                    else:
                        record(name, approach, int(seed), int(n), st, seconds, **info)


def summarize(curves, names, refs):
    """Runs to an answer per function, approach and seed, as rows and a markdown table."""
    rows = []
    print("\n| function | approach | runs to an answer, per seed | median | largest tested | "
          "median / sobol |\n|---|---|---|---|---|---|")
    for name in names:
        approaches = sorted(dict.fromkeys(c["approach"] for c in curves if c["function"] == name),
                            key=lambda a: (a != SOBOL, not a.startswith("studyrun")))
        medians = {}
        for approach in approaches:
            per_seed, errors = [], []
            seeds = sorted({c["seed"] for c in curves
                            if c["function"] == name and c["approach"] == approach})
            for seed in seeds:
                curve = [(c["runs"], c["max_error"]) for c in curves
                         if c["function"] == name and c["approach"] == approach
                         and c["seed"] == seed]
                if any(e == "" for _, e in curve):
                    errors.append(seed)
                curve = [(r, e if e != "" else np.inf) for r, e in curve]
                per_seed.append(runs_to_answer(curve) if curve else None)
            largest = max(c["runs"] for c in curves
                          if c["function"] == name and c["approach"] == approach)
            reached = [r for r in per_seed if r is not None]
            median = float(np.median(reached)) if len(reached) == len(per_seed) else None
            medians[approach] = median
            base = medians.get(SOBOL)
            ratio = f"1/{base / median:.0f}" if base and median and approach != SOBOL else ""
            shown = ", ".join(str(r) if r else f"> {largest}" for r in per_seed)
            note = f" (errors at seeds {errors})" if errors else ""
            print(f"| {name} | {approach} | {shown}{note} | "
                  f"{'' if median is None else f'{median:.0f}'} | {largest} | {ratio} |")
            rows.append({"function": name, "approach": approach, "runs_per_seed": shown,
                         "median_runs": median, "largest_tested": largest, "per_sobol": ratio,
                         "reference": refs[name][2]})
    return rows


def timings():
    """Fitting 1,000 borehole runs (8 inputs), in this process after imports: PCE best of 3, GP
    once (it takes minutes)."""
    rows = []
    x, y = training("borehole", 1000, 1)
    for method, target in (("pce", "< 5 s"), ("gp", "")):
        times = []
        for _ in range(3 if method == "pce" else 1):
            start = time.perf_counter()
            studyrun_st("borehole", x, y, method, seed=1)
            times.append(time.perf_counter() - start)
        t = min(times)
        ok = "" if not target else ("yes" if t < 5 else "NO")
        print(f"fit 1,000 borehole runs, studyrun {method}: {t:.2f} s {target} {ok}")
        rows.append({"function": "borehole", "approach": f"studyrun {method}: fit 1,000 runs "
                     f"(s, best of {len(times)})", "median_runs": round(t, 2), "target": target,
                     "meets": ok})
    return rows


def cpu_seconds() -> float:
    """User + system CPU seconds of this process, every thread included."""
    import resource

    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def fit_costs(args) -> None:
    """CPU seconds, Q2 and ST error of single fits (the issue 33 targets)."""
    import os

    import threadpoolctl

    refs = references(["borehole"])
    print(f"studyrun from {ROOT}; load {os.getloadavg()[0]:.1f}; BLAS "
          f"{[(i['internal_api'], i['num_threads']) for i in threadpoolctl.threadpool_info()]}")
    rows = []
    jobs = [("borehole", "gp", 1.0, args.gp_runs)] if args.gp_runs else []
    jobs += [(name, "pce", 0.75, args.pce_runs) for name in ("gfunction", "borehole")
             if args.pce_runs]
    for name, method, q, n in jobs:
        x, y = training(name, n, 1)
        cpu, wall = cpu_seconds(), time.perf_counter()
        st, info = studyrun_st(name, x, y, method, q, seed=1)
        cpu, wall = cpu_seconds() - cpu, time.perf_counter() - wall
        error = float(np.max(np.abs(st - refs[name][0])))
        rows.append({"function": name, "approach": f"studyrun {method} q={q:g}", "runs": n,
                     "cpu_seconds": round(cpu, 2), "wall_seconds": round(wall, 2),
                     "max_st_error": round(error, 4), **info})
        print(rows[-1], flush=True)
    if args.gp_compare:
        rows.append(full_fit_compared(args.gp_compare))
        print(rows[-1], flush=True)
    print(f"wrote {write_rows('surrogate_fits' + ('_before' if args.root else ''), rows)}")


def full_fit_compared(n: int) -> dict:
    """Q2 of studyrun's GP of n borehole runs, and of one whose hyperparameters are fitted on all
    n runs (the fit before issue 33), on the same runs and seed."""
    from studyrun.analyses.surrogate import gp
    from studyrun.analyses.surrogate.fitting import fit_gp, scores

    inputs = inputs_of("borehole")
    x, y = training("borehole", n, 1)
    from studyrun.analyses.surrogate.fitting import Settings

    settings = Settings(method="gp", degree=None, q=1.0, fit="lars", folds=None,
                        second_order=False, confidence=0.95, resamples=10)
    q2 = {}
    for how, subsample in (("studyrun", getattr(gp, "SUBSAMPLE", n)), ("full", n)):
        saved = getattr(gp, "SUBSAMPLE", None)
        if saved is not None:
            gp.SUBSAMPLE = subsample
        try:
            cpu = cpu_seconds()
            _, predicted, _ = fit_gp(x, y, inputs, settings, 1, 2, 3)
            q2[how] = (scores(y, predicted)[0], cpu_seconds() - cpu)
        finally:
            if saved is not None:
                gp.SUBSAMPLE = saved
    return {"function": "borehole", "approach": "studyrun gp against a full fit", "runs": n,
            "q2": round(q2["studyrun"][0], 5), "q2_full": round(q2["full"][0], 5),
            "cpu_seconds": round(q2["studyrun"][1], 2), "cpu_seconds_full": round(q2["full"][1], 2)}


if __name__ == "__main__":
    main()
