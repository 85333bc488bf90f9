"""BLAS and OpenMP threads held to the cores: in the analysis and its fits, and in each worker of
a LocalCluster (its share of the cores)."""

from __future__ import annotations

import os

import numpy as np
from conftest import write_study
from threadpoolctl import threadpool_info, threadpool_limits

import studyrun
from studyrun.core.threads import POOL_VARIABLES, usable_cores
from studyrun.execution.executors import start_executor

MODEL = '''
import numpy as np
from threadpoolctl import threadpool_info

def ishigami(x1, x2, x3):
    seen = max(i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas")
    with open(SEEN, "a") as handle:
        handle.write(f"{seen}\\n")
    return np.sin(x1) + 7 * np.sin(x2) ** 2 + 0.1 * x3 ** 4 * np.sin(x1)
'''


def blas_threads() -> list[int]:
    np.ones(1)  # numpy's BLAS loaded
    return [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]


def test_the_analysis_holds_blas_threads_to_the_cores(tmp_path):
    """A BLAS pool of more threads than cores (as in a container whose CPU quota its BLAS does
    not see) is held to the cores inside the analysis, and given back after it."""
    seen = tmp_path / "seen.txt"
    (tmp_path / "models.py").write_text(MODEL.replace("SEEN", repr(str(seen))))
    path = write_study(tmp_path, """
        name: threads
        seed: 1
        model: {type: python, function: models:ishigami, vectorized: true}
        parameters: {x1: {bounds: [-3, 3]}, x2: {bounds: [-3, 3]}, x3: {bounds: [-3, 3]}}
        analysis: {type: surrogate, method: pce, samples: 40}
        execution: {scheduler: sync}
        """)
    import scipy.linalg  # noqa: F401 - its BLAS loaded now, under the limit below, as in a suite
    # where an earlier test imported it; loaded within the run, it kept the session's one thread

    many = usable_cores() + 6
    with threadpool_limits(limits=many):
        studyrun.run(path, tmp_path / "out", report=False)
        assert set(blas_threads()) == {many}
    counts = {int(line) for line in seen.read_text().split()}
    assert counts == {usable_cores()}


def test_each_local_worker_has_its_share_of_the_cores(monkeypatch):
    for name in POOL_VARIABLES:  # as a user who set none (the test session sets them to 1)
        monkeypatch.delenv(name, raising=False)
    executor = start_executor("local", 1)
    try:
        threads = executor.client.run(blas_threads)
    finally:
        executor.close()
    assert [set(t) for t in threads.values()] == [{usable_cores()}]


def test_a_library_loaded_after_a_block_is_held_in_the_next():
    """The pools are found once and again after a new import: scipy's BLAS, loaded after a
    first block held numpy's alone, is held to one thread in the next block too."""
    import subprocess
    import sys

    code = (
        "import numpy\n"
        "from threadpoolctl import threadpool_info\n"
        "from studyrun.core.threads import held_to_cores\n"
        "with held_to_cores(1):\n"
        "    pass\n"
        "import scipy.linalg\n"
        "with held_to_cores(1):\n"
        "    inside = sorted({i['filepath'] for i in threadpool_info() if i['num_threads'] == 1})\n"
        "blas = sorted({i['filepath'] for i in threadpool_info() if i['user_api'] == 'blas'})\n"
        "print(len(blas) == 2 and set(blas) <= set(inside))\n")
    env = {k: v for k, v in os.environ.items() if k not in POOL_VARIABLES}  # pools of 2+
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert done.stdout.strip() == "True", done.stderr
