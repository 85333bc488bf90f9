"""Peer for bench_shapley.py: shapleyx's Monte Carlo Shapley effects (exhaustive subsets, exact
conditional normals) of y = b'X, X ~ N(0, cov), at sample size N per subset.

    PEER_PYTHON benchmarks/peers/shapleyx_linear.py '{"beta": [...], "cov": [[...]], "N": 1000,
        "seed": 1}'

Prints one JSON line: the effects, the model evaluations counted, and CPU seconds.
"""

import json
import sys
import time
from importlib import metadata

import numpy as np
from shapleyx.utilities.mc_shapley import MultivariateNormal, shapley_effects

case = json.loads(sys.argv[1])
beta, cov = np.array(case["beta"]), np.array(case["cov"])
calls = [0]


def batch(x):
    calls[0] += len(x)
    return np.asarray(x) @ beta


start = time.process_time()
effects, _, _ = shapley_effects(lambda x: float(x @ beta), MultivariateNormal(np.zeros(len(beta)), cov),
                                N=case["N"], method="exhaustive", random_state=case["seed"],
                                predict_batch=batch)
print(json.dumps({"effects": [float(e) for e in effects], "runs": calls[0],
                  "cpu": time.process_time() - start,
                  "version": metadata.version("shapleyx")}))
