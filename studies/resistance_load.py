"""Known answers for reliability: g = R - S, and the four-branch series system (k = 6)."""

import numpy as np


def margin(R, S):
    return {"g": R - S}


def four_branch(x1, x2):
    k = 6.0
    c = 3 + 0.1 * (x1 - x2) ** 2
    s = (x1 + x2) / np.sqrt(2)
    return {"g": np.minimum.reduce([c - s, c + s, (x1 - x2) + k / np.sqrt(2),
                                    (x2 - x1) + k / np.sqrt(2)])}
