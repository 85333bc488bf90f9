"""Issue 16: what one gradient costs by the adjoint, the forward sensitivities and central
differences, on chains of first-order reactions; and what adjoint gradients save a fit.

    python benchmarks/bench_gradient.py [--source head|tree|COMMIT] [--repeats 3]

1. Chains x1 -> x2 -> ... -> xn -> (out) with m parameters: the 6-state, 9-parameter chain of
   studies/models/chain.yaml (six rates, three initial amounts), and chains of 50 states with 10,
   50 and 100 parameters (their first rates; with 100, the 50 rates and 50 initial amounts). In
   a fresh process per chain and objective, the gradient of J = final(xn) (one backward solve)
   and of J = integral(xn) (the trapezoid rule on 81 output times: a backward solve from each)
   at the nominal point, as the `gradient` analysis computes it, at rtol 1e-10 (atol 1e-13):
   the adjoint (forward and backward pass), the forward sensitivity equations, and the 2m + 1
   runs of central differences as studyrun's evaluator integrates them (one vectorized RK45
   ensemble, the batch the executor sends); the fastest of `repeats`. The symbolic
   differentiation (sympy, once per model, shared by adjoint and forward) is reported apart.
   Each method's gradient is checked against the forward sensitivities'.
2. `studyrun run` of the gradient study by each method, end to end (fresh process).
3. A fit of all nine parameters of the 6-state chain to noise-free data of its six states
   (t = 0, 1, ..., 20: 126 observations; the data from the matrix exponential), starting 20-30%
   off in every parameter: `calibrate` with L-BFGS-B and adjoint gradients, with L-BFGS-B and
   forward-difference Jacobians, and with Nelder-Mead; model runs (distinct points, the
   statistics' Jacobian included), wall and CPU time of `studyrun run` in a fresh process, the
   final cost and the largest relative error of the estimates.

Writes benchmarks/measured/gradient.csv.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import yaml
from harness import (
    OUT,
    ROOT,
    best,
    last_float,
    measure,
    run_study,
    show,
    use_source,
    write_rows,
    write_study,
)

ROWS: list[dict] = []
CHAINS = [(6, 9), (50, 10), (50, 50), (50, 100)]
OBJECTIVES = ("final", "integral")


def chain(n: int, m: int) -> tuple[dict, list[str]]:
    """The ode model of a chain of n stages and its m parameters: the chain of studies/models/
    for 6 stages; else rates falling from 1 to 0.3 along the chain and initial amounts from 1 to
    0.9, over 80 output intervals long enough for the material to pass. The parameters are the
    first m rates, then as many initial amounts as m exceeds n: the model is the same for every
    m."""
    if n == 6:
        model = yaml.safe_load((ROOT / "studies" / "models" / "chain.yaml").read_text())
    else:
        amounts = n
        rates = {f"k{i}": round(1.0 - 0.7 * (i - 1) / (n - 1), 6) for i in range(1, n + 1)}
        model = {"type": "ode", "time": {"start": 0, "stop": 3.2 * n, "step": 0.04 * n},
                 "method": "RK45",
                 "states": {f"x{i}": f"a{i}" if i <= amounts else 0 for i in range(1, n + 1)},
                 "rates": {f"x{i}": (f"k{i - 1} * x{i - 1} - " if i > 1 else "-") + f"k{i} * x{i}"
                           for i in range(1, n + 1)},
                 "constants": {**rates, **{f"a{i}": round(1.0 - 0.1 * (i - 1) / amounts, 6)
                                           for i in range(1, amounts + 1)}}}
    names = [f"k{i}" for i in range(1, min(m, n) + 1)] + [f"a{i}" for i in range(1, m - n + 1)]
    return model, names


def in_process(n: int, m: int, objective: str, repeats: int) -> None:
    """Part 1 in this process (run by `measure` in a fresh one): prints key=value."""
    import numpy as np

    from studyrun.analyses.gradient.equations import adjoint_gradient, forward_gradient
    from studyrun.analyses.gradient.objective import parse_objective
    from studyrun.analyses.local import exact_status, tighten
    from studyrun.analyses.local.sensitivity import difference_rows, perturbation_steps
    from studyrun.core.batch import RunContext
    from studyrun.models.ode import Ode

    spec, names = chain(n, m)
    model, _ = tighten(Ode(**spec), 1e-4, "auto")
    system = model.to_system()
    target = parse_objective(f"{objective}(x{n})")
    started = time.perf_counter()
    symbolic = exact_status(model, names, [target.output])[2]
    print(f"sympy={time.perf_counter() - started}")

    def weigh(times, ys):
        return {target.output: target.weights(ys[target.output], times)}

    nominal = np.array([system.constants[p] for p in names])
    found = {}
    for method, compute in (("adjoint", adjoint_gradient), ("forward", forward_gradient)):
        timings = []
        for _ in range(repeats):
            started = time.perf_counter()
            result = compute(symbolic, system, {}, weigh, system.rtol, system.atol)
            timings.append((time.perf_counter() - started, result))
        seconds, result = min(timings, key=lambda pair: pair[0])
        found[method] = result.gradient
        print(f"{method}={seconds} {method}_forward={result.cost['forward_seconds']} "
              f"{method}_backward={result.cost['backward_seconds']} "
              f"{method}_integrations={result.cost['integrations']} "
              f"{method}_steps={result.cost['backward_steps']}")
    steps = perturbation_steps(nominal, 1e-4)
    rows = difference_rows(nominal, steps, True)
    evaluator = model.build(Path("."))
    inputs = {p: rows[:, j] for j, p in enumerate(names)}
    context = RunContext(np.arange(len(rows)))
    timings = []
    for _ in range(repeats):
        started = time.perf_counter()
        out = evaluator(inputs, context)
        series = next(g for g in out.series_groups() if target.output in g.series)
        values = target.evaluate(series.series[target.output], series.time)
        timings.append(time.perf_counter() - started)
    found["fd"] = (values[1:m + 1] - values[m + 1:]) / (2 * steps)
    scale = np.max(np.abs(found["forward"] * nominal))
    for method in ("adjoint", "fd"):
        gap = np.max(np.abs((found[method] - found["forward"]) * nominal)) / scale
        print(f"{method}_gap={gap}")
    print(f"fd={min(timings)} fd_runs={len(rows)}")


def record(measure_: str, value: float, unit: str, command: str, **extra) -> None:
    row = {"measure": measure_, "target": "", "measured": round(value, 6), "unit": unit,
           "meets": "", "command": command, **extra}
    ROWS.append(row)
    show(row)


def gradients(repeats: int) -> None:
    """Part 1: one fresh process per chain and objective."""
    for n, m in CHAINS:
        for objective in OBJECTIVES:
            done = measure([sys.executable, Path(__file__).resolve(), "--in-process", str(n),
                            str(m), objective, "--repeats", str(repeats)])
            def get(key: str, out: str = done["stdout"]) -> float:
                return last_float(out, key)

            command = f"bench_gradient.py --in-process {n} {m} {objective}"
            what = f"chain {n} states / {m} parameters, J = {objective}(x{n})"
            record(f"{what}: adjoint", get("adjoint") * 1e3, "ms", command,
                   forward_pass_ms=round(get("adjoint_forward") * 1e3, 2),
                   backward_pass_ms=round(get("adjoint_backward") * 1e3, 2),
                   integrations=int(get("adjoint_integrations")),
                   backward_steps=int(get("adjoint_steps")),
                   gap_to_forward=f"{get('adjoint_gap'):.1e}")
            record(f"{what}: forward sensitivities", get("forward") * 1e3, "ms", command,
                   equations=n * (m + 1))
            record(f"{what}: central differences", get("fd") * 1e3, "ms", command,
                   runs=int(get("fd_runs")), gap_to_forward=f"{get('fd_gap'):.1e}")
            if objective == OBJECTIVES[0]:
                record(f"chain {n} states / {m} parameters: symbolic differentiation (once)",
                       get("sympy") * 1e3, "ms", command)


def end_to_end(repeats: int) -> None:
    """Part 2: `studyrun run` of the gradient study by each method."""
    for n, m in ((6, 9), (50, 100)):
        model, names = chain(n, m)
        constants = model["constants"]
        parameters = {p: {"bounds": [0.5 * constants[p], 1.5 * constants[p]]} for p in names}
        for method in ("adjoint", "forward", "fd"):
            path = write_study(f"gradient-{n}-{m}-{method}", {
                "model": model, "parameters": parameters,
                "analysis": {"type": "gradient", "objective": f"final(x{n})", "method": method},
                "execution": {"scheduler": "sync"}})
            done = best(repeats, run_study, path)
            results = json.loads((OUT / "results" / path.stem / "analysis.json").read_text())
            record(f"studyrun run, chain {n} states / {m} parameters, final(x{n}): {method}",
                   done["wall"], "s", f"studyrun run {path.relative_to(OUT)}",
                   cpu_s=round(done["cpu"], 2), runs=results["results"]["cost"]["runs"])


OFF = [1.3, 0.75, 1.25, 0.8, 1.2, 0.7, 1.3, 0.8, 1.2]  # the fit's start, times the true value


def chain_data() -> tuple[str, dict]:
    """The 6-state chain's six states at t = 0..20 (long CSV) and its true parameters."""
    import numpy as np
    from scipy.linalg import expm

    model, _ = chain(6, 9)
    true = model["constants"]
    k = [true[f"k{i}"] for i in range(1, 7)]
    A = np.diag([-r for r in k]) + np.diag(k[:5], -1)
    x0 = np.array([true["a1"], true["a2"], true["a3"], 0, 0, 0])
    rows = ["name,time,value"]
    states = [expm(A * t) @ x0 for t in range(21)]
    rows += [f"x{i + 1},{t},{x[i]:.17g}" for i in range(6) for t, x in enumerate(states)]
    return "\n".join(rows) + "\n", true


def fits(repeats: int) -> None:
    """Part 3: L-BFGS-B with adjoint gradients against differences and Nelder-Mead."""
    data, true = chain_data()
    model, names = chain(6, 9)
    parameters = {p: {"bounds": [0.5 * true[p], 1.5 * true[p]], "nominal": round(true[p] * f, 6)}
                  for p, f in zip(names, OFF)}
    for method, extra in (("lbfgsb", {"gradient": "adjoint"}), ("lbfgsb", {"gradient": "fd"}),
                          ("nelder-mead", {})):
        label = f"{method}-{extra.get('gradient', '')}".rstrip("-")
        path = write_study(f"chain-fit-{label}", {
            "model": model, "parameters": parameters,
            "analysis": {"type": "calibrate", "method": method, **extra,
                         "data": {"file": "chain-data.csv", "format": "long", "x": "time",
                                  "y": "value"}},
            "execution": {"scheduler": "sync"}})
        (path.parent / "chain-data.csv").write_text(data)
        done = best(repeats if method == "lbfgsb" else 1, run_study, path)
        results = json.loads((OUT / "results" / path.stem / "analysis.json").read_text())
        found = results["results"]
        error = max(abs(v["estimate"] / true[p] - 1) for p, v in found["parameters"].items())
        gradient = found.get("gradient", {})
        record(f"calibrate the 6-state chain (9 parameters): {label}", done["wall"], "s",
               f"studyrun run {path.relative_to(OUT)}", cpu_s=round(done["cpu"], 2),
               runs=found["evaluations"]["runs"], batches=found["evaluations"]["batches"],
               gradients=gradient.get("gradients", ""),
               final_cost=f"{found['cost']['final']:.2e}",
               largest_relative_error=f"{error:.1e}", converged=found["converged"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", help="head (default), a commit, or tree (the work tree)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--in-process", nargs=3, metavar=("N", "M", "OBJECTIVE"),
                        help="measure part 1 for one chain in this process (what the script "
                             "runs in a fresh one)")
    args = parser.parse_args()
    if args.in_process:
        n, m, objective = args.in_process
        in_process(int(n), int(m), objective, args.repeats)
        return
    print("studyrun measured:", use_source(args.source))
    gradients(args.repeats)
    end_to_end(args.repeats)
    fits(args.repeats)
    print(f"\nwrote {write_rows('gradient', ROWS)}")


if __name__ == "__main__":
    main()
