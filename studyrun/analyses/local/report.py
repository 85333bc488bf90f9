"""The `local` section of report.md (report step): summary tables and bars per output,
normalised sensitivity functions over time, collinearity, partitions and agreement. Reads
analysis.json only."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from studyrun.results.report.markdown import escape, table

if TYPE_CHECKING:
    from studyrun.results.report.figures import Figures

INTRO = ("Normalised sensitivity functions S = (p / y) dy/dp: the relative change of an output "
         "per relative change of a parameter, at every output time. L1 is the mean of |S|, L2 "
         "its root mean square; parameters are ranked by L1.")
EXTRA = ("ranking", "collinearity", "partition", "agreement", "quantities", "notes")
MAX_ROWS = 40


def write_report(analysis: dict[str, Any], figures: "Figures") -> str:
    results = analysis.get("results", {})
    outputs = [k for k in results if k not in EXTRA]
    design = analysis.get("design", {})
    parts = ["## Local sensitivity", INTRO,
             f"Method: **{escape(design.get('method', '?'))}**, relative step "
             f"{escape(design.get('delta', '?'))}; overall ranking (L1 summed over "
             f"outputs): {escape(', '.join(results.get('ranking', [])))}."]
    for output in outputs:
        parts.append(output_section(output, results[output], figures))
    if results.get("quantities"):
        parts.append(quantities_section(results["quantities"]))
    if "collinearity" in results:
        parts.append(collinearity_section(results["collinearity"]))
    if "partition" in results:
        parts.append(partition_section(results["partition"]))
    if results.get("agreement"):
        parts.append(agreement_section(results["agreement"]))
    if results.get("notes"):
        parts.append("### Notes\n\n" + "\n".join(f"- {escape(n)}" for n in results["notes"]))
    return "\n\n".join(p for p in parts if p) + "\n"


def output_section(name: str, entry: dict[str, Any], figures: "Figures") -> str:
    if "error" in entry:
        return f"### {escape(name)}\n\n{escape(entry['error'])}"
    names = list(entry["L1"])
    rows = [[p, entry["L1"][p], entry["L2"][p], entry["mean"][p], entry["min"][p],
             entry["max"][p]] for p in entry["ranking"]]
    parts = [f"### {escape(name)}",
             f"{escape(entry['points'])} output times used "
             f"({escape(entry['excluded_points'])} left out where the output is 0).",
             table(["parameter", "L1", "L2", "mean", "min", "max"], rows)]
    if figures.draws(name):
        parts.append(functions_figure(name, entry, names, figures))
    return "\n\n".join(p for p in parts if p)


def functions_figure(name: str, entry: dict[str, Any], names: list[str],
                     figures: "Figures") -> str:
    """S over time (left) and the L1 / L2 bars (right)."""
    import numpy as np

    functions = entry.get("functions", {})
    fig, axes = figures.new(1, 2, size=(11.0, 3.8))
    left, right = axes[0]
    time = np.asarray(functions.get("time", []), dtype=float)
    for p in names:
        values = np.array([np.nan if v is None else v
                           for v in functions.get("normalised", {}).get(p, [])], dtype=float)
        if values.size == time.size:
            left.plot(time, values, label=p)
    left.axhline(0.0, color="black", linewidth=0.5)
    left.set(xlabel="time", ylabel="(p / y) dy/dp", title=f"Sensitivity functions: {name}")
    left.legend(fontsize="small")
    positions = np.arange(len(names))
    for offset, key in ((-0.2, "L1"), (0.2, "L2")):
        right.bar(positions + offset, [entry[key][p] or 0.0 for p in names], width=0.4, label=key)
    right.set_xticks(positions, names, rotation=30, ha="right")
    right.set(title=f"Summaries: {name}")
    right.legend(fontsize="small")
    return figures.save(fig, f"local-{name}", f"Sensitivity functions and summaries: {name}")


def collinearity_section(entry: dict[str, Any]) -> str:
    subsets = sorted(entry["subsets"], key=lambda s: (-s["size"], inf_last(s["index"])))
    rows = [[", ".join(s["parameters"]), s["size"],
             "inf" if s["index"] is None else s["index"],
             "yes" if s["index"] is not None and s["index"] < entry["threshold"] else "no"]
            for s in subsets[:MAX_ROWS]]
    largest = "; ".join("{" + ", ".join(s) + "}" for s in entry["identifiable"]) or "none"
    text = ["### Collinearity (identifiability)",
            f"Collinearity index of parameter subsets (FME's collin); below {entry['threshold']:g} "
            f"a subset can be identified from these outputs. Largest identifiable subsets "
            f"(size {escape(entry['largest_identifiable_size'])}): {escape(largest)}.",
            table(["parameters", "size", "index", "identifiable"], rows)]
    if len(subsets) > MAX_ROWS:
        text.append(f"({len(subsets) - MAX_ROWS} more subsets in analysis.json.)")
    if entry.get("unresponsive"):
        text.append(f"The outputs do not respond to: {escape(', '.join(entry['unresponsive']))}.")
    return "\n\n".join(text)


def inf_last(value: float | None) -> float:
    return float("inf") if value is None else value


def partition_section(entry: dict[str, Any]) -> str:
    rows = [[label, entry[key]["points"], entry[key]["evaluations"], entry[key]["saved"],
             ", ".join(entry[key]["ranking"])]
            for key, label in (("full", "full trajectory"), ("uniform", "uniform refinement"),
                               ("clustering", "one-pass clustering"))]
    only = list(entry.get("initial_state_only", {}))
    initial = (f" Parameters that only set initial states ({escape(', '.join(only))}) have coefficients "
               f"of 0 here, as the right-hand side never reads them; the sensitivity functions' "
               f"L1 above measures their effect on the trajectory.") if only else ""
    return "\n\n".join([
        "### Sensitivity coefficients on fewer trajectory points",
        f"Coefficients of the right-hand side ({escape(entry['scale'])} scale) over points of "
        f"the nominal trajectory in ({escape(', '.join(entry['coordinates']))}).{initial}",
        table(["partition", "points", "evaluations of f", "saved", "ranking"], rows)])


def agreement_section(agreement: dict[str, Any]) -> str:
    rows = [[pair, entry["top"], entry["M"], entry["Tr"]] for pair, entry in agreement.items()]
    return "\n\n".join([
        "### Agreement between methods",
        "M: percentage of the top parameters common to both rankings; Tr: percentage of "
        "parameter pairs in the same order.",
        table(["methods", "top", "M (%)", "Tr (%)"], rows)])


def quantities_section(quantities: dict[str, Any]) -> str:
    names = list(next(iter(quantities.values()))["normalised"])
    rows = [[q, entry["value"], *(entry["normalised"][p] for p in names)]
            for q, entry in quantities.items()]
    return "\n\n".join(["### Quantities",
                         "Normalised derivatives (p / q) dq/dp of each quantity at the nominal "
                         "point, by differences.",
                         table(["quantity", "value", *names], rows)])
