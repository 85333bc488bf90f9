"""Each run's random numbers, derived from the run's identity alone, so that a run draws the same
numbers alone, in any batch, on any worker and after a resume.

The identity of a run of a model that draws random numbers includes the study's `seed`
(plan/study.py), so a new seed gives every run new numbers, and the store never reuses a run made
with another seed.
"""

from __future__ import annotations

import numpy as np

SEED_LIMIT = 2**31  # a run's integer seed is below it: any program reads it as an int (%d)


def run_seed_sequence(run_id: int) -> np.random.SeedSequence:
    """The root of one run's random numbers: numpy's SeedSequence of the run's identity (its 64
    bits read as an unsigned number). Give it to `np.random.default_rng` for a Generator."""
    return np.random.SeedSequence(int(run_id) & 0xFFFF_FFFF_FFFF_FFFF)


def run_seed(run_id: int) -> int:
    """One run's seed as an integer, 0 <= seed < 2**31, for programs that take a seed (a
    command's `{seed}`, a python model's `seed`): the first word of its SeedSequence's state."""
    return int(run_seed_sequence(run_id).generate_state(1, np.uint32)[0]) % SEED_LIMIT
