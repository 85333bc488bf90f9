"""Issue 19: the cost of a run against the number of runs, 10^3 to 10^7, of a cheap vectorized
Monte Carlo through `studyrun run` (fresh, then again reusing every run): wall and CPU seconds,
peak RSS, CPU per run. Plans above one chunk (2^20 runs) are read back from the store chunk by
chunk, so the CPU per run should stay flat and memory follow a few numbers per run.

    python benchmarks/bench_scale.py [--sizes 1000,10000,...] [--source head|tree|COMMIT]

Writes benchmarks/measured/scale.csv and scale.png.
"""

from __future__ import annotations

import argparse

from harness import OUT, RESULTS, report, run_study, studyrun, use_source, write_rows, write_study

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


def plot(rows: list[dict]) -> None:
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
    right.semilogx(runs, [r["cpu_us_per_run"] for r in rows], "o-", label="CPU us per run")
    right.semilogx(runs, [r["fresh_peak_mb"] / 100 for r in rows], "s--", label="peak RSS, 100 MB")
    right.set(xlabel="runs", ylim=(0, None), title="per run, and peak memory")
    right.legend()
    fig.tight_layout()
    fig.savefig(RESULTS / "scale.png", dpi=110)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)))
    parser.add_argument("--source", default=None)
    options = parser.parse_args()
    print("studyrun:", use_source(options.source))
    rows = []
    for n in map(int, options.sizes.split(",")):
        rows.append(measure_size(n))
        report(rows[-1:])
    write_rows("scale", rows)
    plot(rows)
