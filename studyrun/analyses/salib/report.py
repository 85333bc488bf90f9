"""Report pieces shared by the SALib-backed analyses (report step): index tables, bar charts
with confidence intervals, warnings. Computes nothing; reads analysis.json results only."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Sequence

from studyrun.results.report.markdown import escape, table
from studyrun.results.report.wide import shown, table_order, top_note

if TYPE_CHECKING:
    from studyrun.results.report.figures import Figures


def figure_name(*parts: str) -> str:
    """A file-system-safe figure name from its parts."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", "-".join(parts))


def nan(value: Any) -> float:
    """None (JSON for NaN) back to NaN, for plotting."""
    return float("nan") if value is None else float(value)


def index_table(entry: dict[str, Any], keys: Sequence[str], rank: str | None = None) -> str:
    """A table with one row per factor and one column per index key present in `entry`; for
    more factors than a figure shows, by decreasing `rank` (an index key)."""
    keys = [k for k in keys if isinstance(entry.get(k), dict)]
    if not keys:
        return ""
    ranks = entry.get(rank)
    factors = table_order(ranks) if isinstance(ranks, dict) else list(entry[keys[0]])
    rows = [[f, *(entry[k].get(f) for k in keys)] for f in factors]
    return table(["parameter", *keys], rows)


def rank_key(keys: Sequence[str]) -> str:
    """The index that ranks the factors of a wide study: ST (which bounds S1) when there is one."""
    return "ST" if "ST" in keys else keys[0]


def bar_chart(figures: "Figures", name: str, entry: dict[str, Any], keys: Sequence[str],
              title: str) -> str:
    """Grouped bars of the index keys with their `<key>_conf` intervals as error bars; for a
    wide study, of the factors of largest `rank_key`."""
    import numpy as np

    keys = [k for k in keys if isinstance(entry.get(k), dict)]
    if not keys:
        return ""
    factors = shown(entry[rank_key(keys)])
    fig, ax = figures.new(size=(max(4.0, 0.9 * len(factors) + 2.5), 3.6))
    width = 0.8 / len(keys)
    x = np.arange(len(factors))
    for i, key in enumerate(keys):
        values = [nan(entry[key][f]) for f in factors]
        conf = entry.get(f"{key}_conf")
        errors = [nan(conf[f]) for f in factors] if isinstance(conf, dict) else None
        bars = ax.bar(x + (i - (len(keys) - 1) / 2) * width, values, width, yerr=errors,
                      capsize=3, label=key)
        for j, (factor, bar) in enumerate(zip(factors, bars.patches)):
            interval = "" if errors is None else f" +- {errors[j]:.3g}"
            figures.tip(bar, f"{key} of {factor}: {values[j]:.4g}{interval}")
    ax.set_xticks(x, factors, rotation=30 if len(factors) > 6 else 0)
    ax.axhline(0.0, color="black", linewidth=0.6)
    ax.set_title(title)
    ax.legend()
    return figures.save(fig, name, title)


def warnings_block(entry: dict[str, Any]) -> str:
    """The quantity's warnings (and error) as a Markdown list."""
    lines = [f"- **error**: {escape(entry['error'])}"] if "error" in entry else []
    lines += [f"- {escape(w)}" for w in entry.get("warnings", [])]
    return "\n".join(lines)


def facts_line(entry: dict[str, Any]) -> str:
    """Effective sample size and dropped runs, when the entry has them."""
    parts = [f"{key.replace('_', ' ')}: {escape(entry[key])}" for key in
             ("effective_N", "dropped_blocks", "dropped_runs") if key in entry]
    return ", ".join(parts)


def generic_section(title: str, analysis: dict[str, Any], figures: "Figures",
                    keys: Sequence[str], bars: Sequence[str]) -> str:
    """The report of a method whose results are per-parameter maps (FAST, RBD-FAST, delta...)."""
    parts = [f"## {title}"]
    for quantity, entry in analysis.get("results", {}).items():
        parts.append(f"### {escape(quantity)}")
        rank = rank_key(bars)
        chart = (bar_chart(figures, figure_name(str(analysis.get("analysis", "salib")), quantity),
                           entry, bars, f"{title}: {quantity}")
                 if figures.draws(quantity) else "")
        for piece in (facts_line(entry), top_note(entry.get(rank) or {}, rank),
                      index_table(entry, keys, rank), chart, warnings_block(entry)):
            if piece:
                parts.append(piece)
    return "\n\n".join(parts) + "\n"
