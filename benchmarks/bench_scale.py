"""Issue 8.3: peak memory of `studyrun run` against the number of runs of a cheap vectorized
Monte Carlo. Designs above one chunk (2^20 runs) stream through the store and the analysis, so
peak memory should level off instead of growing with the number of runs.

    python benchmarks/bench_scale.py 2000000 4000000 10000000
"""

from __future__ import annotations

import re
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


if __name__ == "__main__":
    sizes = [int(a) for a in sys.argv[1:]] or [1_000_000, 2_000_000, 4_000_000]
    print("runs,seconds,peak_rss_mb")
    for n in sizes:
        with tempfile.TemporaryDirectory() as folder:
            seconds, peak = measure(n, Path(folder))
        print(f"{n},{seconds:.1f},{peak / 1024:.0f}", flush=True)
