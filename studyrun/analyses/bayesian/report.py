"""report.md for Bayesian optimisation: the optimum, the best objective against runs, the runs
in the parameter space (pairs of up to PAIRED parameters, failed runs marked) and the GP's Q2."""

from __future__ import annotations

from typing import Any

import numpy as np

from studyrun.results.report.markdown import cell, escape, table

PAIRED = 5  # parameters drawn pair by pair; past this, the PAIRED of shortest length scale


def describe_search(spec: Any, design: Any) -> str:
    """What `studyrun plan` says: the first design and the rounds after it."""
    from studyrun.analyses.bayesian.search import defaults

    initial, most = defaults(spec, len(design.names))
    limits = f"; constraints: {'; '.join(spec.constraints)}" if spec.constraints else ""
    return (f"iterative: Bayesian optimisation (EGO), a first design of {len(design.matrix)} runs "
            f"(the nominal start and a Latin hypercube), then rounds of {spec.batch} run(s) chosen "
            f"by {spec.acquisition} on Gaussian processes, at most {most} runs{limits}")


def report(r: dict[str, Any], objective: str, figures: Any) -> str:
    from studyrun.analyses.optimize import optimum_tables

    surrogate = r.get("surrogate") or {}
    q2 = surrogate.get("q2")
    lines = [f"## Optimization ({escape(r['method'])}, {escape(r['acquisition'])})", "",
             f"Objective: {escape(objective)}. {'Converged' if r['converged'] else 'Stopped'}: "
             f"{escape(str(r['message']).rstrip('.'))}; {escape(r['evaluations'])} model runs in "
             f"{escape(r['batches'])} rounds (a first design of {escape(r['initial'])}, then "
             f"{escape(r['batch'])} a round).", "",
             *(f"*{escape(note)}*\n" for note in r.get("notes", [])), *optimum_tables(r)]
    if r.get("constraint_values"):
        lines += [table(["constraint at the optimum", "left", "right", "met"],
                        [[c, v["left"], v["right"], "yes" if v["met"] else "no"]
                         for c, v in r["constraint_values"].items()]), ""]
    if surrogate:
        lines += [f"The objective's Gaussian process, on {escape(surrogate['samples'])} runs: "
                  f"leave-one-out Q2 {cell(q2)}, noise variance "
                  f"{cell(surrogate.get('noise_variance'), 3)}, length scales (unit box) "
                  + ", ".join(f"{escape(n)} {cell(v, 3)}"
                              for n, v in surrogate.get("length_scales", {}).items()) + ".", ""]
    if r["failed"]:
        lines += [f"{len(r['failed'])} run(s) failed; they are left out of the objective's GP "
                  "and the region around them is steered away from (marked x in the figures).", ""]
    lines += history_figure(r, figures) + runs_figure(r, figures)
    return "\n".join(lines)


def history_figure(r: dict[str, Any], figures: Any) -> list[str]:
    history = [np.nan if v is None else v for v in r["history"]]
    if not np.isfinite(history).any():
        return []
    fig, ax = figures.new()
    ax.plot(np.arange(1, len(history) + 1), history, drawstyle="steps-post")
    ax.axvline(r["initial"] + 0.5, color="0.6", linestyle=":", label="end of the first design")
    ax.set(xlabel="model runs", ylabel="best feasible objective so far",
           title="Bayesian optimisation: best objective against runs")
    ax.legend()
    return [figures.save(fig, "optimize-history", "Best objective against runs"), ""]


def runs_figure(r: dict[str, Any], figures: Any) -> list[str]:
    names = list(r["parameters"])
    if len(names) < 2:
        return []
    scales = (r.get("surrogate") or {}).get("length_scales") or {}
    shown = sorted(names, key=lambda n: scales.get(n, 0.0))[:PAIRED] if len(names) > PAIRED \
        else names
    columns = [names.index(n) for n in shown]
    x = np.array(r["evaluated"]["parameters"], dtype=float)
    value = np.array([np.nan if v is None else v for v in r["evaluated"]["objective"]])
    failed = np.isnan(value)
    feasible = np.array(r["evaluated"]["feasible"], dtype=bool)
    infeasible = ~failed & ~feasible
    optimum = [r["parameters"][n]["optimum"] for n in shown]
    k = len(shown)
    fig, axes = figures.new(k - 1, k - 1, size=(2.6 * (k - 1) + 1.5, 2.6 * (k - 1) + 1))
    axes = np.atleast_2d(axes)
    for i in range(1, k):
        for j in range(k - 1):
            ax = axes[i - 1, j]
            if j >= i:
                ax.axis("off")
                continue
            a, b = columns[j], columns[i]
            points = ax.scatter(x[feasible, a], x[feasible, b], c=value[feasible], s=14,
                                cmap="viridis")
            ax.scatter(x[infeasible, a], x[infeasible, b], s=14, facecolors="none",
                       edgecolors="0.5")
            ax.scatter(x[failed, a], x[failed, b], marker="x", color="red", s=20)
            ax.plot(optimum[j], optimum[i], marker="*", color="black", markersize=12)
            ax.set(xlabel=shown[j] if i == k - 1 else "", ylabel=shown[i] if j == 0 else "")
    if feasible.any():
        fig.colorbar(points, ax=axes[0, -1], label="objective")  # beside the first row
    return [figures.save(fig, "optimize-runs", "The runs in the parameter space (colour: "
                         "objective; open: a constraint not met; x: failed; star: the optimum)"), ""]
