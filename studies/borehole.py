"""The borehole function (Harper and Gupta 1983; Morris et al. 1993): water flow through a
borehole between two aquifers, in m^3/year. Vectorized; a standard test of surrogate models."""

import numpy as np


def borehole(rw, r, Tu, Hu, Tl, Hl, L, Kw):
    log_ratio = np.log(r / rw)
    return (2 * np.pi * Tu * (Hu - Hl)
            / (log_ratio * (1 + 2 * L * Tu / (log_ratio * rw**2 * Kw) + Tu / Tl)))
