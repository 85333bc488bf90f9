"""A program launched bare: subprocess.run in a plain loop, the floor for any tool that runs one.

    python benchmarks/peers/command_loop.py PROGRAM... --samples N [--folders one|per-run]

N (D + 2) runs with D = 3, as a Sobol' study of N base samples has (the inputs are uniform
random: the loop's cost does not depend on them). Per run: write input.json ({"x1", "x2", "x3"},
json.dumps), run `PROGRAM input.json output.json` in the folder, read output.json back.
`one`: every run in the same folder (the files are rewritten); `per-run`: a new folder per run,
removed after it, as studyrun and EasyVVUQ make. Prints runs=, import=, work=, per_run= and
cpu= (CPU seconds of this process and its programs during work=). compare.py also imports
`launch` to alternate it with studyrun's command model in one process.
"""

import argparse
import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

t0 = time.perf_counter()
import numpy as np  # noqa: E402

T_IMPORT = time.perf_counter() - t0


def launch(program: list[str], x: list[list[float]], scratch: Path, per_run: bool) -> list[float]:
    """y of each row of x: the program run once per row, in `scratch` or a new folder in it."""
    y = []
    for i, (x1, x2, x3) in enumerate(x):
        folder = scratch
        if per_run:
            folder = scratch / f"run-{i}"
            folder.mkdir()
        (folder / "input.json").write_text(json.dumps({"x1": x1, "x2": x2, "x3": x3}))
        subprocess.run([*program, "input.json", "output.json"], cwd=folder, check=True)
        y.append(json.loads((folder / "output.json").read_text())["y"])
        if per_run:
            shutil.rmtree(folder)
    return y


def cpu_seconds() -> float:
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("program", nargs="+", help="argv before the input and output files")
    parser.add_argument("--samples", type=int, default=64)
    parser.add_argument("--folders", choices=("one", "per-run"), default="one")
    parser.add_argument("--where", default=None, help="parent of the scratch folder")
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="command-loop-", dir=args.where))
    start, cpu = time.perf_counter(), cpu_seconds()
    x = np.random.default_rng(1).uniform(-np.pi, np.pi, (args.samples * 5, 3))
    y = launch(args.program, x.tolist(), scratch, args.folders == "per-run")
    work, cpu = time.perf_counter() - start, cpu_seconds() - cpu
    shutil.rmtree(scratch)
    print(f"runs={len(y)} import={T_IMPORT:.4f} work={work:.4f} per_run={work / len(y):.3e} "
          f"cpu={cpu:.4f} mean_y={np.mean(y):.4f}")


if __name__ == "__main__":
    main()
