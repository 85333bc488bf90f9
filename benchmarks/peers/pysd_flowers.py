"""The flowers model (studies/models/flowers.yaml) in PySD: translate flowers.mdl, then time runs.

    benchmarks/out/peers-venv/bin/python benchmarks/peers/pysd_flowers.py [--runs 20]

The model is translated once (pysd.read_vensim); each run sets the three parameters of the
flowers studies and calls model.run (Euler, step 0.125, 20 years, output every year), as a user
would drive PySD for a Monte Carlo. Prints translate=, per_run= and the final area at the
nominal values (800 acres expected).
"""

import argparse
import shutil
import tempfile
import time
from pathlib import Path

t0 = time.perf_counter()
import numpy as np  # noqa: E402
import pysd  # noqa: E402

T_IMPORT = time.perf_counter() - t0
HERE = Path(__file__).resolve().parent


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="pysd-", dir=HERE.parent / "out"))
    shutil.copy(HERE / "flowers.mdl", folder / "flowers.mdl")
    start = time.perf_counter()
    model = pysd.read_vensim(str(folder / "flowers.mdl"))
    translate = time.perf_counter() - start
    nominal = model.run(return_columns=["area", "growth"])
    rng = np.random.default_rng(1)
    start = time.perf_counter()
    for _ in range(args.runs):
        params = {"intrinsic growth rate": rng.uniform(0.8, 1.2),
                  "decay rate": rng.normal(0.2, 0.02), "suitable area": rng.uniform(800, 1200)}
        out = model.run(params=params, return_columns=["area", "growth"])
        final_area, peak_growth = float(out["area"].iloc[-1]), float(out["growth"].max())
    per_run = (time.perf_counter() - start) / args.runs
    print(f"import={T_IMPORT:.3f} translate={translate:.3f} runs={args.runs} per_run={per_run:.4e} "
          f"nominal_final_area={float(nominal['area'].iloc[-1]):.2f} last={final_area:.1f},{peak_growth:.1f}")


if __name__ == "__main__":
    main()
