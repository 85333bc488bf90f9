"""Issue 31: the model runs each reliability method needs until pf is within 5% of the reference
(median of 5 seeds), studyrun's methods beside OpenTURNS's, on R - S (beta 3), the linear limit
state in 10 normals (beta 4.75) and the four-branch series system.

    python benchmarks/bench_reliability.py [--seeds 5] [--peer-python PY] [--subset]

For each seed a method runs with growing settings (a smaller target cov, more runs a level) and
counts the runs of the first setting whose pf is within 5%; the table gives their median ("-"
where no setting of any seed got there, with the nearest pf). studyrun's methods are called as
the analysis calls them (studyrun/analyses/reliability), on g in the standard normal space: the
executor adds no runs. OpenTURNS runs in the peer environment (benchmarks/peers/
reliability_peers.py; `bash benchmarks/peers/setup_venv.sh` installs it). `--subset` measures
subset simulation's scatter on the 10-normal case over 200 seeds instead.
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
from studyrun.analyses.reliability.sampling import importance, monte_carlo, subset  # noqa: E402

COVS = (0.3, 0.2, 0.14, 0.1, 0.07, 0.05, 0.035, 0.025, 0.018, 0.012, 0.008)
LEVEL_RUNS = (250, 500, 1000, 2000, 3000, 5000, 10000)
AK_COVS = (0.05, 0.03, 0.02)
PEER_PYTHON = str(HERE / "out" / "peers-venv" / "bin" / "python")
sys.path.insert(0, str(HERE / "peers"))
from reliability_peers import CAP, REFERENCE, g_of, within  # noqa: E402


def fails(g):
    return g < 0


class Counted:
    def __init__(self, g):
        self.g, self.runs = g, 0

    def __call__(self, u):
        self.runs += len(u)
        return self.g(u)


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
            from studyrun.analyses.reliability.sampling import checked

            centres = [list(p["standard"].values()) for p in found.get("design_points", [])] \
                or [list(found["design_point"]["standard"].values())]
            checked(found, counted, fails, np.array(centres), np.random.SeedSequence(0), check)
        rows[label] = [[0, s, counted.runs, found["pf"]] for s in range(seeds)]
    counted = Counted(g)
    found = form(counted, names, lambda u: {}, 1e-3, 10_000, False, True)
    rows["sorm"] = [[0, s, counted.runs, found["pf"]] for s in range(seeds)]
    centre = None
    for method in ("importance", "monte_carlo", "subset", "ak-mcs"):
        rows[method] = []
        for seed in range(seeds):
            settings = {"subset": LEVEL_RUNS, "ak-mcs": AK_COVS}.get(method, COVS)
            for setting in settings:
                counted = Counted(g)
                ss = np.random.SeedSequence(seed)
                if method == "monte_carlo":
                    if case == "linear-10d":
                        break
                    r = monte_carlo(counted, fails, d, ss, 1000, setting, 10 ** 9)
                elif method == "importance":
                    first = form(counted, names, lambda u: {"standard": list(u)}, 1e-3,
                                 10_000, False, False)
                    centre = np.array(first["design_point"]["standard"])
                    r = importance(counted, fails, centre, ss, 100, setting, CAP)
                elif method == "subset":
                    r = subset(counted, fails, d, ss, setting, 0.1, 10 ** 7)
                else:
                    if case == "linear-10d":
                        break  # pf 1e-6 needs a population of 4e8 for a cov of 0.05
                    r = ak_mcs(counted, fails, d, ss, 12, 10_000, 4, setting, 2000)
                rows[method].append([setting, seed, counted.runs, r["pf"]])
                if within(r["pf"], case) or counted.runs >= CAP:
                    break
        print(case, method, "done", flush=True)
    return rows


def to_answer(rows: list, ref: float, seeds: int) -> tuple[float | None, str]:
    """The median over seeds of the runs of the first setting within 5%, and a note."""
    runs, nearest = [], None
    for seed in range(seeds):
        mine = [r for r in rows if r[1] == seed]
        hit = next((r for r in mine if r[3] is not None and abs(r[3] / ref - 1) <= 0.05), None)
        runs.append(hit[2] if hit else np.inf)
        for r in mine:
            if r[3] is not None and (nearest is None or abs(r[3] / ref - 1) < abs(nearest / ref - 1)):
                nearest = r[3]
    median = float(np.median(runs))
    if not np.isfinite(median):
        return None, f"not within 5% (nearest pf {nearest:.3g})" if nearest else "no pf"
    return median, f"{sum(np.isfinite(runs))}/{seeds} seeds within 5%"


KINDS = {"form": "form", "form (4 starts, check)": "form", "sorm": "sorm",
         "importance": "importance", "monte_carlo": "monte_carlo", "subset": "subset",
         "ak-mcs": "monte_carlo"}


def subset_scatter() -> None:
    exact = REFERENCE["linear-10d"]
    _, g = g_of("linear-10d")
    found = [subset(g, fails, 10, np.random.SeedSequence(s), 3000, 0.1, 20_000)
             for s in range(200)]
    ratios = np.array([r["pf"] for r in found]) / exact
    print(f"subset, 10 normals, beta 4.75, 3,000 runs a level, 200 seeds: mean {ratios.mean():.3f}, "
          f"sd {ratios.std():.3f}, within 30% {np.mean(np.abs(ratios - 1) < 0.3):.2f}, "
          f"mean stated cov {np.mean([r['cov'] for r in found]):.3f}, "
          f"runs at most {max(r['runs'] for r in found):,}")


def at_cov(cov: float, seeds: int, peer_python: str) -> None:
    """Monte Carlo and importance sampling asked for the same cov (0.025: a 95% interval of
    about 5%), both tools: the median runs and the seeds within 5%."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "peers.json"
        cases = ",".join(REFERENCE)
        peer = subprocess.Popen([peer_python, str(HERE / "peers" / "reliability_peers.py"),
                                 str(seeds), str(out), cases, str(cov)])
        mine: dict[str, dict[str, list]] = {}
        for case in REFERENCE:
            d, g = g_of(case)
            names = [f"u{i}" for i in range(d)]
            mine[case] = {"monte_carlo": [], "importance": []}
            for seed in range(seeds):
                ss = np.random.SeedSequence(seed)
                counted = Counted(g)
                r = monte_carlo(counted, fails, d, ss, 1000, cov, CAP)
                mine[case]["monte_carlo"].append([cov, seed, counted.runs, r["pf"]])
                counted = Counted(g)
                first = form(counted, names, lambda u: {"standard": list(u)}, 1e-3, 10_000,
                             False, False)
                r = importance(counted, fails, np.array(first["design_point"]["standard"]), ss,
                               100, cov, CAP)
                mine[case]["importance"].append([cov, seed, counted.runs, r["pf"]])
        peers = json.loads(out.read_text()) if peer.wait() == 0 else {"cases": {}}
    print(f"\ncov {cov}: median runs (seeds within 5%), studyrun | OpenTURNS")
    for case in REFERENCE:
        for kind in ("monte_carlo", "importance"):
            line = [case, kind]
            for rows in (mine[case][kind], peers["cases"].get(case, {}).get(kind, [])):
                hits = sum(within(r[3], case) for r in rows)
                line.append(f"{np.median([r[2] for r in rows]):,.0f} ({hits}/{len(rows)})"
                            if rows else "-")
            print(" | ".join(line))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--peer-python", default=PEER_PYTHON)
    parser.add_argument("--subset", action="store_true")
    parser.add_argument("--peers-json", help="the peer script's output from an earlier run")
    parser.add_argument("--table", action="store_true",
                        help="the table again from benchmarks/out/reliability_studyrun.json")
    parser.add_argument("--at-cov", type=float,
                        help="Monte Carlo and importance at this one target cov instead")
    args = parser.parse_args()
    if args.at_cov:
        at_cov(args.at_cov, args.seeds, args.peer_python)
        return
    if args.subset:
        subset_scatter()
        return
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(args.peers_json or Path(tmp) / "peers.json")
        peer = None if args.peers_json else subprocess.Popen(
            [args.peer_python, str(HERE / "peers" / "reliability_peers.py"), str(args.seeds),
             str(out)])
        kept = HERE / "out" / "reliability_studyrun.json"
        mine = json.loads(kept.read_text()) if args.table else {}
        for case in [] if args.table else REFERENCE:  # kept: --table remakes the table
            mine[case] = studyrun_rows(case, args.seeds)
            (HERE / "out").mkdir(exist_ok=True)
            kept.write_text(json.dumps(mine))
        peers = json.loads(out.read_text()) if peer is None or peer.wait() == 0 \
            else {"cases": {}}
    table, csv_rows = [], []
    for case, ref in REFERENCE.items():
        theirs = peers["cases"].get(case, {})
        for method, rows in mine[case].items():
            runs, note = to_answer(rows, ref, args.seeds)
            kind = KINDS[method]
            peer_runs, peer_note = (to_answer(theirs[kind], ref, args.seeds)
                                    if kind in theirs else (None, "-"))
            if method == "ak-mcs":
                peer_runs, peer_note = to_answer(mine[case]["monte_carlo"], ref, args.seeds) \
                    if mine[case]["monte_carlo"] else (None, "-")
            ratio = f"{runs / peer_runs:.2f}" if runs and peer_runs else "-"
            against = "studyrun monte_carlo" if method == "ak-mcs" else kind
            table.append(f"| {case} | {method} | {fmt(runs)} ({note}) | {against}: "
                         f"{fmt(peer_runs)} ({peer_note}) | {ratio} |")
            csv_rows.append({"case": case, "method": method, "runs": runs, "note": note,
                             "peer": kind, "peer_runs": peer_runs, "peer_note": peer_note})
    print(f"\nOpenTURNS {peers.get('openturns', 'not run')}; median of {args.seeds} seeds\n")
    print("| case | studyrun method | runs to within 5% | OpenTURNS, same kind | ratio |")
    print("| --- | --- | --- | --- | --- |")
    print("\n".join(table))
    write_rows("reliability", csv_rows)


def fmt(runs):
    return "-" if runs is None else f"{runs:,.0f}"


if __name__ == "__main__":
    main()
