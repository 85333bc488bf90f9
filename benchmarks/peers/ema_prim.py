"""One PRIM box with EMA Workbench (`prim.Prim(...).find_box()`), its whole peeling and pasting
trajectory written as JSON, for benchmarks/bench_scenarios.py to set beside studyrun's.

    benchmarks/out/peers-venv/bin/python benchmarks/peers/ema_prim.py DATA.csv OUT.json \
        --y COLUMN [--threshold 0.8 --peel-alpha 0.05 --paste-alpha 0.05 --mass-min 0.05]

Every column of DATA.csv but --y is an input (all floats); --y holds 0 or 1. Prints work= (CPU
seconds of find_box).
"""

import argparse
import json
import logging
import time
import warnings

warnings.filterwarnings("ignore")
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from ema_workbench.analysis import prim  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("data")
    parser.add_argument("out")
    parser.add_argument("--y", required=True)
    parser.add_argument("--threshold", type=float, default=0.8)
    parser.add_argument("--peel-alpha", type=float, default=0.05)
    parser.add_argument("--paste-alpha", type=float, default=0.05)
    parser.add_argument("--mass-min", type=float, default=0.05)
    args = parser.parse_args()
    logging.disable(logging.WARNING)
    data = pd.read_csv(args.data)
    y = data.pop(args.y).to_numpy(dtype=float)
    start = time.process_time()
    alg = prim.Prim(data, y, threshold=args.threshold, peel_alpha=args.peel_alpha,
                    paste_alpha=args.paste_alpha, mass_min=args.mass_min)
    box = alg.find_box()
    work = time.process_time() - start
    steps = []
    for i, row in box.peeling_trajectory.iterrows():
        lims, init = box.box_lims[i], alg.box_init
        restricted = [c for c in data.columns if not np.all(lims[c].values == init[c].values)]
        qp = box.qp[i] if i < len(box.qp) else {}
        steps.append({"coverage": float(row["coverage"]), "density": float(row["density"]),
                      "mass": float(row["mass"]), "restricted": restricted,
                      "limits": {c: {"lower": float(lims.loc[0, c]), "upper": float(lims.loc[1, c]),
                                     "p": [float(v) for v in qp.get(c, [])]}
                                 for c in restricted}})
    with open(args.out, "w") as handle:
        json.dump({"trajectory": steps}, handle)
    print(f"work={work:.4f}")


if __name__ == "__main__":
    main()
