"""The Shapley section of report.md (report step): per quantity a bar chart of the Shapley
effects with their intervals beside Kucherenko's S1 and ST, a table, and the input correlations.
Reads analysis.json only."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from studyrun.analyses.montecarlo import correlation_table
from studyrun.analyses.salib.report import (
    bar_chart,
    facts_line,
    figure_name,
    index_table,
    warnings_block,
)
from studyrun.results.report.markdown import escape, format_number
from studyrun.results.report.wide import top_note

if TYPE_CHECKING:
    from studyrun.results.report.figures import Figures

INTRO = ("A parameter's Shapley effect is its share of the output's variance; the effects sum "
         "to 1 whether or not the inputs are correlated. Kucherenko's S1 is the share the "
         "parameter explains alone, correlated partners included; his ST the share left once "
         "every other parameter is known. When two inputs are correlated, the variance they "
         "explain together is split between them: a high effect with a low ST means the "
         "parameter matters mostly through what it shares with its partners, so fixing it "
         "alone removes little. Intervals are bootstrap half-widths (knn: from splits of the rows "
         "into halves, with the nearest-neighbour bias added).")
KEYS = ("shapley", "shapley_conf", "S1", "S1_conf", "ST", "ST_conf")


def flat(entry: dict[str, Any]) -> dict[str, Any]:
    """The entry's effects and Kucherenko's indices side by side, as the tables and bars read them."""
    kucherenko = entry.get("kucherenko") or {}
    return {**{k: entry[k] for k in ("shapley", "shapley_conf") if isinstance(entry.get(k), dict)},
            **{k: v for k, v in kucherenko.items() if isinstance(v, dict)}}


def write_report(analysis: dict[str, Any], figures: "Figures") -> str:
    """Markdown for every quantity of a shapley analysis."""
    method = analysis.get("design", {}).get("method")
    parts = ["## Shapley effects and Kucherenko's indices", INTRO]
    if isinstance(method, str):
        parts.append(f"Method: {escape(method)}.")
    parts += correlation_table(analysis.get("design", {}))
    for name, entry in analysis.get("results", {}).items():
        parts.append(f"### {escape(name)}")
        both = flat(entry)
        lines = [facts_line(entry), top_note(both.get("shapley") or {}, "shapley")]
        if entry.get("variance") is not None:
            lines.append(f"Variance of {escape(name)}: {format_number(entry['variance'])}.")
        if entry.get("q2") is not None:
            lines.append(f"Surrogate's cross-validated Q2: {format_number(entry['q2'])}.")
        lines.append(index_table(both, KEYS, "shapley"))
        if "shapley" in both and figures.draws(name):
            lines.append(bar_chart(figures, figure_name("shapley", name), both,
                                   ("shapley", "S1", "ST"), f"Shapley effects and Kucherenko's "
                                   f"indices: {name}"))
        lines.append(warnings_block(entry))
        parts += [line for line in lines if line]
    return "\n\n".join(p for p in parts if p) + "\n"
