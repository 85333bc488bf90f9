"""The `gradient` section of report.md: J, the gradient table in ranking order, a bar chart of
the normalised gradient and what it cost. Reads analysis.json only."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from studyrun.results.report.markdown import escape, format_number, table

if TYPE_CHECKING:
    from studyrun.results.report.figures import Figures


def write_report(analysis: dict[str, Any], figures: "Figures") -> str:
    results = analysis.get("results", {})
    nominal = analysis.get("design", {}).get("nominal", {})
    parts = [f"## Gradient of J = {escape(results.get('objective', '?'))}"]
    if "error" in results:
        parts.append(escape(results["error"]))
    else:
        parts += [f"J = {format_number(results['value'], 6)} at the nominal point; method "
                  f"**{escape(results['method'])}** ({describe_cost(results['cost'])}). p / J dJ/dp is "
                  "the relative change of J per relative change of a parameter.",
                  table(["parameter", "nominal", "dJ/dp", "p / J dJ/dp"],
                        [[p, nominal.get(p), results["gradient"][p], results["normalised"][p]]
                         for p in results["ranking"]], digits=6),
                  bars(results, figures)]
    if results.get("notes"):
        parts.append("### Notes\n\n" + "\n".join(f"- {escape(n)}" for n in results["notes"]))
    return "\n\n".join(p for p in parts if p) + "\n"


def describe_cost(cost: dict[str, Any]) -> str:
    words = [f"{escape(cost['runs'])} model run{'s' if cost['runs'] != 1 else ''}",
             f"{escape(cost['integrations'])} integration"
             f"{'s' if cost['integrations'] != 1 else ''}"]
    if cost.get("backward_steps"):
        words.append(f"{escape(cost['backward_steps'])} backward steps")
    if cost.get("forward_seconds") is not None:
        words.append(f"forward pass {cost['forward_seconds']:.3g} s, backward pass "
                     f"{cost['backward_seconds']:.3g} s")
    return ", ".join(words)


def bars(results: dict[str, Any], figures: "Figures") -> str:
    """The normalised gradient as horizontal bars, largest at the top."""
    shown = [p for p in results["ranking"] if results["normalised"][p] is not None][:40]
    if not shown:
        return ""
    fig, ax = figures.new(size=(6.0, 1.0 + 0.3 * len(shown)))
    ax.barh(range(len(shown))[::-1], [results["normalised"][p] for p in shown])
    ax.set_yticks(range(len(shown))[::-1], shown)
    ax.axvline(0, color="black", linewidth=0.8)
    ax.set(xlabel="p / J dJ/dp", title=f"Normalised gradient of {results['objective']}")
    return figures.save(fig, "gradient", "Normalised gradient, largest magnitude at the top")
