"""Monte Carlo uncertainty propagation: moments, percentiles and rank correlations (as Dakota's
sampling method reports them).

Formulas, defaults and edge cases: docs/methods.md, "Monte Carlo summaries".
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np
from pydantic import Field, PositiveInt

from ..core.design import Design, Outcome
from ..params import map_unit, sample_unit, sample_unit_chunks
from ..report.figures import shown_rows
from ..report.markdown import table
from .base import AnalysisSpec


class Montecarlo(AnalysisSpec):
    """Draw `samples` parameter sets and summarise each quantity's distribution."""

    type: Literal["montecarlo"]
    samples: PositiveInt = Field(1000, description="number of runs")
    sampling: Literal["random", "lhs", "sobol"] = "random"
    percentiles: list[float] = Field(default_factory=lambda: [5.0, 50.0, 95.0])

    def run_count(self, context) -> tuple[int, str]:
        return self.samples, "samples"

    def design(self, context, seed) -> Design:
        parameters = context.varied
        names = list(parameters)
        if not names:
            return Design(names, np.zeros((self.samples, 0)))
        u = sample_unit(self.samples, len(names), self.sampling, seed)
        return Design(names, map_unit(parameters, u), {"sampling": self.sampling})

    def design_chunks(self, context, seed, rows):
        parameters = context.varied
        names = list(parameters)
        if not names or self.samples <= rows:
            yield self.design(context, seed)
            return
        for u in sample_unit_chunks(self.samples, len(names), self.sampling, seed, rows):
            yield Design(names, map_unit(parameters, u), {"sampling": self.sampling})

    def analyse_runs(self, runs, context) -> dict[str, Any]:
        """In memory for a design of one chunk; otherwise streamed: moments merged chunk by
        chunk, percentiles from one sorted pass and rank correlations computed by SQLite."""
        if not runs.chunked:
            return self.analyse(runs.whole(), context)
        moments: dict[str, Moments] = {}
        for outcome in runs.chunks():
            for name, values in outcome.values.items():
                kept = values[outcome.ok & np.isfinite(values)]
                moments.setdefault(name, Moments()).add(kept)
        return {name: m.summary(runs.sorted_values(name), self.percentiles, runs.rank_sums(name),
                                runs.names)
                for name, m in moments.items()}

    def analyse(self, outcome: Outcome, context) -> dict[str, Any]:
        results, ranked = {}, {}
        for name, values in outcome.values.items():
            keep = outcome.ok & np.isfinite(values)
            key = np.packbits(keep).tobytes()  # quantities kept by the same runs share input ranks
            if key not in ranked:
                ranked[key] = Ranks(outcome.design.matrix[keep])
            results[name] = summarise(values[keep], ranked[key], outcome.design.names,
                                      self.percentiles)
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


def summarise(values: np.ndarray, inputs: "Ranks", names: list[str], percentiles) -> dict[str, Any]:
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
        "correlations": dict(zip(names, inputs.spearman(values))),
    }


class Ranks:
    """The ranks of each input column, computed once for every quantity they are compared with."""

    def __init__(self, inputs: np.ndarray) -> None:
        from scipy.stats import rankdata

        self.n, self.columns = inputs.shape
        self.ranks = rankdata(inputs, axis=0) if self.n >= 3 else None
        self.constant = np.ptp(inputs, axis=0) == 0 if self.n else np.ones(self.columns, bool)

    def spearman(self, values: np.ndarray) -> list[float | None]:
        """Spearman's rank correlation of each input with the values; None where either side
        is constant (or there are fewer than 3 runs)."""
        from scipy.stats import rankdata

        if self.ranks is None or np.ptp(values) == 0:
            return [None] * self.columns
        ry = rankdata(values)
        return [None if self.constant[j] else float(np.corrcoef(self.ranks[:, j], ry)[0, 1])
                for j in range(self.columns)]


class Moments:
    """Count, mean, sum of squared deviations, min and max, merged chunk by chunk (Chan et al.)."""

    def __init__(self) -> None:
        self.n, self.mean, self.m2 = 0, 0.0, 0.0
        self.low, self.high = np.inf, -np.inf

    def add(self, values: np.ndarray) -> None:
        k = len(values)
        if not k:
            return
        mean = float(np.mean(values))
        m2 = float(np.sum((values - mean) ** 2))
        total = self.n + k
        delta = mean - self.mean
        self.mean += delta * k / total
        self.m2 += m2 + delta * delta * self.n * k / total
        self.n = total
        self.low, self.high = min(self.low, float(values.min())), max(self.high, float(values.max()))

    def summary(self, ordered, percentiles, rank_sums, names) -> dict[str, Any]:
        if not self.n:
            return summarise(np.zeros(0), Ranks(np.zeros((0, len(names)))), names, percentiles)
        return {"n": self.n, "mean": self.mean,
                "std": float(np.sqrt(self.m2 / (self.n - 1))) if self.n > 1 else 0.0,
                "min": self.low, "max": self.high,
                "percentiles": dict(zip(map(label, percentiles),
                                        order_percentiles(ordered, self.n, percentiles))),
                "correlations": {p: spearman_from_sums(*rank_sums[p]) for p in names}}


def order_percentiles(ordered, n: int, percentiles) -> list[float]:
    """numpy's default (linear) percentiles from values streamed in increasing order."""
    wanted = {}
    for p in percentiles:
        index = p / 100 * (n - 1)
        low = int(np.floor(index))
        wanted[p] = (low, min(low + 1, n - 1), index - low)
    needed = {i for low, high, _ in wanted.values() for i in (low, high)}
    found = {}
    for i, value in enumerate(ordered):
        if i in needed:
            found[i] = value
            if len(found) == len(needed):
                break
    out = []
    for p in percentiles:
        low, high, t = wanted[p]
        a, b = found[low], found[high]
        out.append(float(a + (b - a) * t if t < 0.5 else b - (b - a) * (1 - t)))
    return out


def spearman_from_sums(n, sx, sy, sxx, syy, sxy) -> float | None:
    """Pearson's correlation of ranks from their sums; None when either side is constant."""
    if not n or n < 3:
        return None
    covariance = sxy - sx * sy / n
    spread = (sxx - sx * sx / n) * (syy - sy * sy / n)
    return float(covariance / np.sqrt(spread)) if spread > 0 else None


def draw_distributions(outcome: Outcome, figures) -> list[str]:
    """A histogram per quantity and a scatter of each quantity against each parameter."""
    lines = []
    names = outcome.design.names
    for q, values in outcome.values.items():
        keep = outcome.ok & np.isfinite(values)
        if not keep.any():
            continue
        fig, ax = figures.new()
        # One filled outline instead of a patch per bar: the same picture, cheaper to draw.
        ax.hist(values[keep], bins=min(50, max(10, int(np.sqrt(keep.sum())))), color="steelblue",
                histtype="stepfilled")
        ax.set(xlabel=q, ylabel="runs", title=f"Distribution of {q}")
        lines += [figures.save(fig, f"hist-{q}", f"Distribution of {q}"), ""]
        if names:
            fig, axes = figures.new(1, len(names), size=(3.2 * len(names), 3.2))
            kept = np.flatnonzero(keep)
            shown = kept[shown_rows(len(kept), prefix=True)]
            for j, (ax, p) in enumerate(zip(np.ravel(axes), names)):
                ax.scatter(outcome.design.matrix[shown, j], values[shown], s=4, alpha=0.5)
                ax.set(xlabel=p, ylabel=q if j == 0 else "")
            lines += [figures.save(fig, f"scatter-{q}", f"{q} against each parameter"), ""]
    return lines
