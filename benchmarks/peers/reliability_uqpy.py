"""UQpy's FORM and subset simulation on the reliability benchmark's cases, counting model calls.

    benchmarks/out/uqpy-venv/bin/python benchmarks/peers/reliability_uqpy.py SEEDS OUT.json

Run by bench_reliability.py (`--uqpy-python`) in an environment of its own: UQpy 4.1.6 pins
numpy 1.26 (its sampler fails under numpy 2) and 4.1.7 on imports torch, so
`python3 -m venv benchmarks/out/uqpy-venv && benchmarks/out/uqpy-venv/bin/pip install
UQpy==4.1.6`; never a studyrun dependency. OUT.json as reliability_peers.py's: FORM (HL-RF from
the median point, UQpy's default tolerances and central differences of step 0.01) once;
SubsetSimulation (modified Metropolis-Hastings, component-wise N(0, 1) proposals, conditional
probability 0.1, N runs a level, level 0 drawn directly) at each N of SETTINGS["subset"] for
seeds 0 to SEEDS - 1. The model is a PythonModel, run one point at a time.
"""

import json
import os
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from reliability_peers import CASES, SETTINGS  # noqa: E402

MODEL = """import sys
import numpy as np
sys.path.insert(0, {here!r})
from reliability_peers import g_of
CALLS = [0]
G = {{}}
def g(samples, case):
    if case not in G:
        G[case] = g_of(case)[1]
    u = np.atleast_2d(np.asarray(samples, dtype=float))
    CALLS[0] += len(u)
    return float(G[case](u)[0])
"""


def main():
    from importlib import metadata

    seeds, out = int(sys.argv[1]), sys.argv[2]
    with tempfile.TemporaryDirectory() as tmp:
        Path(tmp, "uqpy_limit_state.py").write_text(
            MODEL.format(here=str(Path(__file__).resolve().parent)))
        sys.path.insert(0, tmp)
        os.chdir(tmp)
        found = {case: run_case(case, seeds) for case in CASES}
    with open(out, "w") as handle:
        json.dump({"uqpy": metadata.version("UQpy"), "cases": found}, handle)


def run_case(case, seeds):
    import uqpy_limit_state
    from reliability_peers import g_of
    from UQpy.distributions import JointIndependent, Normal
    from UQpy.reliability import FORM, SubsetSimulation
    from UQpy.run_model.model_execution.PythonModel import PythonModel
    from UQpy.run_model.RunModel import RunModel
    from UQpy.sampling import ModifiedMetropolisHastings

    d = g_of(case)[0]

    def model():
        return RunModel(model=PythonModel(model_script="uqpy_limit_state.py",
                                          model_object_name="g", case=case))

    calls = uqpy_limit_state.CALLS
    calls[0] = 0
    form = FORM(distributions=[Normal()] * d, runmodel_object=model(), seed_u=np.zeros(d))
    rows = {"form": [[0, 0, calls[0], float(np.ravel(form.failure_probability)[0])]],
            "subset": []}
    joint = JointIndependent(marginals=[Normal()] * d)
    for n in SETTINGS["subset"]:
        for seed in range(seeds):
            calls[0] = 0
            sampler = ModifiedMetropolisHastings(dimension=d, log_pdf_target=joint.log_pdf,
                                                 n_chains=n // 10, random_state=seed)
            start = np.random.default_rng(seed).standard_normal((n, d))
            found = SubsetSimulation(runmodel_object=model(), sampling=sampler,
                                     samples_init=start, conditional_probability=0.1,
                                     nsamples_per_subset=n, max_level=20)
            rows["subset"].append([n, seed, calls[0], float(found.failure_probability)])
    print(case, "done", flush=True)
    return rows


if __name__ == "__main__":
    main()
