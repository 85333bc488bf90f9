"""Writes ishigami-runs.csv: 2,000 runs of the Ishigami function (a = 7, b = 0.1) at uniform
random points of [-pi, pi]^3, as a CSV of inputs and output made elsewhere would be; the example
studies/ishigami-given-delta.yaml analyses it without a model. Run once: python ishigami_runs.py"""

from pathlib import Path

import numpy as np

ROWS = 2000

if __name__ == "__main__":
    x = np.random.default_rng(20261203).uniform(-np.pi, np.pi, size=(ROWS, 3))
    y = np.sin(x[:, 0]) + 7 * np.sin(x[:, 1]) ** 2 + 0.1 * x[:, 2] ** 4 * np.sin(x[:, 0])
    lines = ["x1,x2,x3,y"] + [f"{a!r},{b!r},{c!r},{v!r}" for (a, b, c), v in zip(x.tolist(), y.tolist())]
    (Path(__file__).parent / "ishigami-runs.csv").write_text("\n".join(lines) + "\n")
