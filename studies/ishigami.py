"""The Ishigami function (a = 7, b = 0.1), vectorized: a standard test of sensitivity methods."""

import numpy as np


def ishigami(x1, x2, x3, a=7.0, b=0.1):
    return np.sin(x1) + a * np.sin(x2) ** 2 + b * x3**4 * np.sin(x1)
