"""Issue 31: the model runs each reliability method needs for pf within 5% of the reference,
studyrun's methods beside OpenTURNS's, on R - S (beta 3), the linear limit state in 10 normals
(beta 4.75) and the four-branch series system.

    python benchmarks/bench_reliability.py [--seeds 100] [--peer-python PY] [--peers-json F]
    python benchmarks/bench_reliability.py --subset   # subset's stated cov against its scatter

Both tools run each sampling method at the same settings (SETTINGS: a target cov, runs a
level) with seeds 0 to SEEDS - 1. From the error of pf over the seeds (its root mean square
relative to the exact pf, bias included) and the mean runs, "runs for 5%" is the runs at which
95% of runs land within 5%: runs (rmse / (0.05 / 1.96))^2, as an error falls as 1 / sqrt(runs).
The error measured over 100 seeds is good to about 7%, the runs for 5% to about 14%. FORM and
SORM are deterministic: their runs and their pf's error. AK-MCS (5 seeds: a Gaussian process
on every run costs seconds) stands beside crude Monte Carlo's runs for 5%. studyrun's methods
are called as the analysis calls them (studyrun/analyses/reliability), on g in the standard
normal space: the executor adds no runs. OpenTURNS runs in the peer environment
(benchmarks/peers/reliability_peers.py; `bash benchmarks/peers/setup_venv.sh` installs it);
UQpy's FORM and subset simulation, where benchmarks/out/uqpy-venv holds it, in that one
(benchmarks/peers/reliability_uqpy.py says how to make it), with at most UQPY_SEEDS seeds: it
runs its model one point at a time.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
from harness import HERE, ROOT, write_rows

sys.path.insert(0, str(ROOT))

from studyrun.analyses.reliability.active import ak_mcs  # noqa: E402
from studyrun.analyses.reliability.form import form  # noqa: E402
from studyrun.analyses.reliability.sampling import (  # noqa: E402
    checked,
    importance,
    monte_carlo,
    subset,
)

PEER_PYTHON = str(HERE / "out" / "peers-venv" / "bin" / "python")
UQPY_PYTHON = HERE / "out" / "uqpy-venv" / "bin" / "python"
UQPY_SEEDS = 20
sys.path.insert(0, str(HERE / "peers"))
from reliability_peers import CAP, REFERENCE, SETTINGS, g_of, runs_of  # noqa: E402

HALF = 0.05 / 1.959963984540054  # the rmse at which 95% of runs land within 5%
AK_SEEDS, AK_COV = 5, 0.05


def fails(g):
    return g < 0


class Counted:
    def __init__(self, g):
        self.g, self.runs = g, 0

    def __call__(self, u):
        self.runs += len(u)
        return self.g(u)


def sampled(method: str, g, d: int, names: list[str], setting, seed: int) -> list:
    """[setting, seed, runs, pf] of one sampling run, FORM's runs included for importance."""
    counted = Counted(g)
    ss = np.random.SeedSequence(seed)
    if method == "monte_carlo":
        r = monte_carlo(counted, fails, d, ss, 1000, setting, CAP)
    elif method == "importance":
        first = form(counted, names, lambda u: {"standard": list(u)}, 1e-3, 10_000, False,
                     False)
        r = importance(counted, fails, np.array(first["design_point"]["standard"]), ss, 100,
                       setting, CAP)
    elif method == "subset":
        r = subset(counted, fails, d, ss, setting, 0.1, 10 ** 7)
    else:
        r = ak_mcs(counted, fails, d, ss, 12, 10_000, 4, setting, 2000)
    return [setting, seed, counted.runs, r["pf"]]


def studyrun_rows(case: str, seeds: int) -> dict[str, list]:
    """[[setting, seed, runs, pf], ...] by method, as the peer script gives them."""
    d, g = g_of(case)
    names = [f"u{i}" for i in range(d)]
    rows: dict[str, list] = {}
    for label, starts, check in (("form", False, 0), ("form (4 starts, check)", True, 200)):
        counted = Counted(g)
        found = form(counted, names, lambda u: {"standard": dict(zip(names, map(float, u)))},
                     1e-3, 10_000, starts, False)
        if check and found.get("design_point"):
            centres = [list(p["standard"].values()) for p in found.get("design_points", [])] \
                or [list(found["design_point"]["standard"].values())]
            checked(found, counted, fails, np.array(centres), np.random.SeedSequence(0), check)
        rows[label] = [[0, 0, counted.runs, found["pf"]]]
    counted = Counted(g)
    found = form(counted, names, lambda u: {}, 1e-3, 10_000, False, True)
    rows["sorm"] = [[0, 0, counted.runs, found["pf"]]]
    for method, settings in SETTINGS.items():
        if runs_of(case, method):
            rows[method] = [sampled(method, g, d, names, setting, seed)
                            for setting in settings for seed in range(seeds)]
    if runs_of(case, "monte_carlo"):  # pf 1e-6 needs a population of 4e8 for a cov of 0.05
        rows["ak-mcs"] = [sampled("ak-mcs", g, d, names, AK_COV, seed)
                          for seed in range(min(seeds, AK_SEEDS))]
    print(case, "done", flush=True)
    return rows


def summary(rows: list, ref: float) -> dict[str, dict]:
    """By setting: the seeds, the mean runs, the error's rms and mean, and the runs for 5%."""
    out = {}
    for setting in dict.fromkeys(r[0] for r in rows):
        mine = [r for r in rows if r[0] == setting]
        ratios = np.array([np.nan if r[3] is None else r[3] / ref for r in mine])
        runs = float(np.mean([r[2] for r in mine]))
        rmse = float(np.sqrt(np.mean((ratios - 1) ** 2)))
        out[str(setting)] = {"seeds": len(mine), "runs": runs, "rmse": rmse,
                             "bias": float(np.mean(ratios) - 1),
                             "for_5": runs * (rmse / HALF) ** 2 if np.isfinite(rmse) else None}
    return out


def cell(s: dict | None, deterministic: bool) -> str:
    if s is None:
        return "-"
    if not np.isfinite(s["bias"]):
        return f"{s['runs']:,.0f} runs, no pf"
    if deterministic:
        return f"{s['runs']:,.0f} runs, error {s['bias']:+.1%}"
    five = "-" if s["for_5"] is None else f"{s['for_5']:,.0f}"
    return f"{s['runs']:,.0f} runs, rmse {s['rmse']:.3f} (bias {s['bias']:+.3f}): {five}"


def subset_scatter() -> None:
    """Subset's stated cov against the scatter of pf over 400 seeds."""
    for case, per_level in (("linear-10d", 1000), ("linear-10d", 3000), ("r-s", 1000),
                            ("four-branch", 1000)):
        exact = REFERENCE[case]
        d, g = g_of(case)
        found = [subset(g, fails, d, np.random.SeedSequence(s), per_level, 0.1, 10 ** 7)
                 for s in range(400)]
        ratios = np.array([r["pf"] for r in found]) / exact
        covered = np.mean([r["ci"][0] < exact < r["ci"][1] for r in found])
        print(f"subset, {case}, {per_level:,} runs a level, 400 seeds: mean {ratios.mean():.3f}, "
              f"sd {ratios.std(ddof=1):.3f}, mean stated cov {np.mean([r['cov'] for r in found]):.3f}, "
              f"95% intervals holding pf {covered:.3f}, within 30% "
              f"{np.mean(np.abs(ratios - 1) < 0.3):.2f}, runs {np.mean([r['runs'] for r in found]):,.0f}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", type=int, default=100)
    parser.add_argument("--peer-python", default=PEER_PYTHON)
    parser.add_argument("--subset", action="store_true")
    parser.add_argument("--peers-json", help="the peer script's output from an earlier run")
    parser.add_argument("--uqpy-json", help="reliability_uqpy.py's output from an earlier run")
    parser.add_argument("--table", action="store_true",
                        help="the table again from benchmarks/out/reliability_studyrun.json")
    args = parser.parse_args()
    if args.subset:
        subset_scatter()
        return
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(args.peers_json or Path(tmp) / "peers.json")
        peer = None if args.peers_json or args.table else subprocess.Popen(
            [args.peer_python, str(HERE / "peers" / "reliability_peers.py"), str(args.seeds),
             str(out)])
        uq_out = Path(args.uqpy_json or Path(tmp) / "uqpy.json")
        uq = None if args.uqpy_json or args.table or not UQPY_PYTHON.exists() else subprocess.Popen(
            [str(UQPY_PYTHON), str(HERE / "peers" / "reliability_uqpy.py"),
             str(min(args.seeds, UQPY_SEEDS)), str(uq_out)])
        kept = HERE / "out" / "reliability_studyrun.json"
        if args.table:
            mine = json.loads(kept.read_text())
        else:
            mine = {case: studyrun_rows(case, args.seeds) for case in REFERENCE}
            kept.parent.mkdir(exist_ok=True)
            kept.write_text(json.dumps(mine))
        peers = json.loads(out.read_text()) if peer is None or peer.wait() == 0 \
            else {"cases": {}}
        uqpy = json.loads(uq_out.read_text()) if (uq is None and uq_out.exists()) or \
            (uq is not None and uq.wait() == 0) else {"cases": {}}
    table, csv_rows = [], []
    for case, ref in REFERENCE.items():
        theirs = peers["cases"].get(case, {})
        best_mc = min((s["for_5"] for s in summary(mine[case].get("monte_carlo", []),
                                                    ref).values() if s["for_5"]), default=None)
        for method, rows in mine[case].items():
            kind = "form" if method.startswith("form") else method
            deterministic = kind in ("form", "sorm")
            ours = summary(rows, ref)
            peer = summary(theirs[kind], ref) if kind in theirs else {}
            other = uqpy["cases"].get(case, {})
            third = summary(other[kind], ref) if kind in other and method != \
                "form (4 starts, check)" else {}
            for setting, s in ours.items():
                p = peer.get(setting)
                if method == "ak-mcs":
                    ratio = f"{s['runs'] / best_mc:.5f} of Monte Carlo's" if best_mc else "-"
                elif deterministic:
                    ratio = f"{s['runs'] / p['runs']:.2f}" if p else "-"
                else:
                    ratio = f"{s['for_5'] / p['for_5']:.2f}" if p and s["for_5"] and \
                        p["for_5"] else "-"
                label = "" if deterministic else f" at {setting}"
                table.append(f"| {case} | {method}{label} | {cell(s, deterministic)} | "
                             f"{cell(p, deterministic)} | {ratio} | "
                             f"{cell(third.get(setting), deterministic)} |")
                csv_rows.append({"case": case, "method": method, "setting": setting,
                                 **{f"studyrun_{k}": v for k, v in s.items()},
                                 **{f"openturns_{k}": v for k, v in (p or {}).items()}})
    print(f"\nOpenTURNS {peers.get('openturns', 'not run')}, UQpy {uqpy.get('uqpy', 'not run')}; "
          f"{args.seeds} seeds (AK-MCS {min(args.seeds, AK_SEEDS)}, UQpy "
          f"{min(args.seeds, UQPY_SEEDS)}); a sampling cell: mean runs, rmse of pf / exact "
          "(bias): runs for 5%\n")
    print("| case | method | studyrun | OpenTURNS | ratio to OpenTURNS (runs for 5%) | UQpy |")
    print("| --- | --- | --- | --- | --- | --- |")
    print("\n".join(table))
    write_rows("reliability", csv_rows)


if __name__ == "__main__":
    main()
