"""Test problems of multi-objective optimisation with known Pareto fronts, vectorized."""

import numpy as np


def zdt1(x1, x2, x3, x4, x5):
    """ZDT1 (Zitzler, Deb and Thiele 2000) with 5 variables in [0, 1]: the front is x2..x5 = 0,
    f2 = 1 - sqrt(f1) for f1 in [0, 1]."""
    g = 1 + 9 * (x2 + x3 + x4 + x5) / 4
    return {"f1": x1, "f2": g * (1 - np.sqrt(x1 / g))}


def binh_korn(x, y):
    """Binh and Korn (1997): minimise f1, f2 subject to c1 <= 25 and c2 >= 7.7, x in [0, 5], y
    in [0, 3]. The front: x = y in [0, 3], then y = 3 with x in [3, 5]."""
    return {"f1": 4 * x**2 + 4 * y**2, "f2": (x - 5) ** 2 + (y - 5) ** 2,
            "c1": (x - 5) ** 2 + y**2, "c2": (x - 8) ** 2 + (y + 3) ** 2}


def shifted_squares(x, u):
    """Two losses of a decision x under an uncertain shift u: over scenarios u_1..u_N their means
    are (x - m)^2 + v and (x - 2 - m)^2 + v (m, v the scenarios' mean and variance), so the
    robust front is x in [m, m + 2]."""
    return {"near": (x - u) ** 2, "far": (x - 2 - u) ** 2}


def dtlz2(x1, x2, x3, x4, x5):
    """DTLZ2 (Deb, Thiele, Laumanns and Zitzler 2002), three objectives, 5 variables in [0, 1]:
    the front is the sphere's octant f1^2 + f2^2 + f3^2 = 1, where x3..x5 = 0.5."""
    g = (x3 - 0.5) ** 2 + (x4 - 0.5) ** 2 + (x5 - 0.5) ** 2
    a, b = x1 * np.pi / 2, x2 * np.pi / 2
    return {"f1": (1 + g) * np.cos(a) * np.cos(b), "f2": (1 + g) * np.cos(a) * np.sin(b),
            "f3": (1 + g) * np.sin(a)}
