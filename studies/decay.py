"""Exponential decay y(t) = y0 exp(-k t) as a scalar python model returning a time series."""

import numpy as np

TIME = np.linspace(0.0, 10.0, 41)


def decay(k=0.5, y0=100.0):
    y = y0 * np.exp(-k * TIME)
    return {"time": TIME, "y": y, "outflow": k * y, "half_life": np.log(2) / k}
