"""A wide model for issue 19: y = sum of a_i x_i over 1,000 inputs x0001..x1000, of which ten
have a large a_i and the rest tiny ones, so a handful of parameters matter; and its studies.

    python benchmarks/models/wide.py FOLDER   # wide.py and wide-{morris,montecarlo,sobol}.yaml
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
    "morris": ({"type": "morris", "trajectories": 10}, 10 * (WIDTH + 1)),
    "montecarlo": ({"type": "montecarlo", "samples": 20_000}, 20_000),
    "sobol": ({"type": "sobol", "samples": 64}, 64 * (WIDTH + 2)),
}


def linear(**inputs):
    """Vectorized: one array per input, the weighted sum of every input."""
    total = np.zeros(len(inputs[NAMES[0]]))
    for name, a in zip(NAMES, COEFFICIENTS):
        total += a * inputs[name]
    return total


def study(analysis: dict) -> dict:
    """A study of the wide model (without its name) with the given `analysis:` block."""
    return {"model": {"type": "python", "function": "wide:linear", "vectorized": True},
            "parameters": {name: {"bounds": [0, 1]} for name in NAMES},
            "quantities": {"y": "value"}, "analysis": analysis}


if __name__ == "__main__":
    import yaml

    folder = Path(sys.argv[1])
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(__file__, folder / "wide.py")
    for name, (analysis, _) in ANALYSES.items():
        path = folder / f"wide-{name}.yaml"
        path.write_text(yaml.safe_dump({"name": f"wide-{name}", **study(analysis)},
                                       sort_keys=False))
        print(path)
