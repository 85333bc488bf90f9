"""The scenarios report: the runs analysed, each box's limits with their quasi-p-values, the
peeling trajectory, the limits against each parameter's range and pair scatters of the
restricted parameters (PRIM); the tree's depths and leaves (CART). It computes nothing new."""

from __future__ import annotations

from typing import Any

import numpy as np

from studyrun.results.report.figures import shown_rows
from studyrun.results.report.markdown import Markdown, code, escape, format_number, table

PAIRS = 5  # restricted parameters drawn in the pair scatter at most


def section(analysis: dict[str, Any], outcome, figures, box: int | None) -> str:
    results = analysis["results"]
    lines = ["## Scenario discovery", "",
             f"Of interest: {code(results.get('of_interest'))}. Runs analysed: "
             f"{escape(results.get('runs'))}, of which {escape(results.get('runs_of_interest'))} "
             f"of interest; {escape(results.get('dropped_runs'))} counted apart (failed, or no "
             "finite value of a quantity the condition reads).", ""]
    said = [f"- {escape(line)}" for key in ("warnings", "notes") for line in results.get(key) or []]
    lines += [*said, ""] if said else []
    if results.get("method") == "cart":
        return "\n".join(lines + cart_section(results))
    boxes = list(results.get("boxes") or [])
    if boxes and box is not None and box != boxes[0].get("step"):
        last = len(boxes[0]["trajectory"]) - 1
        boxes[0] = {**boxes[0]["trajectory"][min(box, last)], "step": min(box, last),
                    "trajectory": boxes[0]["trajectory"]}
        lines += [Markdown(f"Box 1 is step {min(box, last)} of its trajectory, as `box:` asks; "
                           "the later boxes were found without its runs as chosen when the "
                           "study ran."), ""]
    for i, found in enumerate(boxes, 1):
        lines += box_section(i, found, results, outcome, figures)
    return "\n".join(lines)


def box_section(i: int, found: dict[str, Any], results: dict[str, Any], outcome,
                figures) -> list[str]:
    parameters = results.get("parameters") or {}
    lines = [f"### Box {i}", "",
             table(["step", "coverage", "density", "mass", "runs", "of interest"],
                   [[found.get("step"), found.get("coverage"), found.get("density"),
                     found.get("mass"), found.get("runs"), found.get("of_interest")]]), ""]
    rows = []
    for name, limit in (found.get("limits") or {}).items():
        if limit.get("values") is not None:
            rows.append([name, ", ".join(map(number, limit["values"])), "", "",
                         limit.get("p_value"), ""])
        else:
            span = parameters.get(name) or {}
            rows.append([name, limit.get("lower"), limit.get("upper"),
                         f"[{number(span.get('min'))}, {number(span.get('max'))}]",
                         limit.get("p_lower", ""), limit.get("p_upper", "")])
    if rows:
        lines += ["Limits (a categorical parameter: the values kept) and the quasi-p-value of "
                  "each restricted side (one-sided binomial test, Bryant and Lempert 2010):", "",
                  table(["parameter", "lower (values)", "upper", "range", "p lower (set)",
                         "p upper"], rows), ""]
    else:
        lines += ["The box restricts no parameter.", ""]
    trajectory = found.get("trajectory") or []
    if len(trajectory) > 1:
        lines += [draw_trajectory(i, trajectory, found.get("step"), figures), ""]
    if rows:
        lines += [draw_limits(i, found, parameters, figures), ""]
        if outcome is not None and len(found["limits"]) >= 1:
            lines += [draw_pairs(i, found, results, outcome, figures), ""]
    return lines


def draw_trajectory(i: int, trajectory: list[dict[str, Any]], step: int | None, figures) -> str:
    fig, ax = figures.new()
    coverage = [s.get("coverage") or 0 for s in trajectory]
    density = [s.get("density") or 0 for s in trajectory]
    restricted = [len(s.get("restricted") or []) for s in trajectory]
    points = ax.scatter(coverage, density, c=restricted, cmap="viridis", s=16)
    from matplotlib.ticker import MaxNLocator

    bar = fig.colorbar(points, ax=ax, label="restricted parameters")
    bar.locator = MaxNLocator(integer=True)
    bar.update_ticks()
    if step is not None and step < len(trajectory):
        ax.scatter([coverage[step]], [density[step]], s=140, facecolors="none",
                   edgecolors="red", linewidths=1.5, label=f"chosen (step {step})")
        ax.legend(loc="lower left")
    ax.set(xlabel="coverage", ylabel="density", title=f"Box {i}: peeling trajectory")
    return figures.save(fig, f"scenarios-trajectory-{i}",
                        f"Box {i}: coverage against density at each step")


def draw_limits(i: int, found: dict[str, Any], parameters: dict[str, Any], figures) -> str:
    names = list(found["limits"])
    fig, ax = figures.new(size=(6.0, 1.0 + 0.5 * len(names)))
    for row, name in enumerate(names):
        limit, span = found["limits"][name], parameters.get(name) or {}
        if limit.get("values") is not None:
            every = span.get("values") or limit["values"]
            kept = set(limit["values"])
            xs = np.linspace(0, 1, len(every)) if len(every) > 1 else np.array([0.5])
            ax.scatter(xs, [row] * len(every), c=["C0" if v in kept else "lightgray"
                                                  for v in every], s=60, zorder=3)
            continue
        low, high = span.get("min"), span.get("max")
        if low is None or high is None or not high > low:
            continue
        a = ((limit["lower"] if limit.get("lower") is not None else low) - low) / (high - low)
        b = ((limit["upper"] if limit.get("upper") is not None else high) - low) / (high - low)
        ax.plot([0, 1], [row, row], color="lightgray", linewidth=6, solid_capstyle="butt")
        ax.plot([a, b], [row, row], color="C0", linewidth=6, solid_capstyle="butt")
    ax.set_yticks(range(len(names)), names)
    ax.set(xlim=(-0.05, 1.05), ylim=(-0.7, len(names) - 0.3),
           xlabel="share of the parameter's range in the runs", title=f"Box {i}: limits")
    return figures.save(fig, f"scenarios-limits-{i}",
                        f"Box {i}: its limits (blue) within each parameter's range (grey)")


def draw_pairs(i: int, found: dict[str, Any], results: dict[str, Any], outcome,
               figures) -> str:
    """The restricted parameters two by two, runs of interest in orange, the box drawn."""
    from studyrun.analyses.scenarios.condition import condition
    from studyrun.blocks.expr import ExprError

    names = [n for n in found["limits"] if n in outcome.design.names][:PAIRS]
    try:
        test = condition(str(results.get("of_interest")))
    except ExprError:
        return ""
    if not names or not test.names <= set(outcome.values):
        return ""  # a folder whose runs do not hold what analysis.json names
    hit, decided = test.evaluate({n: outcome.values[n] for n in test.names}, len(outcome.ok))
    decided &= outcome.ok
    column = {n: j for j, n in enumerate(outcome.design.names)}
    rows = np.flatnonzero(decided)[shown_rows(int(decided.sum()), prefix=True)]
    pairs = [(a, b) for k, a in enumerate(names) for b in names[k + 1:]] or [(names[0], None)]
    cols = min(len(pairs), 4)
    fig, axes = figures.new(-(-len(pairs) // cols), cols, size=(3.4 * cols, 3.2 * -(-len(pairs) // cols)))
    for ax, (a, b) in zip(np.ravel(axes), pairs):
        xa = outcome.design.matrix[rows, column[a]]
        xb = (outcome.design.matrix[rows, column[b]] if b is not None
              else np.random.default_rng(0).random(len(rows)))
        ax.scatter(xa[~hit[rows]], xb[~hit[rows]], s=4, color="lightgray")
        ax.scatter(xa[hit[rows]], xb[hit[rows]], s=4, color="C1")
        for name, vertical in ((a, True), (b, False)):
            limit = found["limits"].get(name) if name else None
            if not limit or limit.get("values") is not None:
                continue
            for value in (limit.get("lower"), limit.get("upper")):
                if value is not None:
                    (ax.axvline if vertical else ax.axhline)(value, color="C0", linewidth=1)
        ax.set(xlabel=a, ylabel=b or "(jitter)")
    for ax in np.ravel(axes)[len(pairs):]:
        ax.remove()
    return figures.save(fig, f"scenarios-pairs-{i}",
                        f"Box {i}: runs of interest (orange) over its restricted parameters")


def cart_section(results: dict[str, Any]) -> list[str]:
    lines = [f"### Classification tree (depth {escape(results.get('depth'))})", ""]
    table_cv = results.get("cross_validation") or []
    if table_cv:
        lines += ["Depth chosen by 5-fold cross-validation: the smallest whose accuracy is "
                  "within one standard error of the best.", "",
                  table(["depth", "accuracy", "standard error"],
                        [[r.get("depth"), r.get("accuracy"), r.get("se")] for r in table_cv]), ""]
    rows = []
    for leaf in results.get("leaves") or []:
        rule = " and ".join(rule_text(name, limit) for name, limit in
                            (leaf.get("limits") or {}).items()) or "(every run)"
        rows.append([rule, leaf.get("predicted"), leaf.get("density"), leaf.get("coverage"),
                     leaf.get("mass"), leaf.get("runs")])
    if rows:
        lines += ["Leaves, densest first:", "",
                  table(["rule", "predicted", "density", "coverage", "mass", "runs"], rows), ""]
    return lines


def number(value: Any) -> str:
    return format_number(value) if value is not None else ""


def rule_text(name: str, limit: dict[str, Any]) -> str:
    if limit.get("values") is not None:
        return f"{name} in {{{', '.join(map(number, limit['values']))}}}"
    parts = []
    if limit.get("lower") is not None:
        parts.append(f"{name} > {number(limit['lower'])}")
    if limit.get("upper") is not None:
        parts.append(f"{name} <= {number(limit['upper'])}")
    return " and ".join(parts)
