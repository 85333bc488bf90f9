"""The calibration's report section (report step): tables, the `fitted:` block, residuals.csv and
figures of the data against the model before and after, residuals, correlations, optimiser
progress, MCMC traces, pairs and prediction bands. Computes nothing the results do not hold."""

from __future__ import annotations

import csv
from typing import Any

import numpy as np

from studyrun.analyses.calibrate.sequential_report import section_start, write_fitted
from studyrun.results.outputs import replacing
from studyrun.results.report.figures import shown_rows
from studyrun.results.report.markdown import escape, fence, format_number, table

RESIDUAL_COLUMNS = ["name", "x", "obs", "mod", "weight", "res_unweighted", "res"]


def report(spec, analysis: dict[str, Any], figures) -> str:
    results = analysis["results"]
    write_residuals(figures.folder.parent / "residuals.csv", results.get("residuals", []))
    if results.get("fitted_series"):
        write_fitted(figures.folder.parent / "fitted.csv", results["fitted_series"])
    if results.get("mcmc"):
        write_samples(figures.folder.parent / "mcmc-samples.csv", results["mcmc"])
    params = results["parameters"]
    lines = [f"## Calibration ({escape(results.get('method', spec.method))})", "",
             f"{'Converged' if results['converged'] else 'Did not converge'}: "
             f"{escape(str(results['message']).rstrip('.'))}. "
             f"Cost {format_number(results['cost']['initial'], 6)} at the start, "
             f"{format_number(results['cost']['final'], 6)} at the estimate; "
             f"minlogp {format_number(results['minlogp'], 6)}; "
             f"{escape(results['evaluations']['runs'])} model runs in "
             f"{escape(results['evaluations']['batches'])} batches.", "",
             table(["parameter", "initial", "estimate", "std error", "t", "p", "95% lower",
                    "95% upper"],
                   [[n, r["initial"], r["estimate"], r["std_error"], r["t"], r["p"], r["lower"],
                     r["upper"]] for n, r in params.items()]), "",
             "### Variables", "",
             table(["variable", "N", "SSR", "SSR unweighted", "scale", "rms before", "rms after"],
                   [[k, v["N"], v["SSR"], v["SSR_unweighted"], v["scale"], v["rms_before"],
                     v["rms_after"]] for k, v in results["variables"].items()]), "",
             "### Correlation of the estimates", "",
             table(["", *params], [[a, *(results["correlation"][a].get(b) for b in params)]
                                   for a in params]), ""]
    lines += [f"- {escape(note)}" for note in results.get("notes", [])] + [""]
    lines += ["### Fitted values", "", "Paste into the study to start from the fit:", "",
              fence(str(results["fitted_yaml"]).rstrip(), "yaml"), ""]
    lines += section_start(results)
    lines += section_gradient(results) + section_starts(results) + section_mcmc(results)
    lines += draw_curves(results, figures) + draw_residuals(results, figures)
    lines += draw_progress(results, figures) + draw_mcmc(results, figures)
    lines += ["The residuals at the estimate are in residuals.csv"
              + (", the fitted run's series in fitted.csv" if results.get("fitted_series") else "")
              + (", the chains in mcmc-samples.csv." if results.get("mcmc") else "."), ""]
    return "\n".join(lines)


def write_residuals(path, rows: list[dict]) -> None:
    with replacing(path) as temporary, open(temporary, "w", newline="") as handle:
        writer = csv.DictWriter(handle, RESIDUAL_COLUMNS)
        writer.writeheader()
        writer.writerows(rows)


def write_samples(path, mc: dict) -> None:
    """The chains (every `thin`-th iteration) as a table: chain, iteration, burnin, parameters."""
    names = list(mc["trace"])
    thin = mc.get("thin", 1)
    with replacing(path) as temporary, open(temporary, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["chain", "iteration", "burnin", *names])
        for c in range(mc["chains"]):
            for k, values in enumerate(zip(*(mc["trace"][n][c] for n in names))):
                writer.writerow([c, k * thin, k * thin < mc["burnin"], *values])


def section_gradient(results: dict) -> list[str]:
    gm = results.get("gradient_matching")
    if not gm:
        return []
    lines = ["### Gradient matching", "",
             f"Matched the model's right-hand side to the slopes of smoothed data at "
             f"{escape(gm['collocation_points'])} points in "
             f"{escape(gm['outer_iterations'])} outer iteration(s); "
             f"{escape(gm['integrations'])} model integrations for the matching"
             + (f", {escape(gm['refine_integrations'])} for the trajectory fit that "
                "refined it"
                if gm.get("refine_integrations") is not None else "") + ".", "",
             *initial_state_notes(gm),
             table(["parameter", "gradient matching", "final"],
                   [[n, gm["estimate"][n], results["parameters"][n]["estimate"]]
                    for n in gm["estimate"]]), ""]
    return lines


def initial_state_notes(gm: dict) -> list[str]:
    """Why a parameter that only sets initial states was not matched, as bullets."""
    notes = [f"- {escape(name)} only sets the initial value of {escape(', '.join(states))}: "
             "the right-hand side "
             f"never reads it, so it was taken from the smoothed data at the model's start."
             for name, states in gm.get("from_data_at_start", {}).items()]
    return notes + [""] if notes else []


def section_starts(results: dict) -> list[str]:
    starts = results.get("starts")
    if not starts:
        return []
    names = list(starts[0]["start"])
    return ["### Starts", "", table(["start", *[f"{n} (start)" for n in names],
                                     *names, "cost", "converged"],
                                    [[("best " if s["best"] else "") + str(i),
                                      *s["start"].values(), *s["estimate"].values(), s["cost"],
                                      s["converged"]] for i, s in enumerate(starts)]), ""]


def section_mcmc(results: dict) -> list[str]:
    mc = results.get("mcmc")
    if not mc:
        return []
    return ["### Posterior (MCMC)", "",
            f"{escape(mc['chains'])} chains of {escape(mc['iterations'])} iterations "
            f"({escape(mc['burnin'])} burn-in), acceptance rate "
            f"{mc['acceptance_rate']:.3f}; error variance {escape(mc['error_variance'])}.",
            "", table(["parameter", "mean", "sd", "2.5%", "median", "97.5%", "R-hat"],
                      [[n, s["mean"], s["sd"], s["lower"], s["median"], s["upper"], s.get("rhat")]
                       for n, s in mc["intervals"].items()]), ""]


def draw_curves(results: dict, figures) -> list[str]:
    curves, residuals = results.get("curves", {}), results.get("residuals", [])
    curves = {output: c for output, c in curves.items() if figures.draws(output)}
    if not curves:
        return []
    band = (results.get("mcmc") or {}).get("prediction", {})
    fig, axes = figures.new(1, len(curves), size=(5 * len(curves), 3.6))
    for ax, (output, c) in zip(np.ravel(axes), curves.items()):
        ax.plot(c["time"], c["initial"], color="grey", ls="--", label="initial")
        ax.plot(c["time"], c["final"], color="C0", label="fitted")
        if output in band:
            b = band[output]
            ax.fill_between(b["time"], b["lower"], b["upper"], color="C0", alpha=0.2,
                            label="95% posterior band")
        for name in dict.fromkeys(r["name"] for r in residuals):
            rows = [r for r in residuals if r["name"] == name and _output_of(name, results) == output]
            if rows:
                ax.plot([r["x"] for r in rows], [r["obs"] for r in rows], "o", ms=3, color="C3",
                        label=f"observed {name}")
        ax.set(xlabel="time", ylabel=output, title=output)
        ax.legend(fontsize="small")
    return [figures.save(fig, "calibration-fit", "Observations and the model before and after "
                                                 "the fit"), ""]


def _output_of(name: str, results: dict) -> str:
    return results.get("outputs", {}).get(name, name.split("[")[0])


def draw_residuals(results: dict, figures) -> list[str]:
    residuals = results.get("residuals", [])
    if not residuals:
        return []
    fig, ax = figures.new()
    for name in dict.fromkeys(r["name"] for r in residuals):
        rows = [r for r in residuals if r["name"] == name]
        ax.plot([r["x"] for r in rows], [r["res"] for r in rows], "o", ms=3, label=name)
    ax.axhline(0, color="grey", lw=0.8)
    ax.set(xlabel="x", ylabel="weighted residual (mod - obs) / err", title="Residuals at the estimate")
    ax.legend(fontsize="small")
    return [figures.save(fig, "calibration-residuals", "Weighted residuals over x"), ""]


def draw_progress(results: dict, figures) -> list[str]:
    progress = [p for p in results.get("progress", []) if p is not None]
    if len(progress) < 2:
        return []
    fig, ax = figures.new()
    ax.semilogy(np.arange(1, len(progress) + 1), np.maximum(progress, 1e-300))
    ax.set(xlabel="batch of model runs", ylabel="best cost so far", title="Optimiser progress")
    return [figures.save(fig, "calibration-progress", "Best cost after each batch"), ""]


def draw_mcmc(results: dict, figures) -> list[str]:
    mc = results.get("mcmc")
    if not mc or not mc.get("trace"):
        return []
    trace = mc["trace"]
    names = list(trace)
    fig, axes = figures.new(len(names), 1, size=(7, 2.2 * len(names)))
    for ax, name in zip(np.ravel(axes), names):
        for chain in trace[name]:
            ax.plot(chain, lw=0.6)
        ax.axvline(mc["burnin"] / mc.get("thin", 1), color="grey", ls=":")
        ax.set(ylabel=name)
    np.ravel(axes)[-1].set_xlabel(f"iteration / {mc.get('thin', 1)}")
    lines = [figures.save(fig, "mcmc-trace", "MCMC traces (dotted: end of burn-in)"), ""]
    if len(names) > 1:
        pairs = {n: np.concatenate([c[int(mc["burnin"] / mc.get("thin", 1)):] for c in trace[n]])
                 for n in names}
        shown = shown_rows(len(pairs[names[0]]))  # every draw, or a fixed sample of 5000
        fig, axes = figures.new(len(names), len(names), size=(2.6 * len(names), 2.6 * len(names)))
        for i, a in enumerate(names):
            for j, b in enumerate(names):
                ax = axes[i][j]
                if i == j:
                    ax.hist(pairs[a], bins=30, color="steelblue", histtype="stepfilled")
                else:
                    ax.plot(pairs[b][shown], pairs[a][shown], ".", ms=1.5, alpha=0.4)
                ax.set(xlabel=b if i == len(names) - 1 else "", ylabel=a if j == 0 else "")
        lines += [figures.save(fig, "mcmc-pairs", "Posterior pairs"), ""]
    return lines
