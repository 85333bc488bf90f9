"""A tank filled by a measured inflow and drained at rate k: dy/dt = inflow(t) - k y.

The inflow is read from data/inflow.csv (hourly volumes, held constant over each hour), a file the
model reads on its own: the study lists it in `execution.depends_on`, so editing the data re-runs
every run. Vectorized: each hour is integrated exactly for the whole batch at once.
"""

from pathlib import Path

import numpy as np

INFLOW = np.loadtxt(Path(__file__).parent / "data" / "inflow.csv", delimiter=",", skiprows=1)


def tank(k, y0):
    k, y0 = np.asarray(k, dtype=float), np.asarray(y0, dtype=float)
    hours, inflow = INFLOW[:, 0], INFLOW[:, 1]
    y = np.empty((len(k), len(hours) + 1))
    y[:, 0] = y0
    keep = np.exp(-k)  # over one hour, with the inflow constant: y' = u - k y solved exactly
    for i, u in enumerate(inflow):
        y[:, i + 1] = y[:, i] * keep + u * (1 - keep) / k
    return {"time": np.r_[hours, hours[-1] + 1], "y": y}
