"""The Sobol' section of report.md (report step): index tables, bars with intervals,
convergence plots and stacked areas of time-resolved indices. Reads analysis.json only."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from studyrun.analyses.precision_report import reached_line, widths_plot
from studyrun.analyses.salib.report import (
    bar_chart,
    facts_line,
    figure_name,
    index_table,
    nan,
    warnings_block,
)
from studyrun.results.report.markdown import escape, format_number, table
from studyrun.results.report.wide import shown, top_note

if TYPE_CHECKING:
    from studyrun.results.report.figures import Figures

INTRO = ("First-order indices S1 give the share of the output variance due to each parameter "
         "alone; total indices ST add every interaction it takes part in. Intervals are "
         "bootstrap half-widths.")


def write_report(analysis: dict[str, Any], figures: "Figures") -> str:
    """Markdown for every quantity (and time-resolved series) of a Sobol' analysis."""
    parts = ["## Sobol' sensitivity indices", INTRO]
    for name, entry in analysis.get("results", {}).items():
        parts.append(f"### {escape(name)}")
        if "time" in entry:
            parts.append(time_resolved_section(name, entry, figures))
            continue
        parts.append(quantity_section(name, entry, figures))
        if "time_resolved" in entry:
            parts.append(time_resolved_section(name, entry["time_resolved"], figures))
    return "\n\n".join(p for p in parts if p) + "\n"


def quantity_section(name: str, entry: dict[str, Any], figures: "Figures") -> str:
    """Table, bar chart, second-order table and convergence plot for one quantity."""
    drawn = shown(entry.get("ST") or {})  # every factor, or the largest ST of a wide study
    draws = figures.draws(name)
    parts = [reached_line(entry, "base samples"), facts_line(entry),
             top_note(entry.get("ST") or {}, "ST"),
             index_table(entry, ("S1", "S1_conf", "ST", "ST_conf"), "ST"), outside_unit(entry)]
    if "S1" in entry and draws:
        parts.append(bar_chart(figures, figure_name("sobol", name), entry, ("S1", "ST"),
                               f"Sobol' indices: {name}"))
    if isinstance(entry.get("S2"), dict):
        rows = [[a, b, value, entry["S2_conf"][a][b]]
                for a, row in entry["S2"].items() for b, value in row.items()]
        parts.append(table(["parameter", "with", "S2", "S2_conf"], rows))
    if "convergence" in entry and draws:
        parts.append(convergence_plot(name, entry["convergence"], figures, drawn))
    if "S1_conf" in entry.get("convergence", {}) and draws:
        table_ = entry["convergence"]
        widths = {f"{key} {f}": table_[key][f] for key in ("S1_conf", "ST_conf") for f in drawn}
        parts.append(widths_plot(name, "sobol", table_["N"], widths,
                                 entry.get("target", {}).get("ci"), figures,
                                 "95% half-width"))
    parts.append(warnings_block(entry))
    return "\n\n".join(p for p in parts if p)


def outside_unit(entry: dict[str, Any]) -> str:
    """One sentence per index estimated below 0 or above 1: reported as computed, explained."""
    lines = []
    for key in ("S1", "ST"):
        for factor, value in entry.get(key, {}).items():
            conf = entry.get(f"{key}_conf", {}).get(factor)
            if value is None or 0.0 <= value <= 1.0:
                continue
            bound = 0.0 if value < 0 else 1.0
            covered = conf is not None and abs(value - bound) <= conf
            why = (f"its interval (± {format_number(conf)}) covers {bound:g}, so this is "
                   "sampling noise around a true value at the bound" if covered else
                   "beyond its interval: the estimates have not converged; increase samples")
            lines.append(f"- {key} of {escape(factor)} is {format_number(value)}, "
                         f"{'below 0' if value < 0 else 'above 1'}: a true index lies in "
                         f"[0, 1], but its estimate is a difference of sample averages and is "
                         f"reported as computed; {why}.")
    return "\n".join(lines)


def convergence_plot(name: str, convergence: dict[str, Any], figures: "Figures",
                     factors: list[str]) -> str:
    """S1 (dashed) and ST (solid) of the given factors against the number of base samples."""
    sizes = convergence["N"]
    if len(sizes) < 2:
        return ""
    fig, ax = figures.new(size=(6.0, 3.6))
    for factor in factors:
        values = convergence["ST"][factor]
        line, = ax.plot(sizes, [nan(v) for v in values], marker="o", label=f"ST {factor}")
        ax.plot(sizes, [nan(v) for v in convergence["S1"][factor]], marker="s",
                linestyle="--", color=line.get_color(), label=f"S1 {factor}")
    ax.set_xscale("log", base=2)
    # Ticks at the sizes used, as plain numbers: exact, and without the mathtext parser that
    # 2^k labels would load (~40 ms on the first figure that needs it).
    ax.set_xticks(sizes, [str(int(n)) for n in sizes])
    ax.minorticks_off()
    ax.set_xlabel("base samples N")
    ax.set_ylabel("index")
    ax.set_title(f"Convergence: {name}")
    ax.legend(fontsize="small", ncol=2)
    return figures.save(fig, figure_name("sobol", name, "convergence"), f"Convergence: {name}")


def time_resolved_section(name: str, entry: dict[str, Any], figures: "Figures") -> str:
    """Stacked areas of S1 over time (the rest is interactions), and ST as lines."""
    import numpy as np

    if "error" in entry:
        return warnings_block(entry)
    if not figures.draws(name):
        return "\n\n".join(p for p in (facts_line(entry), warnings_block(entry)) if p)
    time = np.asarray(entry["time"], dtype=float)
    factors = list(entry["S1"])
    s1 = np.array([[nan(v) for v in entry["S1"][f]] for f in factors]).reshape(len(factors), -1)
    defined = np.isfinite(s1).all(axis=0)  # times without output variance are left out
    time, s1 = time[defined], np.clip(s1[:, defined], 0.0, 1.0)
    fig, axes = figures.new(1, 2, size=(10.0, 3.8))
    left, right = axes[0]
    left.stackplot(time, s1, labels=factors)
    left.plot(time, np.clip(s1.sum(axis=0), 0, 1), color="black", linewidth=0.6)
    left.set_ylim(0.0, 1.0)
    left.set_title(f"S1 over time: {name}")
    left.set_xlabel("time")
    for f in factors:
        right.plot(time, np.asarray([nan(v) for v in entry["ST"][f]])[defined], label=f)
    right.set_title(f"ST over time: {name}")
    right.set_xlabel("time")
    right.legend(fontsize="small")  # the stacked areas use the same colours
    link = figures.save(fig, figure_name("sobol", name, "time"), f"Indices over time: {name}")
    return "\n\n".join(p for p in (facts_line(entry), link, warnings_block(entry)) if p)
