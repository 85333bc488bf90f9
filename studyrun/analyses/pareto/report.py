"""report.md for a multi-objective search: the front, its figures, the hypervolume per
generation, and each front point as a `parameters:` block to paste into a study."""

from __future__ import annotations

from typing import Any

import numpy as np

from studyrun.core.numbers import finite_or_none
from studyrun.results.report.markdown import escape, fence, table

NAMES = {"nsga2": "NSGA-II", "nsga3": "NSGA-III"}
INFEASIBLE_SHOWN = 10


def describe_search(spec: Any) -> str:
    """What `studyrun plan` says: the search and its size."""
    terms = ", ".join(f"{sense} {text}" for sense, text in spec.objective_terms())
    robust = (f", each candidate over the same {spec.scenarios} scenarios of the uncertain "
              "parameters" if spec.scenarios else "")
    most = spec.generations * spec.population_size * (spec.scenarios or 1)
    return (f"iterative: {NAMES[spec.method]} (pymoo), {spec.generations} generations of "
            f"{spec.population_size} candidates{robust}, each generation one batch of runs (at "
            f"most {most:,} runs; fewer where candidates repeat); "
            f"objectives: {terms}" + (f"; constraints: {'; '.join(spec.constraints)}"
                                      if spec.constraints else ""))


def report(results: dict[str, Any], figures: Any) -> str:
    objectives = [o["objective"] for o in results["objectives"]]
    front = results["pareto"]
    lines = [f"## Multi-objective optimization ({NAMES[results['method']]})", "",
             "Objectives: " + ", ".join(f"{escape(o['sense'])} {escape(o['objective'])}"
                                        for o in results["objectives"]) + ".",
             *([f"Constraints: {'; '.join(map(escape, results['constraints']))}."]
               if results["constraints"] else []),
             "", f"{escape(results['message'])}. Hypervolume change over the last generations: "
                 f"{format_change(results['hypervolume_change'])}"
                 f" ({'converged' if results['converged'] else 'not converged'}).", ""]
    if front:
        names = list(front[0]["parameters"])
        shown = [q for q in front[0]["quantities"] if q not in objectives]
        lines += ["### Pareto front", "",
                  table(["point", *objectives, *names, *shown],
                        [[i + 1, *(p["objectives"][o] for o in objectives),
                          *(p["parameters"][n] for n in names),
                          *(p["quantities"][q] for q in shown)] for i, p in enumerate(front)]), ""]
        lines += draw_front(results, objectives, figures)
    lines += draw_hypervolume(results, figures)
    infeasible = results["infeasible"]
    if infeasible:
        lines += [f"### Infeasible candidates of the last generation ({len(infeasible)})", "",
                  table(["candidate", "violation", "failed", *objectives],
                        [[i + 1, p["violation"], "yes" if p["failed"] else "",
                          *(p["objectives"][o] for o in objectives)]
                         for i, p in enumerate(infeasible[:INFEASIBLE_SHOWN])]), ""]
        if len(infeasible) > INFEASIBLE_SHOWN:
            lines += [f"The other {len(infeasible) - INFEASIBLE_SHOWN} are in analysis.json "
                      "(`results.infeasible`).", ""]
    if front:
        robust = results.get("scenarios") is not None
        lines += ["### Applying a Pareto point", "",
                  "Each point's decisions, ready to paste over their lines in a study's "
                  "`parameters:` block; the uncertain parameters stay as they are:" if robust else
                  "Each point's parameters, ready to paste over a study's `parameters:` block:", ""]
        for i, point in enumerate(front):
            values = ", ".join(f"{o} = {point['objectives'][o]:.6g}" for o in objectives
                               if point["objectives"][o] is not None)
            lines += [fence("\n".join([
                f"# Pareto point {i + 1}: {values}", "parameters:",
                *(f"  {n}: {v!r}" for n, v in point["parameters"].items()),
                *(["  # ... and the uncertain parameters, as the study gives them"]
                  if robust else [])]), "yaml"), ""]
    return "\n".join(lines)


def format_change(change: float | None) -> str:
    return "not yet known (fewer than 6 generations)" if change is None else f"{change:.3g}"


def draw_front(results: dict[str, Any], objectives: list[str], figures: Any) -> list[str]:
    """Two objectives: every feasible candidate faded, the front over it; three or more: the
    front in parallel coordinates, each objective scaled to its range on the front."""
    front = np.array([[p["objectives"][o] for o in objectives] for p in results["pareto"]],
                     dtype=float)
    if len(objectives) == 2:
        seen = results["evaluated"]
        every = np.array([row for row, ok in zip(seen["objectives"], seen["feasible"])
                          if ok and row is not None], dtype=float).reshape(-1, 2)
        fig, ax = figures.new()
        ax.scatter(every[:, 0], every[:, 1], s=6, color="0.6", alpha=0.3,
                   label="candidates (feasible)")
        ax.plot(front[:, 0], front[:, 1], "-", color="C3", lw=1, label="Pareto front")
        for i, point in enumerate(results["pareto"]):
            marker, = ax.plot([front[i, 0]], [front[i, 1]], "o", color="C3", ms=4)
            figures.tip(marker, describe_point(i, point, objectives))
        ax.set(xlabel=objectives[0], ylabel=objectives[1], title="Pareto front")
        ax.legend()
        return [figures.save(fig, "pareto-front", "The Pareto front over every feasible "
                                                 "candidate"), ""]
    low, high = front.min(axis=0), front.max(axis=0)
    scaled = (front - low) / np.where(high > low, high - low, 1.0)
    fig, ax = figures.new(size=(1.8 * len(objectives) + 2, 4))
    for i, (row, point) in enumerate(zip(scaled, results["pareto"])):
        line, = ax.plot(range(len(objectives)), row, color="C3", alpha=0.5, lw=1)
        figures.tip(line, describe_point(i, point, objectives))
    ax.set_xticks(range(len(objectives)), [f"{o}\n{lo:.3g} .. {hi:.3g}"
                                           for o, lo, hi in zip(objectives, low, high)])
    ax.set(ylabel="scaled to the front's range", title="Pareto front (parallel coordinates)")
    return [figures.save(fig, "pareto-front", "The Pareto front in parallel coordinates, one line a point"), ""]


def describe_point(i: int, point: dict[str, Any], objectives: list[str]) -> str:
    """A front point's tooltip: its objectives, then its parameters."""
    values = ", ".join(f"{o} = {point['objectives'][o]:.6g}" for o in objectives
                       if point["objectives"][o] is not None)
    parameters = ", ".join(f"{n} = {v:.6g}" for n, v in point["parameters"].items())
    return f"Pareto point {i + 1}: {values}; {parameters}"


def draw_hypervolume(results: dict[str, Any], figures: Any) -> list[str]:
    volume = [finite_or_none(v) for v in results["hypervolume"]]
    if len(volume) < 2 or results["reference"] is None:
        return []
    fig, ax = figures.new()
    ax.plot(np.arange(1, len(volume) + 1), [np.nan if v is None else v for v in volume])
    reference = ", ".join(f"{k} = {v:.4g}" for k, v in results["reference"].items())
    ax.set(xlabel="generation", ylabel="hypervolume", title=f"Hypervolume (reference {reference})")
    return [figures.save(fig, "pareto-hypervolume", "Hypervolume of the front after each "
                                                    "generation"), ""]
