"""Scenario discovery: studyrun's PRIM beside EMA Workbench's `prim.Prim` on the same runs.

    bash benchmarks/peers/setup_venv.sh        # EMA Workbench in benchmarks/out/peers-venv
    python benchmarks/bench_scenarios.py [--source tree]

Three data sets: 5,000 uniform runs on [0, 1]^5, of interest where x1 > 0.7 and x2 < 0.3
(noise-free, threshold 1), the same with 10% of the labels flipped (threshold 0.8), and the
882 runs of Bryant and Lempert (2010) that EMA Workbench ships (y: "Greater than 90%",
peel_alpha 0.1 as its example). Each is run by `studyrun run` of a scenarios study `from:` the
CSV and by benchmarks/peers/ema_prim.py; the two peeling and pasting trajectories are compared
step by step (restricted parameters, coverage, density, limits, quasi-p-values) and the box
each tool's threshold rule picks. CPU seconds: the whole `studyrun run` process, and EMA's
find_box alone. Figures are quoted in docs/methods.md and benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from pathlib import Path

import numpy as np
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness  # noqa: E402

WORK = harness.OUT / "scenarios"


def bryant() -> tuple[np.ndarray, np.ndarray, list[str]]:
    """The Bryant and Lempert (2010) runs from the EMA Workbench installed in the peers' venv."""
    found = harness.python("import ema_workbench, os; print(os.path.dirname("
                           "ema_workbench.__file__))", harness.PEERS_PYTHON)
    path = Path(found["stdout"].split()[-1]) / "examples" / "data" / "bryant et al 2010 data.csv"
    import pandas

    data = pandas.read_csv(path, index_col=False)
    x = data.iloc[:, 2:11]
    names = [re.sub(r"[^a-z0-9]+", "_", c.lower()).strip("_") for c in x.columns]
    return x.to_numpy(float), data.iloc[:, 15].to_numpy(float) > 0.5, names


def uniform(flip: float) -> tuple[np.ndarray, np.ndarray, list[str]]:
    rng = np.random.default_rng(1)
    x = rng.random((5000, 5))
    y = (x[:, 0] > 0.7) & (x[:, 1] < 0.3)
    if flip:
        y ^= np.random.default_rng(5).random(len(y)) < flip
    return x, y, [f"x{i}" for i in range(1, 6)]


def write(name: str, x: np.ndarray, y: np.ndarray, names: list[str], analysis: dict) -> Path:
    """The runs as a CSV (17 significant digits) and a study `from:` it."""
    folder = WORK / name
    folder.mkdir(parents=True, exist_ok=True)
    lines = [",".join([*names, "y"])]
    lines += [",".join([*(repr(float(v)) for v in row), str(int(hit))]) for row, hit in zip(x, y)]
    (folder / "runs.csv").write_text("\n".join(lines) + "\n")
    study = {"name": name, "seed": 1,
             "parameters": {n: {"bounds": [float(x[:, j].min()), float(x[:, j].max())]}
                            for j, n in enumerate(names)},
             "quantities": {"y": "y"},
             "analysis": {"type": "scenarios", "of_interest": "y > 0.5", "from": "runs.csv",
                          **analysis}}
    (folder / "study.yaml").write_text(yaml.safe_dump(study, sort_keys=False))
    return folder


# studyrun's PRIM alone on the same CSV, as ema_prim.py times find_box: CPU seconds of covering()
PRIM_ALONE = """
import sys, time, numpy as np, scipy.stats  # imported before the clock starts, as EMA's are
from studyrun.analyses.scenarios.prim import Data, covering
data = np.loadtxt(sys.argv[1], delimiter=",", skiprows=1)
start = time.process_time()
covering(Data([str(j) for j in range(data.shape[1] - 1)], data[:, :-1], data[:, -1] > 0.5,
              frozenset()), {threshold}, {peel_alpha}, 0.05, 0.05, 1, None)
print(f"work={{time.process_time() - start:.4f}}")
"""


def compare(ours: list[dict], theirs: list[dict]) -> dict:
    """The largest differences between two trajectories, step by step."""
    worst = {"steps": f"{len(ours)} / {len(theirs)}", "same_restricted": True,
             "d_coverage": 0.0, "d_density": 0.0, "d_limit": 0.0, "d_log10_p": 0.0, "p_compared": 0}
    for a, b in zip(ours, theirs):
        worst["same_restricted"] &= a["restricted"] == b["restricted"]
        worst["d_coverage"] = max(worst["d_coverage"], abs(a["coverage"] - b["coverage"]))
        worst["d_density"] = max(worst["d_density"], abs(a["density"] - b["density"]))
        for name, limit in a["limits"].items():
            other = b["limits"].get(name, {})
            for side, key in ((0, "lower"), (1, "upper")):
                if key in other:
                    worst["d_limit"] = max(worst["d_limit"], abs(limit[key] - other[key]))
                p, q = limit.get(f"p_{key}"), (other.get("p") or [-1, -1])[side]
                if p is not None and q > 0 and p > 0:
                    worst["d_log10_p"] = max(worst["d_log10_p"],
                                             abs(math.log10(p) - math.log10(q)))
                    worst["p_compared"] += 1
    return worst


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--source", default=None)
    args = parser.parse_args()
    which = harness.use_source(args.source)
    if not harness.PEERS_PYTHON.exists():
        sys.exit("run benchmarks/peers/setup_venv.sh first (EMA Workbench)")
    cases = [("box-noise-free", uniform(0.0), {"threshold": 1.0}),
             ("box-flipped-10pct", uniform(0.1), {"threshold": 0.8}),
             ("bryant-lempert", bryant(), {"threshold": 0.8, "peel_alpha": 0.1})]
    rows = []
    for name, (x, y, names), analysis in cases:
        folder = write(name, x, y, names, analysis)
        ran = harness.studyrun("run", str(folder / "study.yaml"), "--out", str(folder / "out"),
                               "--fresh", "--quiet", "--no-report")
        box = json.loads((folder / "out" / "analysis.json").read_text())["results"]["boxes"][0]
        peer = harness.measure([str(harness.PEERS_PYTHON),
                                str(harness.HERE / "peers" / "ema_prim.py"),
                                str(folder / "runs.csv"), str(folder / "ema.json"), "--y", "y",
                                "--threshold", str(analysis["threshold"]),
                                "--peel-alpha", str(analysis.get("peel_alpha", 0.05))])
        theirs = json.loads((folder / "ema.json").read_text())["trajectory"]
        alone = harness.measure([sys.executable, "-c", PRIM_ALONE.format(
            threshold=analysis["threshold"], peel_alpha=analysis.get("peel_alpha", 0.05)),
            str(folder / "runs.csv")])
        # EMA's threshold rule, written out as studyrun's: the largest coverage at density >= t
        reaching = [i for i, s in enumerate(theirs) if s["density"] >= analysis["threshold"]]
        pick = max(reaching, key=lambda i: (theirs[i]["coverage"], -i)) if reaching else None
        worst = compare(box["trajectory"], theirs)
        chosen = theirs[pick] if pick is not None else {"limits": {}, "restricted": []}
        limit_gap = max((abs(box["limits"][n][k] - chosen["limits"][n][k])
                         for n in box["limits"] for k in ("lower", "upper")
                         if n in chosen["limits"]), default=float("nan"))
        rows.append({"data": name, "runs": len(y), "of_interest": int(y.sum()), **worst,
                     "chosen_step": f"{box['step']} / {pick}",
                     "restricted": " ".join(box["restricted"]),
                     "same_chosen": box["restricted"] == chosen["restricted"],
                     "chosen_limit_gap": limit_gap, "coverage": round(box["coverage"], 4),
                     "density": round(box["density"], 4),
                     "studyrun_run_cpu_s": ran["cpu"],
                     "studyrun_prim_cpu_s": harness.last_float(alone["stdout"], "work"),
                     "ema_find_box_cpu_s": harness.last_float(peer["stdout"], "work"),
                     "ema_process_cpu_s": peer["cpu"]})
        harness.report(rows[-1:])
    print(f"studyrun: {which}")
    harness.report(rows)
    harness.write_rows("scenarios", rows)


if __name__ == "__main__":
    main()
