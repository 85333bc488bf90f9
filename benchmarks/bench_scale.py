"""Issue 8.3: peak memory of `studyrun run` against the number of runs of a cheap vectorized
Monte Carlo. Designs above one chunk (2^20 runs) stream through the store and the analysis, so
peak memory should level off instead of growing with the number of runs. Issue 19: `--wide`
runs the studies of 1,000 parameters (models/wide.py): Morris, Monte Carlo and Sobol' N = 64.

    python benchmarks/bench_scale.py 2000000 4000000 10000000
    python benchmarks/bench_scale.py --wide
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


def measure(study: Path, out: Path) -> tuple[float, int]:
    """Wall seconds and peak RSS (kB, of the largest process) of one `studyrun run --fresh`."""
    start = time.perf_counter()
    done = subprocess.run(["/usr/bin/time", "-v", sys.executable, "-m", "studyrun", "run",
                           str(study), "--out", str(out), "--quiet", "--fresh"],
                          capture_output=True, text=True, check=True)
    peak = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", done.stderr).group(1))
    return time.perf_counter() - start, peak


def studies(arguments: list[str], folder: Path):
    """(label, runs, study file) of each study asked for, written into `folder`."""
    if arguments == ["--wide"]:
        sys.path.insert(0, str(Path(__file__).parent / "models"))
        from wide import ANALYSES, write_studies

        for name, path in write_studies(folder).items():
            yield f"wide {name}", ANALYSES[name][1], path
        return
    (folder / "cheap.py").write_text(MODEL)
    for n in [int(a) for a in arguments] or [1_000_000, 2_000_000, 4_000_000]:
        (folder / f"study{n}.yaml").write_text(STUDY.format(n=n))
        yield "montecarlo", n, folder / f"study{n}.yaml"


if __name__ == "__main__":
    print("study,runs,seconds,peak_rss_mb")
    with tempfile.TemporaryDirectory() as scratch:
        for label, runs, study in studies(sys.argv[1:], Path(scratch)):
            seconds, peak = measure(study, Path(scratch) / "out")
            print(f"{label},{runs},{seconds:.1f},{peak / 1024:.0f}", flush=True)
