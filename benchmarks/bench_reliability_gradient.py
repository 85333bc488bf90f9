"""Issue 31: the model runs (and CPU seconds) of FORM with the model's adjoint against FORM with
forward differences, at 5 and 50 parameters.

    python benchmarks/bench_reliability_gradient.py [--source head|tree|COMMIT] [--repeats 1]

The study: logistic growth to t = 10 (RK45, rtol 1e-10) whose rate is rate + e1 + ... + ek
(k = 4 and 49, so 5 and 50 parameters),
rate ~ N(0.4, 0.04) and each e ~ N(0, 0.03 / sqrt(k)), failing where the population ends above
700 (beta = 2.8848 for every k, analytic). `studyrun run` of `reliability` with `method: form`
(four searches: the median point's and three more starts) by `gradient: adjoint` and by
`gradient: differences` (`check_runs: 0`: without the 200 importance-sampling runs that
check FORM afterwards, the same for both), in a fresh process each; model runs, iterations of the first search,
runs per iteration, in-process gradients and integrations, beta, and the CPU seconds (user +
system) and wall seconds of the process, the fastest of `repeats`.
Target: the adjoint at most 1/10 of the runs of differences at 50 parameters.

Writes benchmarks/measured/reliability_gradient.csv.
"""

from __future__ import annotations

import argparse
import json
import math
import os

from harness import OUT, best, run_study, show, use_source, write_rows, write_study

ANSWER = (math.log((1000 / 10 - 1) / (1000 / 700 - 1)) / 10 - 0.4) / 0.05  # beta, any k


def study(k: int, gradient: str) -> dict:
    es = [f"e{i}" for i in range(1, k + 1)]
    return {
        "model": {"type": "ode", "time": {"start": 0, "stop": 10, "step": 0.5},
                  "rtol": 1e-10, "atol": 1e-8, "states": {"population": "initial_population"},
                  "rates": {"population": f"({' + '.join(['rate', *es])}) * population * "
                                          "(1 - population / capacity)"},
                  "constants": {"rate": 0.4, "capacity": 1000, "initial_population": 10,
                                **{e: 0 for e in es}}},
        "parameters": {"rate": {"distribution": "normal", "mean": 0.4, "std": 0.04},
                       **{e: {"distribution": "normal", "mean": 0, "std": 0.03 / math.sqrt(k)}
                          for e in es}},
        "quantities": {"final_population": "final(population)"},
        "analysis": {"type": "reliability", "method": "form",
                     "failure": "final_population > 700", "gradient": gradient,
                     "max_runs": 20000, "check_runs": 0},  # FORM's runs alone
        "execution": {"scheduler": "sync"}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", default=None)
    parser.add_argument("--repeats", type=int, default=1)
    args = parser.parse_args()
    print(f"measuring studyrun {use_source(args.source)}; load {os.getloadavg()[0]:.1f}")
    rows, runs = [], {}
    for k in (4, 49):
        for gradient in ("adjoint", "differences"):
            name = f"reliability-gradient-{k}-{gradient}"
            path = write_study(name, study(k, gradient))
            done = best(args.repeats, run_study, path)
            results = json.loads((OUT / "results" / name / "analysis.json").read_text())[
                "results"]
            first = [r["runs"] for r in results["convergence"]]
            used = results.get("gradient", {})
            runs[k, gradient] = results["runs"]
            row = {"measure": f"FORM runs, {k + 1} parameters, {gradient}",
                   "measured": results["runs"], "unit": "runs",
                   "iterations": results["iterations"],
                   "runs_per_iteration": round((first[-1] - first[0]) / max(len(first) - 1, 1), 2),
                   "gradients": used.get("gradients"), "integrations": used.get("integrations"),
                   "beta": round(results["beta"], 6), "beta_error": f"{results['beta'] - ANSWER:.2e}",
                   "cpu_s": round(done["cpu"], 2), "wall_s": round(done["wall"], 2),
                   "load": round(os.getloadavg()[0], 1)}
            rows.append(row)
            show(row)
    ratio = runs[49, "adjoint"] / runs[49, "differences"]
    rows.append({"measure": "adjoint / differences runs at 50 parameters", "measured": ratio,
                 "unit": "", "target": "<= 0.1", "meets": ratio <= 0.1})
    show(rows[-1])
    print(write_rows("reliability_gradient", rows))


if __name__ == "__main__":
    main()
