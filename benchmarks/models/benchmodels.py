"""Models of the benchmarks: Ishigami (vectorized and scalar), and models of a set cost per run."""

import math
import os
import time

TRACE = os.environ.get("BENCH_TRACE")  # a file: each run of sleeper/busy appends "pid start end"


def trace(start: float) -> None:
    if TRACE:
        with open(TRACE, "a") as handle:
            handle.write(f"{os.getpid()} {start:.6f} {time.time():.6f}\n")

import numpy as np  # noqa: E402 (after the trace hook, which must not wait for numpy)


def ishigami(x1, x2, x3, a=7.0, b=0.1):
    """Vectorized Ishigami: called once per batch with arrays."""
    return np.sin(x1) + a * np.sin(x2) ** 2 + b * x3**4 * np.sin(x1)


def ishigami_scalar(x1, x2, x3, a=7.0, b=0.1):
    """Scalar Ishigami: called once per run with floats."""
    return math.sin(x1) + a * math.sin(x2) ** 2 + b * x3**4 * math.sin(x1)


def sleeper(x, cost=0.02):
    """Takes `cost` seconds per run without using a core (time.sleep)."""
    start = time.time()
    time.sleep(cost)
    trace(start)
    return x * x


def busy(x, cost=0.02):
    """Takes `cost` seconds per run of one core (a busy loop)."""
    start = time.time()
    end = time.perf_counter() + cost
    total = 0.0
    while time.perf_counter() < end:
        total += 1.0
    trace(start)
    return x * x


def cheap(a, b, c):
    """The cheapest vectorized model: a * b + c (bench_scale.py)."""
    return a * b + c



def total(**inputs):
    """Vectorized: the sum of any number of inputs (bench_memory.py)."""
    return sum(inputs.values())
