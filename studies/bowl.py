"""A smooth response with an interior optimum, and a cost that grows with both factors: a
stand-in for an engineering simulation explored by a designed experiment."""

import numpy as np


def bowl(temperature, pressure, hold_time):
    t = (temperature - 160) / 20
    p = (pressure - 3) / 1
    h = (hold_time - 30) / 10
    process_yield = 80 - 4 * t**2 - 3 * p**2 - 2 * h**2 + 1.5 * t * p + 2 * t + p + 0.5 * h
    cost = 10 + 2 * t + 3 * p + 1.5 * h + 0.5 * t * h
    return {"process_yield": np.asarray(process_yield, dtype=float), "cost": np.asarray(cost, dtype=float)}
