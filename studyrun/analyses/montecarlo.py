"""Monte Carlo uncertainty propagation: moments, percentiles and rank correlations (as Dakota's
sampling method reports them)."""

from __future__ import annotations

from typing import Any, Literal

import numpy as np
from pydantic import Field, PositiveInt

from ..params import map_unit, sample_unit
from ..report.markdown import table
from .base import AnalysisSpec, Design, Outcome


class Montecarlo(AnalysisSpec):
    """Draw `samples` parameter sets and summarise each quantity's distribution."""

    type: Literal["montecarlo"]
    samples: PositiveInt = Field(1000, description="number of runs")
    sampling: Literal["random", "lhs", "sobol"] = "random"
    percentiles: list[float] = Field(default_factory=lambda: [5.0, 50.0, 95.0])

    def design(self, parameters, seed) -> Design:
        names = list(parameters)
        if not names:
            return Design(names, np.zeros((self.samples, 0)))
        u = sample_unit(self.samples, len(names), self.sampling, seed)
        return Design(names, map_unit(parameters, u), {"sampling": self.sampling})

    def analyse(self, outcome: Outcome, parameters) -> dict[str, Any]:
        results = {}
        for name, values in outcome.values.items():
            keep = outcome.ok & np.isfinite(values)
            results[name] = summarise(values[keep], outcome.design.matrix[keep],
                                      outcome.design.names, self.percentiles)
        return results

    def report(self, analysis, outcome, figures) -> str:
        results = analysis["results"]
        rows = [[q, r["n"], r["mean"], r["std"], r["min"], r["max"],
                 *(r["percentiles"].get(label(p)) for p in self.percentiles)]
                for q, r in results.items()]
        lines = ["## Monte Carlo", "", table(["quantity", "runs", "mean", "std", "min", "max",
                                              *(f"p{label(p)}" for p in self.percentiles)], rows), ""]
        names = outcome.design.names if outcome else []
        if names:
            lines += ["### Rank correlations (Spearman)", "",
                      table(["quantity", *names],
                            [[q, *(r["correlations"].get(p) for p in names)] for q, r in results.items()]), ""]
        if outcome is not None:
            lines += draw_distributions(outcome, figures)
        return "\n".join(lines)


def label(p: float) -> str:
    """A percentile's key: '5' for 5.0, '2.5' for 2.5."""
    return f"{p:g}"


def summarise(values: np.ndarray, inputs: np.ndarray, names: list[str], percentiles) -> dict[str, Any]:
    """Moments, extremes, percentiles and Spearman correlations of one quantity."""
    if not len(values):
        return {"n": 0, "mean": None, "std": None, "min": None, "max": None,
                "percentiles": {label(p): None for p in percentiles}, "correlations": {}}
    return {
        "n": int(len(values)),
        "mean": float(np.mean(values)),
        "std": float(np.std(values, ddof=1)) if len(values) > 1 else 0.0,
        "min": float(np.min(values)),
        "max": float(np.max(values)),
        "percentiles": {label(p): float(v) for p, v in zip(percentiles, np.percentile(values, percentiles))},
        "correlations": {name: spearman(inputs[:, j], values) for j, name in enumerate(names)},
    }


def spearman(x: np.ndarray, y: np.ndarray) -> float | None:
    """Spearman's rank correlation; None when either side is constant."""
    from scipy.stats import rankdata

    if len(x) < 3 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return None
    return float(np.corrcoef(rankdata(x), rankdata(y))[0, 1])


def draw_distributions(outcome: Outcome, figures) -> list[str]:
    """A histogram per quantity and a scatter of each quantity against each parameter."""
    lines = []
    names = outcome.design.names
    for q, values in outcome.values.items():
        keep = outcome.ok & np.isfinite(values)
        if not keep.any():
            continue
        fig, ax = figures.new()
        ax.hist(values[keep], bins=min(50, max(10, int(np.sqrt(keep.sum())))), color="steelblue")
        ax.set(xlabel=q, ylabel="runs", title=f"Distribution of {q}")
        lines += [figures.save(fig, f"hist-{q}", f"Distribution of {q}"), ""]
        if names:
            fig, axes = figures.new(1, len(names), size=(3.2 * len(names), 3.2))
            shown = np.flatnonzero(keep)[:5000]
            for j, (ax, p) in enumerate(zip(np.ravel(axes), names)):
                ax.scatter(outcome.design.matrix[shown, j], values[shown], s=4, alpha=0.5)
                ax.set(xlabel=p, ylabel=q if j == 0 else "")
            lines += [figures.save(fig, f"scatter-{q}", f"{q} against each parameter"), ""]
    return lines
