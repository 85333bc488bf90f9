"""The wing weight function (Forrester, Sobester and Keane 2008): a light aircraft wing's weight
in pounds from ten design inputs. Vectorized; a standard test of surrogate models."""

import numpy as np


def wing_weight(Sw, Wfw, A, sweep, q, taper, tc, Nz, Wdg, Wp):
    sweep = np.deg2rad(sweep)  # the sweep angle is given in degrees
    return (0.036 * Sw**0.758 * Wfw**0.0035 * (A / np.cos(sweep) ** 2) ** 0.6 * q**0.006
            * taper**0.04 * (100 * tc / np.cos(sweep)) ** -0.3 * (Nz * Wdg) ** 0.49 + Sw * Wp)
