"""Issue 8.3: peak memory of `studyrun run` against the number of runs of a cheap vectorized
Monte Carlo. Designs above one chunk (2^20 runs) stream through the store and the analysis, so
peak memory should level off instead of growing with the number of runs.

    python benchmarks/bench_scale.py 2000000 4000000 10000000
    python benchmarks/bench_scale.py --long   # issue 19: 10,000-point series, 20,000 runs
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

MODEL = "def f(a, b, c):\n    return a * b + c\n"
STUDY = """name: scale
model: {{type: python, function: "cheap:f", vectorized: true}}
parameters:
  a: {{distribution: uniform, low: 0, high: 1}}
  b: {{distribution: normal, mean: 0, std: 1}}
  c: {{bounds: [0, 1]}}
quantities: {{y: value}}
analysis: {{type: montecarlo, samples: {n}}}
"""


def measure(n: int, folder: Path) -> tuple[float, int]:
    """Wall seconds and peak RSS (kB) of one `studyrun run` of n runs."""
    (folder / "cheap.py").write_text(MODEL)
    (folder / "study.yaml").write_text(STUDY.format(n=n))
    start = time.perf_counter()
    done = subprocess.run(["/usr/bin/time", "-v", sys.executable, "-m", "studyrun", "run",
                           str(folder / "study.yaml"), "--out", str(folder / f"out{n}"), "--quiet"],
                          capture_output=True, text=True, check=True)
    peak = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", done.stderr).group(1))
    return time.perf_counter() - start, peak


LONG = Path(__file__).resolve().parent / "long_series"  # the study and its models
POINTS = 10_000  # a series' points in LONG's models


def long_studies() -> dict[str, tuple[str, int]]:
    """Issue 19's long-series study and two variants: study text, and values the store keeps
    (runs x points x series kept)."""
    study = (LONG / "long-series.yaml").read_text()
    noise = study.replace("longseries:oscillator", "longseries:noise")
    sobol = study.replace("analysis: {type: montecarlo, samples: 20000}",
                          "analysis: {type: sobol, samples: 1024, outputs: [y]}")
    return {"montecarlo, series(y) of a damped oscillation": (study, 20_000 * POINTS),
            "montecarlo, series(y) of noise": (noise, 20_000 * POINTS),
            "sobol N = 1024 (5,120 runs), S1 and ST at every time of y": (sobol, 5_120 * POINTS)}


def measure_long() -> None:
    """Wall seconds, peak RSS and the store's bytes (per value kept) of each long-series study."""
    print("study,seconds,peak_rss_mb,store_mb,bytes_per_value")
    for name, (text, values) in long_studies().items():
        with tempfile.TemporaryDirectory() as scratch:
            folder = Path(scratch)
            shutil.copy(LONG / "longseries.py", folder)
            (folder / "study.yaml").write_text(text)
            start = time.perf_counter()
            done = subprocess.run(["/usr/bin/time", "-v", sys.executable, "-m", "studyrun", "run",
                                   str(folder / "study.yaml"), "--out", str(folder / "out"),
                                   "--quiet", "--fresh"], capture_output=True, text=True, check=True)
            seconds = time.perf_counter() - start
            peak = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", done.stderr)[1])
            size = (folder / "out" / "runs.sqlite").stat().st_size
        print(f'"{name}",{seconds:.1f},{peak / 1024:.0f},{size / 1e6:.0f},{size / values:.2f}',
              flush=True)


if __name__ == "__main__":
    if sys.argv[1:] == ["--long"]:
        measure_long()
        sys.exit()
    sizes = [int(a) for a in sys.argv[1:]] or [1_000_000, 2_000_000, 4_000_000]
    print("runs,seconds,peak_rss_mb")
    for n in sizes:
        with tempfile.TemporaryDirectory() as folder:
            seconds, peak = measure(n, Path(folder))
        print(f"{n},{seconds:.1f},{peak / 1024:.0f}", flush=True)
