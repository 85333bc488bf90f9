"""The doe section of report.md (report step): tables and figures from analysis.json; computes no fit.

Per quantity: fit summary, coefficient and ANOVA tables, dropped terms, stationary point, a
main-effects plot, an interaction plot and a contour of the fitted surface over the two most
influential factors (the others at their centers); then the Pareto front when one was asked for.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from studyrun.analyses.doe.interpret import rank_factors
from studyrun.analyses.doe.surface import parse_term
from studyrun.analyses.doe.terms import build_matrix
from studyrun.results.report.figures import shown_rows
from studyrun.results.report.markdown import code, escape, format_number, table


def blank(rows: list[list[Any]]) -> list[list[Any]]:
    """Rows with None shown as an empty cell."""
    return [["" if v is None else v for v in row] for row in rows]


def write_report(analysis: dict[str, Any], outcome: Any, figures: Any) -> str:
    """Markdown for the whole doe analysis."""
    results = analysis.get("results", {})
    parts = ["## Design of experiments and response surfaces", describe_design_block(analysis)]
    for quantity, fit in results.items():
        if quantity.startswith("_") or "coefficients" not in fit:
            continue
        parts.append(write_quantity(quantity, fit, outcome, figures))
    if "_pareto" in results:
        parts.append(write_pareto(results["_pareto"], outcome, figures))
    return "\n\n".join(p for p in parts if p)


def describe_design_block(analysis: dict[str, Any]) -> str:
    """The design in a few lines: type, runs, factors and, for fractions, the aliases."""
    design = analysis.get("design", {})
    lines = [f"Design: **{escape(design.get('type', '?'))}**, {escape(design.get('runs', '?'))} "
             f"runs; response model: {escape(design.get('response', '?'))}. Coefficients are in "
             "coded units x = (p - center) / half-range, so ±1 are the parameter bounds."]
    if design.get("augment"):
        lines.append(f"Grown by **{escape(design['augment'])}** from the "
                     f"{escape(design.get('grown_from'))} design of {code(design.get('from'))}: "
                     f"its {escape(design.get('earlier_runs'))} runs, then "
                     f"{escape(design.get('new_runs'))} new ones"
                     + (f" ({escape(design['strata'])})" if design.get("strata") else "") + ".")
    factors = design.get("factors", {})
    if factors:
        lines.append(table(["symbol", "parameter", "low (-1)", "high (+1)"],
                           [[f["symbol"], n, f["low"], f["high"]] for n, f in factors.items()]))
    if design.get("aliases"):
        lines.append(f"Resolution {escape(design.get('resolution'))}; defining relation "
                     f"{code(design.get('defining_relation'))} (factors a, b, c, ... in parameter "
                     "order). Aliases:\n\n" + "\n".join(f"- {code(chain)}"
                                                         for chain in design["aliases"]))
    return "\n\n".join(lines)


def write_quantity(quantity: str, fit: dict[str, Any], outcome: Any, figures: Any) -> str:
    """One quantity: summary, tables and its figures."""
    slug = re.sub(r"[^A-Za-z0-9_]+", "_", quantity)
    summary = (f"R² = {format_number(fit['r2'])}, adjusted R² = {format_number(fit['adj_r2'])}, "
               f"RMSE = {format_number(fit['rmse'])}, residual standard error = "
               f"{format_number(fit.get('sigma'))} on {escape(fit.get('df_resid'))} degrees "
               f"of freedom ({escape(fit.get('n_runs'))} runs).")
    parts = [f"### {escape(quantity)}", summary]
    parts += [f"> {escape(note)}" for note in fit.get("notes", [])]
    parts.append(table(["term", "estimate", "std error", "t", "p"],
                       blank([[t, c["estimate"], c["std_error"], c["t"], c["p"]]
                              for t, c in fit["coefficients"].items()])))
    if fit.get("dropped_terms"):
        aliases = fit.get("dropped_aliases", {})
        parts.append("Terms the design cannot estimate (dropped): " + ", ".join(
            code(t) + (f" (= {format_alias(aliases[t])})" if aliases.get(t) else "")
            for t in fit["dropped_terms"]))
    parts.append(describe_aliases(fit.get("aliases")))
    if "anova" in fit:
        parts.append("ANOVA (partial sums of squares):\n\n" + anova_table(fit))
    point = fit.get("stationary_point")
    if point and point.get("natural"):
        where = ", ".join(f"{escape(n)} = {format_number(v)}" for n, v in point["natural"].items())
        inside = "inside" if point.get("inside_region") else "outside"
        parts.append(f"Stationary point: a **{escape(point['kind'])}** at {where} ({inside} the "
                     f"bounds), predicted {format_number(point['predicted'])}; eigenvalues "
                     + ", ".join(format_number(v) for v in point["eigenvalues"]) + "."
                     + (f" {escape(point['note'])}" if point.get("note") else ""))
    if figures.draws(quantity):
        parts += [plot_main_effects(slug, quantity, fit, figures),
                  plot_interactions(slug, quantity, fit, figures),
                  plot_contour(slug, quantity, fit, outcome, figures)]
    return "\n\n".join(p for p in parts if p)


def describe_aliases(aliases: dict[str, dict] | None) -> str:
    """Which estimates also carry two-factor interactions left out of the model, and how much."""
    if not aliases:
        return ""
    chains = [f"{code(term)} + {format_alias(chain)}".replace("+ -", "-")
              for term, chain in aliases.items() if chain]
    if not chains:
        return "Every estimate is clear of the two-factor interactions left out of the model."
    return ("Aliases: what an estimate measures besides its term, in two-factor interactions left "
            "out of the model (a non-zero interaction biases it):\n\n"
            + "\n".join(f"- {chain}" for chain in chains))


def format_alias(combination: dict[str, float]) -> str:
    """`x4`, `-x4`, or `0.5 x1 + x2`: what a dropped term equals on this design (Markdown)."""
    pieces = []
    for term, coef in combination.items():
        sign = "-" if coef < 0 else "+"
        size = "" if abs(abs(coef) - 1) < 1e-9 else f"{format_number(abs(coef))} "
        pieces.append(f"{sign} {size}{escape(term)}")
    text = " ".join(pieces)
    return text[2:] if text.startswith("+ ") else text


def anova_table(fit: dict[str, Any]) -> str:
    """Per-term and per-order lines, model, residual split into lack of fit and pure error, total."""
    anova, rows = fit["anova"], []
    for term, row in anova["terms"].items():
        rows.append([term, row["df"], row["ss"], row["ms"], row["F"], row["p"]])
    for order, row in anova["orders"].items():
        rows.append([f"all {order}", row["df"], row["ss"], row["ms"], row["F"], row["p"]])
    if "model" in anova:
        m = anova["model"]
        rows.append(["model", m["df"], m["ss"], m["ms"], m["F"], m["p"]])
    r = anova["residual"]
    rows.append(["residual", r["df"], r["ss"], r["ms"], None, None])
    lof = fit.get("lack_of_fit") or {}
    if lof.get("df_pure_error"):
        rows.append(["  lack of fit", lof["df_lack_of_fit"], lof["ss_lack_of_fit"], None,
                     lof["F"], lof["p"]])
        rows.append(["  pure error", lof["df_pure_error"], lof["ss_pure_error"], None, None, None])
    rows.append(["total (corrected)", anova["total"]["df"], anova["total"]["ss"], None, None, None])
    text = table(["source", "df", "SS", "MS", "F", "p"], blank(rows))
    if lof.get("note"):
        text += f"\n\nLack of fit: {escape(lof['note'])}."
    return text


def factor_names(fit: dict[str, Any]) -> list[str]:
    """Parameter names in x-index order."""
    return list(fit.get("coding", {}))


def plot_main_effects(slug: str, quantity: str, fit: dict[str, Any], figures: Any) -> str:
    """Mean response per level of each factor (low/high sides when levels are not listed)."""
    effects = fit.get("main_effects") or {}
    if not effects:
        return ""
    names = list(effects)
    fig, axes = figures.new(1, len(names), size=(2.6 * len(names) + 1, 3.2))
    axes = np.atleast_1d(axes).ravel()
    for ax, name in zip(axes, names):
        entry = effects[name]
        if "levels" in entry:
            xs = [lv["coded"] for lv in entry["levels"]]
            ys = [lv["mean"] for lv in entry["levels"]]
        else:
            xs, ys = [-1, 1], [entry["low"], entry["high"]]
        line, = ax.plot(xs, ys, "-")
        for x, y in zip(xs, ys):
            point, = ax.plot([x], [y], "o", color=line.get_color())
            figures.tip(point, f"{name} at {x:g} (coded): mean {quantity} {y:.4g}")
        ax.set_xlabel(f"{name} (coded)")
    axes[0].set_ylabel(f"mean {quantity}")
    return figures.save(fig, f"doe_{slug}_main_effects", f"Main effects on {quantity}")


def plot_interactions(slug: str, quantity: str, fit: dict[str, Any], figures: Any) -> str:
    """Interaction plots for the (up to three) pairs with the largest interaction."""
    tables = [t for t in (fit.get("interactions") or {}).values() if t["interaction"] is not None]
    tables = sorted(tables, key=lambda t: -abs(t["interaction"]))[:3]
    if not tables:
        return ""
    fig, axes = figures.new(1, len(tables), size=(3.2 * len(tables) + 1, 3.2))
    axes = np.atleast_1d(axes).ravel()
    for ax, t in zip(axes, tables):
        means = np.array(t["means"], dtype=float)
        for column, side in enumerate(("low", "high")):
            line, = ax.plot([-1, 1], means[:, column], "-", label=f"{t['columns']} {side}")
            for x, row_side, y in zip((-1, 1), ("low", "high"), means[:, column]):
                point, = ax.plot([x], [y], "o", color=line.get_color())
                figures.tip(point, f"{t['rows']} {row_side}, {t['columns']} {side}: mean "
                                   f"{quantity} {y:.4g}")
        ax.set_xlabel(f"{t['rows']} (coded)")
        ax.legend(fontsize=7)
    axes[0].set_ylabel(f"mean {quantity}")
    return figures.save(fig, f"doe_{slug}_interactions", f"Interactions for {quantity}")


def plot_contour(slug: str, quantity: str, fit: dict[str, Any], outcome: Any, figures: Any) -> str:
    """The fitted surface over the two most influential factors, the others at their centers."""
    names = factor_names(fit)
    if len(names) < 2 or not fit.get("terms"):
        return ""
    first, second = sorted(rank_factors(fit, names)[:2], key=names.index)
    i, j = names.index(first), names.index(second)
    grid = np.linspace(-1, 1, 61)
    g1, g2 = np.meshgrid(grid, grid)
    points = np.zeros((g1.size, len(names)))
    points[:, i], points[:, j] = g1.ravel(), g2.ravel()
    terms = [parse_term(t, len(names)) for t in fit["terms"]]
    beta = np.array([fit["coefficients"][t]["estimate"] for t in fit["terms"]])
    surface = (build_matrix(points, terms) @ beta).reshape(g1.shape)
    ci, cj = (fit["coding"][n] for n in (first, second))
    fig, ax = figures.new(size=(5.5, 4.5))
    shown = ax.contourf(ci["center"] + ci["half_range"] * g1, cj["center"] + cj["half_range"] * g2,
                        surface, levels=20, cmap="viridis")
    fig.colorbar(shown, ax=ax, label=f"fitted {quantity}")
    if outcome is not None:
        ax.plot(outcome.design.matrix[:, i], outcome.design.matrix[:, j], "k.", ms=4, clip_on=False,
                label="runs")
    ax.set_xlabel(first)
    ax.set_ylabel(second)
    others = [n for n in names if n not in (first, second)]
    caption = f"Fitted {quantity} over {first} and {second}"
    if others:
        ax.set_title("others at their centers", fontsize=8)
    return figures.save(fig, f"doe_{slug}_contour", caption)


def write_pareto(front: dict[str, Any], outcome: Any, figures: Any) -> str:
    """The non-dominated runs as a table, and a scatter of the first two quantities."""
    senses = front["senses"]
    quantities = list(senses)
    params = list(front["parameters"])
    rows = [[run] + [front["values"][q][k] for q in quantities] + [front["parameters"][p][k] for p in params]
            for k, run in enumerate(front["runs"])]
    senses_text = ", ".join(f"{escape(q)} ({escape(s)})" for q, s in senses.items())
    parts = ["### Pareto front", f"Non-dominated runs for {senses_text}:",
             table(["run"] + quantities + params, rows)]
    if len(quantities) >= 2:
        a, b = quantities[:2]
        fig, ax = figures.new(size=(5, 4))
        if outcome is not None:
            shown = shown_rows(len(outcome.values[a]))  # all runs, or a fixed sample of 5000
            ax.plot(outcome.values[a][shown], outcome.values[b][shown], "o", color="0.7", ms=4,
                    label="runs")
        order = np.argsort(front["values"][a])
        ax.plot(np.array(front["values"][a])[order], np.array(front["values"][b])[order], "o-",
                color="C3", label="Pareto front")
        ax.set_xlabel(f"{a} ({senses[a]})")
        ax.set_ylabel(f"{b} ({senses[b]})")
        ax.legend(fontsize=8)
        parts.append(figures.save(fig, "doe_pareto", "Pareto front"))
    return "\n\n".join(parts)
