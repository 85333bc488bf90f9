"""Do a surrogate's intervals and its `trusted` mean what they say? Coverage of S1_conf, ST_conf
over many seeds and sample sizes on functions whose indices are known.

    OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 python benchmarks/bench_surrogate_coverage.py \
        [--quick] [--seeds 8] [--sizes 25,50,100,200,400] [--methods pce,gp] [--reference]

Functions: Ishigami (a = 7, b = 0.1; analytic), Sobol' G (8 inputs, a = 0, 1, 4.5, 9, 99, 99,
99, 99; analytic), wing weight (10 inputs, Forrester et al. 2008) and borehole (8 inputs, the
distributions of studies/borehole-gp.yaml). The last two's references were computed once by
`--reference`: Saltelli's S1 and Jansen's ST estimators on 4 scrambled Sobol' sequences of
2^20 base points each (49M and 42M evaluations), their standard errors below 5e-5.

Each fit is studyrun's `fit_quantity` (degree auto, LARS, 5-fold; the GP as the analysis fits
it) on a Latin hypercube of n runs. An index is covered when |estimate - reference| <= its
half-width (the stated 95%). Printed: coverage per method and function and per method and size,
how many fits are `trusted`, and among those the coverage, the largest error and how many have
an index off by more than TRUSTED_ERROR. Writes benchmarks/measured/surrogate_coverage.csv (every
index of every fit) and surrogate_coverage_summary.csv.
"""

from __future__ import annotations

import argparse
import math
import sys
import time

import numpy as np
from harness import ROOT, write_rows

sys.path.insert(0, str(ROOT))  # studyrun as in this work tree (PYTHONPATH may say otherwise)

PI = math.pi
G_A = np.array([0, 1, 4.5, 9, 99, 99, 99, 99])
SIZES = [25, 50, 100, 200, 400]
QUICK_SIZES = [25, 50, 100, 200]
TRUSTED_ERROR = 0.02  # the measure: a trusted fit with an index off by more than this


def ishigami(x):
    return np.sin(x[:, 0]) + 7 * np.sin(x[:, 1]) ** 2 + 0.1 * x[:, 2] ** 4 * np.sin(x[:, 0])


def gfunction(x):
    return np.prod((np.abs(4 * x - 2) + G_A) / (1 + G_A), axis=1)


def wingweight(x):
    sw, wfw, a, sweep, q, taper, tc, nz, wdg, wp = x.T
    sweep = np.deg2rad(sweep)
    return (0.036 * sw**0.758 * wfw**0.0035 * (a / np.cos(sweep) ** 2) ** 0.6 * q**0.006
            * taper**0.04 * (100 * tc / np.cos(sweep)) ** -0.3 * (nz * wdg) ** 0.49 + sw * wp)


def borehole(x):
    rw, r, tu, hu, tl, hl, length, kw = x.T
    log_ratio = np.log(r / rw)
    return (2 * np.pi * tu * (hu - hl)
            / (log_ratio * (1 + 2 * length * tu / (log_ratio * rw**2 * kw) + tu / tl)))


def uniform(low, high):
    return {"distribution": "uniform", "low": low, "high": high}


CASES = {  # name: (function, parameters)
    "ishigami": (ishigami, {f"x{i}": uniform(-PI, PI) for i in (1, 2, 3)}),
    "gfunction": (gfunction, {f"x{i}": uniform(0.0, 1.0) for i in range(1, 9)}),
    "wingweight": (wingweight, {
        "Sw": uniform(150, 200), "Wfw": uniform(220, 300), "A": uniform(6, 10),
        "sweep": uniform(-10, 10), "q": uniform(16, 45), "taper": uniform(0.5, 1),
        "tc": uniform(0.08, 0.18), "Nz": uniform(2.5, 6), "Wdg": uniform(1700, 2500),
        "Wp": uniform(0.025, 0.08)}),
    "borehole": (borehole, {
        "rw": {"distribution": "normal", "mean": 0.10, "std": 0.0161812},
        "r": {"distribution": "lognormal", "mu": 7.71, "sigma": 1.0056},
        "Tu": uniform(63070, 115600), "Hu": uniform(990, 1110), "Tl": uniform(63.1, 116),
        "Hl": uniform(700, 820), "L": uniform(1120, 1680), "Kw": uniform(9855, 12045)}),
}

# S1 and ST by `--reference` (see the docstring); standard errors below 5e-5
REFERENCE = {
    "wingweight": (
        [0.12447, 0.00000, 0.22024, 0.00049, 0.00009, 0.00181, 0.14098, 0.41161, 0.08497, 0.00334],
        [0.12790, 0.00000, 0.22601, 0.00051, 0.00009, 0.00187, 0.14507, 0.41965, 0.08760, 0.00336]),
    "borehole": (
        [0.66370, 0.00000, 0.00000, 0.09488, 0.00001, 0.09488, 0.09065, 0.02194],
        [0.69412, 0.00000, 0.00000, 0.10612, 0.00001, 0.10612, 0.10279, 0.02513]),
}


def analytic(name):
    """(S1, ST) of Ishigami and the G function, from their closed forms."""
    if name == "ishigami":
        a, b = 7.0, 0.1
        v1 = 0.5 * (1 + b * PI**4 / 5) ** 2
        v2 = a**2 / 8
        v13 = b**2 * PI**8 * (1 / 18 - 1 / 50)
        v = v1 + v2 + v13
        return np.array([v1, v2, 0]) / v, np.array([v1 + v13, v2, v13]) / v
    part = 1 / (3 * (1 + G_A) ** 2)
    total = np.prod(1 + part) - 1
    st = np.array([part[i] * np.prod(np.delete(1 + part, i)) for i in range(len(part))]) / total
    return part / total, st


def reference(name):
    return analytic(name) if name in ("ishigami", "gfunction") else \
        tuple(np.array(r) for r in REFERENCE[name])


def inputs_of(name):
    from pydantic import TypeAdapter

    from studyrun.analyses.surrogate.fitting import Inputs
    from studyrun.blocks.params import ParameterSpec

    adapter = TypeAdapter(ParameterSpec)
    return Inputs({n: adapter.validate_python(p) for n, p in CASES[name][1].items()})


def compute_references(base_log2: int = 20, repeats: int = 4, chunk_log2: int = 16) -> None:
    """Print S1 (Saltelli 2010) and ST (Jansen) of wing weight and borehole, with their
    standard errors, from `repeats` scrambled Sobol' sequences of 2^base_log2 base points."""
    from scipy.stats import qmc

    for name in ("wingweight", "borehole"):
        function, inputs = CASES[name][0], inputs_of(name)
        d = len(inputs.names)
        first, total = [], []
        for repeat in range(repeats):
            engine = qmc.Sobol(2 * d, scramble=True, seed=100 + repeat)
            s1, st = np.zeros(d), np.zeros(d)
            n, sums, squares = 0, 0.0, 0.0
            for _ in range(1 << (base_log2 - chunk_log2)):
                u = engine.random(1 << chunk_log2)
                a, b = u[:, :d], u[:, d:]
                fa, fb = function(inputs.natural(a)), function(inputs.natural(b))
                for i in range(d):
                    ab = a.copy()
                    ab[:, i] = b[:, i]
                    fab = function(inputs.natural(ab))
                    s1[i] += np.sum(fb * (fab - fa))
                    st[i] += 0.5 * np.sum((fa - fab) ** 2)
                n += len(fa)
                sums += fa.sum() + fb.sum()
                squares += (fa**2).sum() + (fb**2).sum()
            variance = squares / (2 * n) - (sums / (2 * n)) ** 2
            first.append(s1 / n / variance)
            total.append(st / n / variance)
        for key, values in (("S1", np.array(first)), ("ST", np.array(total))):
            error = values.std(axis=0, ddof=1) / math.sqrt(repeats)
            print(f"{name} {key} {np.round(values.mean(axis=0), 5).tolist()} "
                  f"(standard error at most {error.max():.1e})", flush=True)


def training(name, n, seed):
    from studyrun.blocks.params.sampling import sample_unit

    inputs = inputs_of(name)
    unit = sample_unit(n, len(inputs.names), "lhs", np.random.SeedSequence([seed, n, 29]))
    x = inputs.natural(unit)
    return x, CASES[name][0](x)


def fit(name, method, n, seed):
    """One fit's rows: every index with its estimate, half-width and reference."""
    from studyrun.analyses.surrogate.fitting import Settings, fit_quantity

    inputs = inputs_of(name)
    x, y = training(name, n, seed)
    settings = Settings(method=method, degree=None, q=1.0, fit="lars", folds=5,
                        second_order=False, confidence=0.95, resamples=100)
    start = time.perf_counter()
    results = fit_quantity(x, y, inputs, settings, seed).results
    seconds = time.perf_counter() - start
    s1, st = reference(name)
    rows = []
    for key, truth in (("S1", s1), ("ST", st)):
        for k, parameter in enumerate(inputs.names):
            estimate, half = results[key][parameter], results[f"{key}_conf"][parameter]
            error = abs(estimate - truth[k])
            rows.append({"function": name, "method": method, "runs": n, "seed": seed,
                         "q2": results["q2"], "trusted": results["trusted"],
                         "degree": results.get("degree", ""),
                         "terms": len(results.get("terms", [])) or "", "index": key,
                         "parameter": parameter, "reference": float(truth[k]),
                         "estimate": estimate, "half_width": half, "error": error,
                         "covered": bool(error <= half), "seconds": round(seconds, 2)})
    return rows


def written(rows):
    """Rows with their numbers as text of 6 significant digits (write_rows keeps 4)."""
    return [{k: f"{v:.6g}" if isinstance(v, float) else v for k, v in row.items()}
            for row in rows]


def fits_of(rows):
    """The rows grouped by fit."""
    fits: dict[tuple, list] = {}
    for row in rows:
        fits.setdefault((row["function"], row["method"], row["runs"], row["seed"]), []).append(row)
    return fits


def summary(rows, by):
    """Coverage and trust, grouped by the keys `by`, as rows and a printed Markdown table."""
    groups: dict[tuple, list] = {}
    for fit_rows in fits_of(rows).values():
        groups.setdefault(tuple(fit_rows[0][k] for k in by), []).append(fit_rows)
    out = []
    print(f"\n| {' | '.join(by)} | fits | indices covered | median half-width | trusted fits | "
          f"covered when trusted | largest error when trusted | trusted, an index off by > "
          f"{TRUSTED_ERROR} |")
    print("|" + "---|" * (len(by) + 7))
    for key in sorted(groups, key=lambda k: tuple(str(p).zfill(6) for p in k)):
        group = groups[key]
        indices = [r for f in group for r in f]
        trusted = [f for f in group if f[0]["trusted"]]
        trusted_indices = [r for f in trusted for r in f]
        wrong = sum(any(r["error"] > TRUSTED_ERROR for r in f) for f in trusted)
        row = {**dict(zip(by, key)), "fits": len(group),
               "covered": round(np.mean([r["covered"] for r in indices]), 3),
               "median_half_width": round(float(np.median([r["half_width"] for r in indices])), 4),
               "trusted": len(trusted),
               "covered_when_trusted": (round(np.mean([r["covered"] for r in trusted_indices]), 3)
                                        if trusted else ""),
               "largest_error_when_trusted": (round(max(r["error"] for r in trusted_indices), 4)
                                              if trusted else ""),
               "trusted_off": wrong}
        out.append(row)
        print(f"| {' | '.join(map(str, key))} | {row['fits']} | {row['covered']:.1%} | "
              f"{row['median_half_width']:.3f} | {row['trusted']} | "
              f"{'' if not trusted else format(row['covered_when_trusted'], '.1%')} | "
              f"{row['largest_error_when_trusted']} | {wrong} |")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help=f"sizes {QUICK_SIZES}, 3 seeds (the GP 2, up to 100 runs)")
    parser.add_argument("--seeds", type=int, default=8)
    parser.add_argument("--gp-seeds", type=int, default=4, help="seeds the GP fits (slower)")
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)))
    parser.add_argument("--methods", default="pce,gp")
    parser.add_argument("--functions", default=",".join(CASES))
    parser.add_argument("--gp-max", type=int, default=200, help="largest GP training set")
    parser.add_argument("--reference", action="store_true",
                        help="compute the wing weight and borehole references (~1 min) and stop")
    args = parser.parse_args()
    if args.reference:
        compute_references()
        return
    sizes = QUICK_SIZES if args.quick else [int(s) for s in args.sizes.split(",")]
    seeds = {"pce": 3 if args.quick else args.seeds, "gp": 2 if args.quick else args.gp_seeds}
    gp_max = 100 if args.quick else args.gp_max
    rows = []
    started = time.perf_counter()
    for name in args.functions.split(","):
        for method in args.methods.split(","):
            for n in sizes:
                if method == "gp" and n > gp_max:
                    continue
                for seed in range(1, seeds[method] + 1):
                    found = fit(name, method, n, seed)
                    rows += found
                    worst = max(found, key=lambda r: r["error"])
                    print(f"{name} {method} n={n} seed={seed}: q2 {found[0]['q2']:.3f} "
                          f"trusted {found[0]['trusted']} covered "
                          f"{np.mean([r['covered'] for r in found]):.0%}, largest error "
                          f"{worst['error']:.3f} ({worst['index']} {worst['parameter']}, "
                          f"half-width {worst['half_width']:.3f}) {found[0]['seconds']} s",
                          flush=True)
    print(f"\n{len(fits_of(rows))} fits in {time.perf_counter() - started:.0f} s")
    summaries = summary(rows, ["method", "function"]) + summary(rows, ["method", "runs"]) \
        + summary(rows, ["method"])
    write_rows("surrogate_coverage", written(rows))
    print(f"wrote {write_rows('surrogate_coverage_summary', summaries)}")


if __name__ == "__main__":
    main()
