"""A capacity plan judged over 20 years: its reliability falls when demand outgrows the 150
units built, its cost follows the unit cost and the supplier's markup (supplier 1, 2 or 3)."""

import numpy as np

MARKUP = {1: 1.0, 2: 0.8, 3: 1.2}


def plan(demand_growth, capacity_cost, supplier, discount):
    """discount plays no part: the input scenario discovery should leave unrestricted."""
    demand = 100 * (1 + demand_growth) ** 20
    markup = np.select([supplier == 1, supplier == 2], [MARKUP[1], MARKUP[2]], MARKUP[3])
    cost = 0.25 * capacity_cost * markup
    return {"reliability": np.minimum(1.0, 150 / demand), "cost": cost}
