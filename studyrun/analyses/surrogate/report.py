"""The surrogate section of report.md: Q2 and the predicted-vs-observed plot, indices with their
intervals as bars, and Q2 against runs when runs were added; from analysis.json alone."""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from studyrun.analyses.salib.report import index_table
from studyrun.analyses.surrogate.fitting import TRUSTED_HALF_WIDTH, TRUSTED_Q2
from studyrun.results.report.figures import shown_rows
from studyrun.results.report.markdown import Markdown, escape, format_number, table


def surrogate_report(analysis: dict[str, Any], figures) -> str:
    results = analysis.get("results", {})
    parts = ["## Surrogate model", summary_table(results)]
    for quantity, block in results.items():
        if "q2" in block:
            parts.append(quantity_section(quantity, block, figures))
    return "\n\n".join(p for p in parts if p)


def summary_table(results: dict[str, Any]) -> str:
    rows = [[q, r.get("samples"), r.get("q2"), r.get("rmse"), r.get("mean"), r.get("std"),
             "yes" if r.get("trusted") else Markdown(f"**no** ({why_not(r)})")]
            for q, r in results.items() if "q2" in r]
    return table(["quantity", "training runs", "Q2 (cross-validated)", "RMSE", "mean", "std",
                  "indices trusted"], rows)


def quantity_section(quantity: str, block: dict[str, Any], figures) -> str:
    slug = re.sub(r"[^A-Za-z0-9_]+", "_", quantity)
    lines = [f"### {escape(quantity)}", "", describe_model(block), ""]
    if not block.get("trusted") and not (block.get("q2") or -1) >= TRUSTED_Q2:
        lines += [f"**The surrogate is not good enough to trust its indices**: its "
                  f"cross-validated Q2 is {format_number(block['q2'])}, below {TRUSTED_Q2}. "
                  "The indices below are shown for the record only.", ""]
    elif not block.get("trusted"):
        lines += [f"**The indices are not pinned down well enough to trust**: an interval is "
                  f"wider than ±{TRUSTED_HALF_WIDTH}. The indices below are shown for the record "
                  "only.", ""]
    for warning in block.get("warnings", []):
        lines += [f"- warning: {escape(warning)}"]
    names = [n for n, v in block.get("S1", {}).items() if v is not None]
    lines += [] if not names else ["", table(["parameter", "S1", "S1 ± conf", "ST", "ST ± conf"],
                        [[n, block["S1"][n], block["S1_conf"][n], block["ST"][n],
                          block["ST_conf"][n]] for n in names]), ""]
    if isinstance(block.get("shapley"), dict):  # correlated inputs
        from studyrun.analyses.shapley.report import KEYS, flat

        lines += ["", "Shapley effects and Kucherenko's indices of the surrogate, for the "
                  "correlated inputs:", "", index_table(flat(block), KEYS, "shapley"), ""]
    if not figures.draws(quantity):
        return "\n".join(lines)
    lines += [predicted_vs_observed(quantity, slug, block, figures), ""]
    lines += [index_bars(quantity, slug, block, names, figures), ""] if names else []
    if block.get("convergence") and len(block["convergence"]) > 1:
        lines += [convergence_plot(quantity, slug, block["convergence"], figures), ""]
    return "\n".join(lines)


def why_not(block: dict[str, Any]) -> str:
    """Why a quantity's indices are not trusted, in a few words."""
    if not (block.get("q2") or -1) >= TRUSTED_Q2:
        return f"Q2 below {TRUSTED_Q2}"
    return f"an interval wider than ±{TRUSTED_HALF_WIDTH}"


def describe_model(block: dict[str, Any]) -> str:
    validation = escape(block.get("validation", {}).get("method", ""))
    if "terms" in block:
        return (f"Polynomial chaos expansion of degree {escape(block['degree'])}: "
                f"{len(block['terms'])} terms kept of {escape(block['candidate_terms'])} "
                f"candidates; {escape(block['samples'])} training runs; Q2 by "
                f"{validation} cross-validation.")
    kernel = block.get("kernel", {})
    scales = ", ".join(f"{escape(n)} {format_number(v)}"
                       for n, v in kernel.get("length_scales", {}).items())
    return (f"Gaussian process (Matérn 5/2, length scales on the unit cube: {scales}; noise "
            f"variance {format_number(kernel.get('noise_variance'))} of the output's); "
            f"{escape(block['samples'])} training runs; Q2 by {validation} "
            "cross-validation.")


def predicted_vs_observed(quantity: str, slug: str, block: dict[str, Any], figures) -> str:
    observed = np.asarray(block["validation"]["observed"], dtype=float)
    predicted = np.asarray(block["validation"]["predicted"], dtype=float)
    shown = shown_rows(len(observed))
    fig, ax = figures.new(size=(4.5, 4.5))
    ax.scatter(observed[shown], predicted[shown], s=8, alpha=0.6, color="steelblue")
    low = float(np.nanmin([observed.min(), predicted.min()]))
    high = float(np.nanmax([observed.max(), predicted.max()]))
    ax.plot([low, high], [low, high], color="black", linewidth=0.8)
    ax.set(xlabel=f"{quantity} (model)", ylabel=f"{quantity} (surrogate, held out)",
           title=f"Q2 = {block['q2']:.4f}")
    return figures.save(fig, f"surrogate-fit-{slug}",
                        f"{quantity}: cross-validated predictions against the model's values")


def index_bars(quantity: str, slug: str, block: dict[str, Any], names: list[str], figures) -> str:
    fig, ax = figures.new(size=(max(4.0, 0.9 * len(names) + 2), 3.5))
    position = np.arange(len(names))
    for offset, key, color in ((-0.2, "S1", "steelblue"), (0.2, "ST", "darkorange")):
        values = [block[key][n] for n in names]
        errors = [block[f"{key}_conf"][n] for n in names]
        ax.bar(position + offset, values, width=0.4, yerr=errors, capsize=3, color=color, label=key)
    ax.set_xticks(position, names, rotation=30 if len(names) > 6 else 0)
    ax.set(ylabel="index", title=f"Sobol' indices of {quantity} from the surrogate")
    ax.legend()
    return figures.save(fig, f"surrogate-indices-{slug}",
                        f"{quantity}: first-order and total indices with their intervals")


def convergence_plot(quantity: str, slug: str, history: list[dict], figures) -> str:
    fig, ax = figures.new()
    ax.plot([h["samples"] for h in history], [h["q2"] for h in history], marker="o")
    ax.set(xlabel="training runs", ylabel="cross-validated Q2", title=f"{quantity}: Q2 by runs")
    return figures.save(fig, f"surrogate-convergence-{slug}", f"{quantity}: Q2 as runs were added")
