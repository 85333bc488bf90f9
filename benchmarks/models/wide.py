"""A wide model for issue 19: y = sum of a_i x_i over 1,000 inputs x0001..x1000, of which a few
have a large a_i and the rest tiny ones, so a handful of parameters matter; and the studies of it.

    python benchmarks/models/wide.py FOLDER   # writes wide.py and the three studies into FOLDER
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import numpy as np

WIDTH = 1000
LARGE = {1: 10.0, 2: 8.0, 3: 6.0, 5: 5.0, 8: 4.0, 13: 3.0, 21: 2.0, 34: 1.5, 55: 1.0, 89: 0.8}
NAMES = [f"x{i:04d}" for i in range(1, WIDTH + 1)]
COEFFICIENTS = np.array([LARGE.get(i, 1e-3 * (1 + i % 7)) for i in range(1, WIDTH + 1)])
ANALYSES = {  # name -> (analysis block, runs)
    "morris": ("{type: morris, trajectories: 10}", 10 * (WIDTH + 1)),
    "montecarlo": ("{type: montecarlo, samples: 20000}", 20_000),
    "sobol": ("{type: sobol, samples: 64}", 64 * (WIDTH + 2)),
}


def linear(**inputs):
    """Vectorized: one array per input, the weighted sum of every input."""
    total = np.zeros(len(next(iter(inputs.values()))))
    for name, a in zip(NAMES, COEFFICIENTS):
        total += a * inputs[name]
    return total


def study_text(analysis: str) -> str:
    """A study of the wide model with the given `analysis:` block (YAML flow)."""
    parameters = "\n".join(f"  {name}: {{bounds: [0, 1]}}" for name in NAMES)
    return (f"name: wide\nmodel: {{type: python, function: \"wide:linear\", vectorized: true}}\n"
            f"parameters:\n{parameters}\nquantities: {{y: value}}\nanalysis: {analysis}\n")


def write_studies(folder: Path) -> dict[str, Path]:
    """wide.py and one study file per analysis in `folder`; their paths by analysis."""
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(__file__, folder / "wide.py")
    paths = {}
    for name, (analysis, _) in ANALYSES.items():
        paths[name] = folder / f"wide-{name}.yaml"
        paths[name].write_text(study_text(analysis))
    return paths


if __name__ == "__main__":
    for path in write_studies(Path(sys.argv[1])).values():
        print(path)
