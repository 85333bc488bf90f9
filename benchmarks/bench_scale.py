"""Issue 19: the cost of a run against the number of runs, 10^3 to 10^7, of a cheap vectorized
Monte Carlo through `studyrun run` (fresh, then again reusing every run): wall and CPU seconds,
peak RSS, CPU per run. Plans above one chunk (2^20 runs) are read back from the store chunk by
chunk, so the CPU per run should stay flat and memory follow a few numbers per run.

    python benchmarks/bench_scale.py [--sizes 1000,10000,...] [--source head|tree|COMMIT]

Writes benchmarks/measured/scale.csv and scale.png. With `--wide`, instead, the studies of 1,000
parameters (models/wide.py: Morris, Monte Carlo, Sobol' N = 64) into measured/wide.csv; with
`--long`, the long-series studies (10,000-point series kept with series(y), 20,000 runs) into
measured/long_series.csv.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from harness import (
    HERE,
    OUT,
    RESULTS,
    report,
    run_study,
    studyrun,
    use_source,
    write_rows,
    write_study,
)

SIZES = [1_000, 10_000, 100_000, 1_000_000, 2_000_000, 5_000_000, 10_000_000]


def cheap_study(n: int):
    return write_study(f"scale-{n}", {
        "model": {"type": "python", "function": "benchmodels:cheap", "vectorized": True},
        "parameters": {"a": {"distribution": "uniform", "low": 0, "high": 1},
                       "b": {"distribution": "normal", "mean": 0, "std": 1},
                       "c": {"bounds": [0, 1]}},
        "quantities": {"y": "value"},
        "analysis": {"type": "montecarlo", "samples": n}})


def measure_size(n: int) -> dict:
    """A fresh run of n runs, then the same again (every run reused)."""
    path = cheap_study(n)
    fresh = run_study(path)
    again = studyrun("run", str(path), "--out", str(OUT / "results" / path.stem), "--quiet")
    return {"runs": n, "fresh_wall_s": fresh["wall"], "fresh_cpu_s": fresh["cpu"],
            "fresh_peak_mb": fresh["rss_mb"], "cpu_us_per_run": 1e6 * fresh["cpu"] / n,
            "rerun_wall_s": again["wall"], "rerun_cpu_s": again["cpu"],
            "rerun_peak_mb": again["rss_mb"], "rerun_share": again["wall"] / fresh["wall"]}


def measure_wide() -> list[dict]:
    """Issue 19: each study of 1,000 parameters, fresh."""
    sys.path.insert(0, str(HERE / "models"))
    from wide import ANALYSES, study

    rows = []
    for name, (analysis, runs) in ANALYSES.items():
        done = run_study(write_study(f"wide-{name}", study(analysis)))
        rows.append({"study": f"wide {name}", "runs": runs, "wall_s": done["wall"],
                     "cpu_s": done["cpu"], "peak_mb": done["rss_mb"]})
        report(rows[-1:])
    return rows


def plot(rows: list[dict]) -> None:
    """measured/scale.png: seconds against runs; CPU per run and peak memory against runs."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = [r["runs"] for r in rows]
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    left.loglog(runs, [r["fresh_wall_s"] for r in rows], "o-", label="fresh: wall")
    left.loglog(runs, [r["fresh_cpu_s"] for r in rows], "s--", label="fresh: CPU")
    left.loglog(runs, [r["rerun_wall_s"] for r in rows], "^-", label="every run reused: wall")
    left.set(xlabel="runs", ylabel="seconds", title="studyrun run, vectorized Monte Carlo")
    left.legend()
    right.loglog(runs, [r["cpu_us_per_run"] for r in rows], "o-", label="fresh: CPU us per run")
    right.set(xlabel="runs", ylabel="CPU us per run", title="per run, and peak memory")
    memory = right.twinx()
    memory.semilogx(runs, [r["fresh_peak_mb"] for r in rows], "s--", color="tab:orange",
                    label="fresh: peak RSS (MB)")
    memory.set(ylabel="peak RSS, MB", ylim=(0, 2000))
    lines = right.get_lines() + memory.get_lines()
    right.legend(lines, [line.get_label() for line in lines])
    fig.tight_layout()
    fig.savefig(RESULTS / "scale.png", dpi=110)


POINTS = 10_000  # of a series of models/longseries.py


def long_study(name: str, function: str, analysis: dict) -> Path:
    """Issue 19's long-series study: a vectorized model giving a 10,000-point series a run, kept
    whole with series(y), reduced with final(y)."""
    return write_study(name, {
        "seed": 19,
        "model": {"type": "python", "function": f"longseries:{function}", "vectorized": True},
        "parameters": {"damping": {"distribution": "uniform", "low": 0.01, "high": 0.1},
                       "frequency": {"distribution": "uniform", "low": 0.5, "high": 2.0},
                       "offset": {"distribution": "normal", "mean": 0, "std": 1}},
        "quantities": {"trajectory": "series(y)", "final_y": "final(y)"},
        "analysis": analysis})


def measure_long() -> list[dict]:
    """Each long-series study fresh: wall and CPU seconds, peak RSS, the store's bytes and its
    bytes per series value kept (runs x points: y alone is kept)."""
    studies = {"long-series": ("oscillator", {"type": "montecarlo", "samples": 20_000}, 20_000),
               "long-series-noise": ("noise", {"type": "montecarlo", "samples": 20_000}, 20_000),
               "long-series-sobol": ("oscillator", {"type": "sobol", "samples": 1024,
                                                     "outputs": ["y"]}, 1024 * 5)}
    rows = []
    for name, (function, analysis, runs) in studies.items():
        run = run_study(long_study(name, function, analysis))
        size = sum(f.stat().st_size for f in (OUT / "results" / name).glob("runs.sqlite*"))
        rows.append({"study": name, "model": function, "analysis": analysis["type"], "runs": runs,
                     "wall_s": run["wall"], "cpu_s": run["cpu"], "peak_mb": run["rss_mb"],
                     "store_mb": size / 1e6, "bytes_per_value": size / (runs * POINTS)})
        report(rows[-1:])
    return rows


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)))
    parser.add_argument("--source", default=None)
    parser.add_argument("--wide", action="store_true", help="the studies of 1,000 parameters")
    parser.add_argument("--long", action="store_true", help="the long-series studies instead")
    options = parser.parse_args()
    print("studyrun:", use_source(options.source))
    if options.wide:
        write_rows("wide", measure_wide())
        sys.exit()
    if options.long:
        write_rows("long_series", measure_long())
        sys.exit()
    rows = []
    for n in map(int, options.sizes.split(",")):
        rows.append(measure_size(n))
        report(rows[-1:])
    write_rows("scale", rows)
    plot(rows)
