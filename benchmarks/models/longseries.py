"""The long-series benchmark's models (issue 19), vectorized: 10,000-point series per run, smooth
as an ODE's solution (`oscillator`) or incompressible (`noise`)."""

import numpy as np

POINTS = 10_000
TIME = np.linspace(0.0, 100.0, POINTS)


def oscillator(damping, frequency, offset):
    """A damped oscillation y = offset + exp(-damping t) cos(frequency t) and its rate v, for
    every run of the batch at once."""
    t = TIME[None, :]
    decay = np.exp(-damping[:, None] * t)
    phase = frequency[:, None] * t
    y = offset[:, None] + decay * np.cos(phase)
    v = -decay * (damping[:, None] * np.cos(phase) + frequency[:, None] * np.sin(phase))
    return {"time": TIME, "y": y, "v": v}


def noise(damping, frequency, offset):
    """The same inputs, but y = offset + frequency * standard normal draws: the worst case for a
    compressed store (damping is not used)."""
    rng = np.random.default_rng(np.asarray(offset, dtype=float).view(np.uint64))
    y = offset[:, None] + frequency[:, None] * rng.standard_normal((len(offset), POINTS))
    return {"time": TIME, "y": y}
