"""What drawing a report costs, in CPU seconds: `write_report` (report.md, figures/ as PNG and
SVG, report.html) of a tiny study, a Sobol' study and a study of a few quantities.

    python benchmarks/bench_report.py [--source head|tree|COMMIT] [--repeat 5] [--studies a,b]

Each study is run once (scheduler sync, into benchmarks/out/report-runs/); then a fresh process
of the studyrun measured (`--source`, as every benchmark here) rebuilds each study's report
(`rebuild_report`, into a scratch folder) 1 + --repeat times and prints, per study, the CPU
seconds of `write_report`:

- `first`: the first report of the process: matplotlib's and Python-Markdown's imports, fonts;
  what one `studyrun run` pays (the issue 33 Sobol' benchmark's report);
- `least`: the least of the others (what each further report of a process costs, as in the
  test suite), and within it: `new` (figures and axes made), `lay out`, `png`, `svg` (each
  savefig) and the rest (report.md, report.html, writing files).

`--profile STUDY` prints cProfile's top entries of one more rebuild of that study instead.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import textwrap
from pathlib import Path

from harness import HERE, OUT, ROOT, bench_env, use_source, write_study

STUDIES = {
    "tiny": None,  # 2 parameters, Monte Carlo of 16 runs: what most test studies are
    "ishigami-sobol": "studies/ishigami-sobol.yaml",  # bars of S1/ST, a convergence plot
    "flowers-morris": "studies/flowers-morris.yaml",  # three quantities, a figure each
    "ishigami-montecarlo": "studies/ishigami-montecarlo.yaml",  # 10,000 runs: a dense scatter
}

CHILD = r'''
import collections, json, shutil, sys, time
from pathlib import Path
import studyrun
import studyrun.results.report.build as build
import studyrun.results.report.figures as figures
from studyrun.commands.open_results import rebuild_report

studies, repeat, runs, scratch = json.loads(sys.argv[1])
spent = collections.Counter()

def timed(owner, name, label):
    function = getattr(owner, name)
    def wrapper(*args, **kwargs):
        start = time.process_time()
        try:
            return function(*args, **kwargs)
        finally:
            spent[label] += time.process_time() - start
    setattr(owner, name, wrapper)

def parts():
    """Time the parts of drawing too: after the first report, which imports matplotlib."""
    timed(figures.Figures, "new", "new")
    timed(figures, "lay_out", "lay out")
    import matplotlib.figure
    savefig = matplotlib.figure.Figure.savefig
    def counted(self, fname, *, format=None, **kwargs):
        start = time.process_time()
        try:
            return savefig(self, fname, format=format, **kwargs)
        finally:
            spent[format] += time.process_time() - start
    matplotlib.figure.Figure.savefig = counted

timed(build, "write_report", "write_report")
for name in studies:  # one study a process
    folder = Path(runs) / name
    out = Path(scratch) / name
    times = []
    for i in range(1 + repeat):
        shutil.rmtree(out, ignore_errors=True)
        spent.clear()
        rebuild_report(folder, out)
        times.append(dict(spent))
        if i == 0:
            parts()
    least = min(times[1:], key=lambda t: t["write_report"])
    figures_drawn = len(list((out / "figures").glob("*.png")))
    print(json.dumps({"study": name, "figures": figures_drawn,
                      "first": times[0]["write_report"], **least}))
'''


def prepare(names: list[str]) -> Path:
    """Each study run once into benchmarks/out/report-runs/NAME (kept: reports only read it)."""
    runs = OUT / "report-runs"
    for name in names:
        folder = runs / name
        if (folder / "analysis.json").exists():
            continue
        if STUDIES[name] is None:
            path = write_study("tiny", {
                "model": {"type": "python", "function": "benchmodels:ishigami", "vectorized": True},
                "parameters": {p: {"distribution": "uniform", "low": 0, "high": 1}
                               for p in ("x1", "x2", "x3")},
                "quantities": {"y": "value"},
                "analysis": {"type": "montecarlo", "samples": 16}})
        else:
            path = ROOT / STUDIES[name]
        subprocess.run([sys.executable, "-c", textwrap.dedent(f"""
            import studyrun
            studyrun.run({str(path)!r}, {str(folder)!r}, quiet=True, scheduler="sync", fresh=True)
            """)], env=bench_env(), check=True, cwd=OUT, stderr=subprocess.DEVNULL)
    return runs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", default=None)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--studies", default=",".join(STUDIES))
    parser.add_argument("--profile", default=None, metavar="STUDY")
    args = parser.parse_args()
    which = use_source(args.source)
    names = args.studies.split(",")
    runs = prepare(names)
    scratch = OUT / "report-scratch"
    if args.profile:
        code = textwrap.dedent(f"""
            import cProfile, pstats, shutil
            from pathlib import Path
            from studyrun.commands.open_results import rebuild_report
            folder, out = Path({str(runs / args.profile)!r}), Path({str(scratch / 'profile')!r})
            rebuild_report(folder, out)
            shutil.rmtree(out)
            cProfile.run("rebuild_report(folder, out)", sort="tottime")
            """)
        subprocess.run([sys.executable, "-c", code], env=bench_env(), cwd=OUT, check=True)
        return
    lines = [subprocess.run([sys.executable, "-c", CHILD,
                             json.dumps([[name], args.repeat, str(runs), str(scratch)])],
                            env=bench_env(), cwd=OUT, check=True, capture_output=True,
                            text=True).stdout for name in names]
    print(f"studyrun {which}; CPU seconds of write_report: the first of a process, the least of "
          f"{args.repeat} more, and its parts")
    parts = ["new", "lay out", "png", "svg"]
    print(f"{'study':22s}{'figures':>8s}{'first':>8s}{'least':>8s}"
          + "".join(f"{p:>9s}" for p in parts) + f"{'rest':>8s}")
    for line in lines:
        row = json.loads(line)
        rest = row["write_report"] - sum(row.get(p, 0.0) for p in parts)
        print(f"{row['study']:22s}{row['figures']:8d}{row['first']:8.3f}{row['write_report']:8.3f}"
              + "".join(f"{row.get(p, 0.0):9.3f}" for p in parts) + f"{rest:8.3f}")


if __name__ == "__main__":
    sys.path.insert(0, str(HERE))
    main()
