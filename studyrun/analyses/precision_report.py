"""Report pieces for sample sizes chosen by precision: where the rounds stopped and why, and the
interval widths against N with the target line. Reads analysis.json results only."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from studyrun.analyses.salib.report import figure_name, nan
from studyrun.results.report.markdown import escape

if TYPE_CHECKING:
    from studyrun.results.report.figures import Figures


def reached_line(entry: dict[str, Any], unit: str) -> str:
    """`N reached: 4096 base samples; target ci 0.02 met` (empty for a fixed N)."""
    if "samples_reached" not in entry:
        return ""
    target = entry["target"]
    wanted = (", ".join(f"{escape(k)} {v:g}" for k, v in target.items())
              if isinstance(target, dict)
              else f"a {escape(target)} ranking by mu_star over two doublings")
    met = "met" if entry["target_met"] else "**not met** (the most allowed was reached)"
    return f"Reached {escape(entry['samples_reached'])} {unit}; target {wanted}: {met}."


def widths_plot(name: str, method: str, sizes: list[int], widths: dict[str, list[Any]],
                target: float | None, figures: "Figures", ylabel: str) -> str:
    """Interval half-widths (one line each) against N on log-log axes, the target dashed."""
    if len(sizes) < 2:
        return ""
    fig, ax = figures.new(size=(6.0, 3.6))
    for label, values in widths.items():
        ax.plot(sizes, [nan(v) for v in values], marker="o", label=label)
    if target is not None:
        ax.axhline(target, color="black", linestyle="--", linewidth=0.8, label="target")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xticks(sizes, [str(int(n)) for n in sizes])
    ax.minorticks_off()
    ax.set_xlabel("N")
    ax.set_ylabel(ylabel)
    ax.set_title(f"Interval widths: {name}")
    ax.legend(fontsize="small", ncol=2)
    return figures.save(fig, figure_name(method, name, "widths"), f"Interval widths: {name}")
