"""The reliability section of report.md: pf with its interval, beta, the convergence plot, the
design point and the importance factors as bars, and for two parameters the runs and the limit
state g = 0 in their plane. Computes nothing new."""

from __future__ import annotations

from typing import Any

import numpy as np

from studyrun.analyses.reliability.space import PLANE_DRAWN
from studyrun.results.report.markdown import escape, table


def section(analysis: dict[str, Any], figures) -> str:
    r = analysis["results"]
    if not isinstance(r, dict):
        return ""
    lines = ["## Reliability", "", f"Method: {escape(r.get('method'))}; runs: "
             f"{escape(r.get('runs'))}; converged: {escape(r.get('converged'))}.", ""]
    lines += _gradient(r.get("gradient"))
    if r.get("pf") is None and r.get("pf_below") is not None:
        bound = _number(r["pf_below"])
        lines += [f"pf is below {escape(bound)} (one-sided 95% upper bound); beta is above "
                  f"{escape(_number(r.get('beta_above')))}.", ""]
    ci = r.get("ci") if isinstance(r.get("ci"), list) and len(r["ci"]) == 2 else [None, None]
    lines += [table(["pf", "95% interval", "beta", "cov"],
                    [[r.get("pf"), "-" if ci[0] is None else f"{_number(ci[0])} to {_number(ci[1])}",
                      r.get("beta"),
                      r.get("cov")]]), ""]
    check = r.get("check")
    if isinstance(check, dict) and isinstance(check.get("ci"), list) and len(check["ci"]) == 2:
        lines += [f"Checked by {escape(check.get('runs'))} importance-sampling runs around the "
                  f"design points: pf {escape(_number(check.get('pf')))} (95% interval "
                  f"{escape(_number(check['ci'][0]))} to {escape(_number(check['ci'][1]))}).", ""]
    surrogate = r.get("surrogate")
    if isinstance(surrogate, dict):
        lines += [f"The Gaussian process classed {escape(surrogate.get('population'))} Monte "
                  f"Carlo points; the least sure has U = {escape(_number(surrogate.get('min_u')))}"
                  f", and about {escape(_number(surrogate.get('misclassified')))} of them are "
                  "expected to be classed wrong (the sum of Phi(-U)).", ""]
    if r.get("error"):
        lines += [f"- **error**: {escape(r['error'])}", ""]
    lines += [f"- {escape(w)}" for w in r.get("warnings", []) if isinstance(w, str)]
    lines += [f"- {escape(n)}" for n in r.get("notes", []) if isinstance(n, str)]
    lines.append("")
    sorm = r.get("sorm")
    if isinstance(sorm, dict):
        lines += ["### SORM", "", table(["FORM pf", "Breitung", "Hohenbichler-Rackwitz"],
                                        [[sorm.get("form_pf"), sorm.get("breitung"),
                                          sorm.get("hohenbichler_rackwitz")]]), "",
                  f"Curvatures: {escape(', '.join(_number(k) for k in sorm.get('curvatures', [])))}",
                  ""]
    point = r.get("design_point")
    importance = r.get("importance")
    if isinstance(point, dict) and isinstance(importance, dict):
        physical, standard = point.get("physical", {}), point.get("standard", {})
        lines += ["### Design point", "", table(
            ["parameter", "value", "standard normal", "importance (alpha^2)"],
            [[name, physical.get(name), standard.get(name), importance.get(name)]
             for name in importance]), ""]
        lines += _bars(importance, figures)
    lines += _plane(r.get("plane"), point, figures)
    lines += _convergence(r.get("convergence"), figures)
    return "\n".join(lines)


def _gradient(used: Any) -> list[str]:
    """How FORM had its gradients, in words."""
    if not isinstance(used, dict) or used.get("method") is None:
        return []
    if used["method"] == "differences":
        return ["Gradients: forward differences of runs.", ""]
    return [f"Gradients: the model's {escape(used['method'])}, computed in-process "
            f"({escape(used.get('gradients'))} gradients, {escape(used.get('integrations'))} "
            f"integrations, {escape(used.get('fallbacks'))} replaced by differences).", ""]


def _number(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, (int, float)) else "-"


def _bars(importance: dict[str, Any], figures) -> list[str]:
    values = {k: v for k, v in importance.items() if isinstance(v, (int, float))}
    if not values:
        return []
    shown = sorted(values, key=lambda k: -values[k])[:20]
    fig, ax = figures.new(size=(6.0, 0.3 * len(shown) + 1.5))
    ax.barh(range(len(shown)), [values[k] for k in shown], color="steelblue")
    ax.set_yticks(range(len(shown)), [str(k) for k in shown])
    ax.invert_yaxis()
    ax.set(xlabel="importance (alpha^2)", title="Importance at the design point")
    return [figures.save(fig, "reliability-importance", "Importance factors (FORM's alpha^2)"),
            ""]


def _convergence(rounds: Any, figures) -> list[str]:
    points = [(p["runs"], p["pf"]) for p in rounds or [] if isinstance(p, dict)
              and isinstance(p.get("runs"), (int, float)) and isinstance(p.get("pf"), (int, float))
              and p["pf"] > 0]
    if len(points) < 2:
        return []
    fig, ax = figures.new()
    ax.plot([p[0] for p in points], [p[1] for p in points], marker="o")
    ax.set(xlabel="runs", ylabel="pf", yscale="log", title="pf as the runs grow")
    return [figures.save(fig, "reliability-convergence", "pf after each round, level or step"),
            ""]


def _plane(plane: Any, point: Any, figures) -> list[str]:
    """The runs in the plane of two parameters, failed and safe apart, the limit state g = 0
    (the zero contour of g over the runs' triangulation) and the design point."""
    if not isinstance(plane, dict) or not isinstance(plane.get("parameters"), list):
        return []
    points = plane.get("points") if isinstance(plane.get("points"), list) else []
    rows = [p for p in points[:PLANE_DRAWN] if isinstance(p, list) and len(p) == 3
            and all(isinstance(v, (int, float)) and np.isfinite(v) for v in p)]
    names = [str(n) for n in plane["parameters"][:2]]
    if len(rows) < 3 or len(names) != 2:
        return []
    x, y, g = (np.array(c, dtype=float) for c in zip(*rows))
    fig, ax = figures.new(size=(6.0, 5.0))
    failed = g < 0
    ax.scatter(x[~failed], y[~failed], s=6, color="steelblue", label="safe runs")
    ax.scatter(x[failed], y[failed], s=6, color="firebrick", label="failed runs")
    if failed.any() and (~failed).any() and len(rows) >= 10:
        try:
            ax.tricontour(x, y, g, levels=[0.0], colors="black", linewidths=1.2)
            ax.plot([], [], color="black", label="g = 0 (from the runs)")
        except (ValueError, RuntimeError):  # points on a line: no triangulation
            pass
    physical = point.get("physical", {}) if isinstance(point, dict) else {}
    at = [physical.get(n) for n in names]
    if all(isinstance(v, (int, float)) for v in at):
        ax.scatter([at[0]], [at[1]], marker="*", s=180, color="gold", edgecolor="black",
                   zorder=5, label="design point")
    ax.set(xlabel=names[0], ylabel=names[1], title="The runs and the limit state")
    ax.legend(fontsize=8, loc="best")
    return [figures.save(fig, "reliability-plane", "The runs (failed red, safe blue), the limit "
                                                   "state g = 0 and the design point"), ""]
