"""What a way of laying figures out costs in drawing a report: studyrun's `report.figures.lay_out`
against matplotlib's layout, run once or as fig.tight_layout().

    python benchmarks/bench_layout.py [--repeat 3] [--studies ishigami-sobol,flowers-morris]

Each example study of studies/ is run once (scheduler sync) into a scratch folder; then its
report is rebuilt (`rebuild_report`, into another folder) with each way of laying figures out:

- `lay_out`: studyrun's (report/figures.lay_out as it is: at 48ee199 a copy of matplotlib's
  tight-layout arithmetic, `grid_layout`, that measured each figure's texts once; since, the
  engine below; run the script on `git archive 48ee199` to measure the copy again);
- `engine once`: matplotlib's TightLayoutEngine run once, rect=None (the fallback for every figure);
- `tight_layout()`: fig.tight_layout(pad=1.08), as a figure is usually laid out.

CPU time of the rebuild (the best of --repeat; this process only: Agg draws in it), the part of
it spent laying out, and the matplotlib version. Figures are quoted in docs/performance.md.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

import matplotlib

import studyrun
import studyrun.results.report.figures as figures
from studyrun.commands.open_results import rebuild_report

STUDIES = Path(__file__).resolve().parents[1] / "studies"
EXAMPLES = ["ishigami-sobol", "flowers-morris", "ishigami-montecarlo", "bowl-doe",
            "ishigami-surrogate", "logistic-calibrate"]


def engine_once(fig) -> None:
    from matplotlib.layout_engine import TightLayoutEngine

    TightLayoutEngine(pad=figures.PAD, rect=None).execute(fig)


def tight_layout(fig) -> None:
    fig.tight_layout(pad=figures.PAD)


WAYS = {"lay_out": figures.lay_out, "engine once": engine_once, "tight_layout()": tight_layout}


def timed(lay_out, folder: Path, out: Path, repeat: int) -> tuple[float, float, int]:
    """(CPU seconds of the rebuild, of which laying out; figures laid out), the best of `repeat`."""
    best = None
    for _ in range(repeat):
        spent = [0.0, 0]

        def counted(fig, spent=spent):
            start = time.process_time()
            lay_out(fig)
            spent[0] += time.process_time() - start
            spent[1] += 1

        figures.lay_out = counted
        shutil.rmtree(out, ignore_errors=True)
        start = time.process_time()
        try:
            rebuild_report(folder, out)
        finally:
            figures.lay_out = WAYS["lay_out"]
        total = time.process_time() - start
        if best is None or total < best[0]:
            best = (total, spent[0], spent[1])
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--studies", default=",".join(EXAMPLES))
    args = parser.parse_args()
    print(f"matplotlib {matplotlib.__version__}; CPU seconds, the best of {args.repeat}")
    print(f"{'study':<22}{'figures':>8}" + "".join(f"{w:>24}" for w in WAYS)
          + f"{'saved':>9}")
    with tempfile.TemporaryDirectory() as scratch:
        for name in args.studies.split(","):
            folder = Path(scratch) / name
            studyrun.run(STUDIES / f"{name}.yaml", folder, quiet=True, scheduler="sync")
            rebuild_report(folder, Path(scratch) / "warm")  # imports, fonts: not measured
            results = {way: timed(lay, folder, Path(scratch) / "report", args.repeat)
                       for way, lay in WAYS.items()}
            ours, engine = results["lay_out"][0], results["engine once"][0]
            print(f"{name:<22}{results['lay_out'][2]:>8}" + "".join(
                f"{total:>9.2f} s ({layout:5.2f} lay)" for total, layout, _ in results.values())
                + f"{(engine - ours) / engine:>8.0%}")


if __name__ == "__main__":
    main()
