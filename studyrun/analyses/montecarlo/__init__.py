"""Monte Carlo uncertainty propagation: moments, percentiles and rank correlations (as Dakota's
sampling method reports them).

With `samples: {start, until: {ci} or {rel_ci}, max}` the runs double along the sequence
(every earlier run reused) until the 95% interval of every mean and asked-for percentile is
within the target (`precision.py`).

Formulas, defaults and edge cases: docs/methods.md, "Monte Carlo summaries".
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np
from pydantic import Field, PositiveInt, model_validator

from studyrun.analyses.given import ReadsGiven, not_with_from
from studyrun.analyses.montecarlo.ranks import Ranks
from studyrun.analyses.montecarlo.records import MontecarloResults
from studyrun.analyses.precision import Samples, grow, reached
from studyrun.blocks.params import (
    correlate_unit,
    design_facts,
    map_unit,
    sample_unit,
    sample_unit_chunks,
    sample_unit_range,
)
from studyrun.core.design import Design, Outcome
from studyrun.core.plugin import Example
from studyrun.results.report.figures import shown_rows
from studyrun.results.report.markdown import escape, table
from studyrun.results.report.wide import TOP, shown, table_order, top_note


class Montecarlo(ReadsGiven):
    """Draw `samples` parameter sets (or read the runs `from:` names) and summarise each
    quantity's distribution."""

    type: Literal["montecarlo"]
    tutorial = "Monte Carlo"
    example = Example({"analysis": {"type": "montecarlo", "samples": 24}, "quantities": None},
                      failing={})
    results_model = MontecarloResults
    samples: PositiveInt | Samples = Field(
        1000, description="number of runs (not with from); or {start, until: {ci or rel_ci}, "
                          "max}: runs double until the 95% interval of every mean and "
                          "percentile is within it")
    sampling: Literal["random", "lhs", "sobol"] = "random"
    percentiles: list[float] = Field(default_factory=lambda: [5.0, 50.0, 95.0])

    without_correlation = None  # every sampling draws correlated inputs

    @model_validator(mode="after")
    def _samples_or_from(self) -> "Montecarlo":
        not_with_from(self, "samples", "sampling")
        return self

    @property
    def iterative(self) -> bool:  # type: ignore[override]
        """A precision target grows the sample round by round through `iterate`."""
        return isinstance(self.samples, Samples)

    def run_count(self, context) -> tuple[int, str] | None:
        if isinstance(self.samples, Samples):
            return self.samples.max, "samples.max"
        return None if self.from_ is not None else (self.samples, "samples")

    def design(self, context, seed) -> Design:
        if isinstance(self.samples, Samples):  # the first round's runs
            return self.grown(context, seed, self.samples.start)
        rows = self.given(context)
        if rows is not None:
            return rows.design({"sampling": "given"})
        d = len(context.varied)
        if not d:
            return Design([], np.zeros((self.samples, 0)))
        return self.drawn(context, sample_unit(self.samples, d, self.sampling, seed))

    def grown(self, context, seed, size: int) -> Design:
        """The first `size` runs of a growing sample: one sequence for random and sobol (the
        same runs as a fixed `samples: size`), a hypercube per doubling for lhs (each
        correlated on its own, so the earlier runs stay as they were)."""
        assert isinstance(self.samples, Samples)
        names = list(context.varied)
        if not names:
            return Design(names, np.zeros((size, 0)))
        bounds = [0, *(n for n in self.samples.sizes() if n <= size)]
        u = np.vstack([correlate_unit(sample_unit_range(a, b, len(names), self.sampling, seed),
                                      context.correlation, self.sampling)
                       for a, b in zip(bounds, bounds[1:])])
        x = map_unit(context.varied, u)
        return Design(names, x, {"sampling": self.sampling,
                                 **design_facts(context.correlation, names, x)})

    def describe_design(self, design: Design, context) -> str:
        if not isinstance(self.samples, Samples):
            return ""
        target = self.samples
        return (f"montecarlo: {target.start} runs ({self.sampling}), doubled along the sequence "
                f"(every earlier run reused) until the 95% interval of every mean and percentile "
                f"is within {target.until.describe()}, or the runs reach {target.max}")

    def iterate(self, evaluate, context, seed) -> dict[str, Any]:
        """Double the runs until every quantity's intervals meet the target."""
        from studyrun.analyses.montecarlo.precision import rounds_table, target_met, with_intervals

        assert isinstance(self.samples, Samples)
        until = self.samples.until
        bootstrap = np.random.SeedSequence(seed.entropy, spawn_key=(*seed.spawn_key, 0))

        def analyse(outcome: Outcome) -> dict[str, Any]:
            results = self.analyse(outcome, context)
            for name, values in outcome.values.items():
                kept = values[outcome.ok & np.isfinite(values)]
                results[name] = with_intervals(results[name], kept, self.percentiles, bootstrap)
            return results

        rounds = grow(evaluate, self.samples.sizes(), lambda n: self.grown(context, seed, n),
                      analyse, lambda results: {name: target_met(entry, until)
                                                for name, entry in results.items()})
        results = reached(rounds, until)
        for name, entry in results.items():
            entry["convergence"] = rounds_table(rounds, name)
        return results

    def design_chunks(self, context, seed, rows):
        d = len(context.varied)
        if (isinstance(self.samples, Samples) or not d or self.samples <= rows
                or self.from_ is not None):
            yield self.design(context, seed)
            return
        for i, u in enumerate(sample_unit_chunks(self.samples, d, self.sampling, seed, rows)):
            yield self.drawn(context, u, facts=i == 0)

    def drawn(self, context, u: np.ndarray, facts: bool = True) -> Design:
        return drawn(context, u, self.sampling, facts)

    def analyse(self, outcome: Outcome, context) -> dict[str, Any]:
        results, ranked = {}, {}
        for name, values in outcome.values.items():
            keep = outcome.ok & np.isfinite(values)
            key = np.packbits(keep).tobytes()  # quantities kept by the same runs share input ranks
            if key not in ranked:
                matrix = outcome.design.matrix
                ranked[key] = Ranks(matrix if keep.all() else matrix[keep])
            dropped = int((~keep).sum())
            results[name] = summarise(values[keep], ranked[key], outcome.design.names,
                                      self.percentiles) | {"dropped_runs": dropped}
            if dropped:
                results[name]["warnings"] = [
                    f"{dropped} runs failed or gave no finite value and were left out; the "
                    f"statistics use the remaining {int(keep.sum())}. If failures depend on the "
                    "parameters, they describe only the region where the model runs"]
        return results

    def report(self, analysis, outcome, figures) -> str:
        results = analysis["results"]
        rows = [[q, r["n"], r["mean"], r["std"], r["min"], r["max"],
                 *(r["percentiles"].get(label(p)) for p in self.percentiles)]
                for q, r in results.items()]
        lines = ["## Monte Carlo", "", table(["quantity", "runs", "mean", "std", "min", "max",
                                              *(f"p{label(p)}" for p in self.percentiles)], rows), ""]
        names = (outcome.design.names if outcome else  # a grown sample's report has no runs
                 list(next(iter(results.values()), {}).get("correlations", {})))
        if names:
            lines += ["### Rank correlations (Spearman)", "", *spearman_table(results, names), ""]
        lines += correlation_table(analysis.get("design", {}))
        for q, r in results.items():
            if r.get("warnings"):
                from studyrun.analyses.salib.report import warnings_block

                lines += [f"Warnings for {q}:", "", warnings_block(r), ""]
        for q, r in results.items():
            if "convergence" in r:
                from studyrun.analyses.montecarlo.precision import precision_section

                lines += precision_section(q, r, figures)
        if outcome is not None:
            lines += draw_distributions(outcome, figures,
                                        {q: r["correlations"] for q, r in results.items()})
        return "\n".join(lines)


def drawn(context, u: np.ndarray, sampling: str, facts: bool = True) -> Design:
    """Unit-cube points as the design's rows, correlated as the study asks; the design's facts
    (from its first slice, when sliced): the matrix and the correlations achieved."""
    names = list(context.varied)
    x = map_unit(context.varied, correlate_unit(u, context.correlation, sampling))
    return Design(names, x, {"sampling": sampling,
                             **(design_facts(context.correlation, names, x) if facts else {})})


def label(p: float) -> str:
    """A percentile's key: '5' for 5.0, '2.5' for 2.5."""
    return f"{p:g}"


def summarise(values: np.ndarray, inputs: Ranks, names: list[str], percentiles) -> dict[str, Any]:
    """Moments, extremes, percentiles and Spearman correlations of one quantity."""
    if not len(values):
        return no_runs(percentiles)
    return {
        "n": int(len(values)),
        "mean": float(np.mean(values)),
        "std": float(np.std(values, ddof=1)) if len(values) > 1 else 0.0,
        "min": float(np.min(values)),
        "max": float(np.max(values)),
        "percentiles": {label(p): float(v) for p, v in zip(percentiles, np.percentile(values, percentiles))},
        "correlations": dict(zip(names, inputs.spearman(values))),
    }


def no_runs(percentiles) -> dict[str, Any]:
    """The summary of a quantity no run gave."""
    return {"n": 0, "mean": None, "std": None, "min": None, "max": None,
            "percentiles": {label(p): None for p in percentiles}, "correlations": {}}


def correlation_table(design: dict[str, Any]) -> list[str]:
    """The input correlations asked for (of normal scores) beside those the sample achieved."""
    asked, got = design.get("correlation"), design.get("achieved_correlation") or {}
    if not asked:
        return []
    names = list(asked)
    rows = [[f"{a}, {b}", asked[a][b], *((got.get(kind) or {}).get(a, {}).get(b)
                                         for kind in ("pearson", "spearman"))]
            for i, a in enumerate(names) for b in names[i + 1:]]
    return ["### Input correlations", "",
            "Asked for (of the inputs' normal scores) and achieved by the design "
            f"({escape(got.get('runs'))} runs):", "",
            table(["inputs", "asked", "Pearson", "Spearman"], rows), ""]


def spearman_table(results: dict[str, Any], names: list[str]) -> list[str]:
    """A row per quantity and a column per parameter; for more parameters than a figure shows,
    a row per parameter by decreasing |Spearman| (the largest over the quantities)."""
    if len(names) <= TOP:
        return [table(["quantity", *names], [[q, *(r["correlations"].get(p) for p in names)]
                                             for q, r in results.items()])]
    largest = {p: max((abs(r["correlations"][p]) for r in results.values()
                       if r["correlations"].get(p) is not None), default=None) for p in names}
    return [top_note(largest, "|Spearman|"), "",
            table(["parameter", *results],
                  [[p, *(r["correlations"].get(p) for r in results.values())]
                   for p in table_order(largest)])]


def draw_distributions(outcome: Outcome, figures,
                       correlations: dict[str, dict[str, Any]] | None = None) -> list[str]:
    """A histogram per quantity and a scatter of each quantity against each parameter (against
    those of largest |Spearman|, by `correlations`, for a wide study: in rows of five)."""
    lines = []
    names = outcome.design.names
    column = {p: j for j, p in enumerate(names)}
    for q, values in outcome.values.items():
        keep = outcome.ok & np.isfinite(values)
        if not keep.any() or not figures.draws(q):
            continue
        fig, ax = figures.new()
        # One filled outline instead of a patch per bar: the same picture, cheaper to draw.
        ax.hist(values[keep], bins=min(50, max(10, int(np.sqrt(keep.sum())))), color="steelblue",
                histtype="stepfilled")
        ax.set(xlabel=q, ylabel="runs", title=f"Distribution of {q}")
        lines += [figures.save(fig, f"hist-{q}", f"Distribution of {q}"), ""]
        drawn = shown((correlations or {}).get(q) or dict.fromkeys(names))
        if drawn:
            wide = len(drawn) < len(names)
            rows, cols = (-(-len(drawn) // 5), 5) if wide else (1, len(drawn))
            fig, axes = figures.new(rows, cols, size=(3.2 * cols, 3.2 * rows))
            kept = np.flatnonzero(keep)
            points = kept[shown_rows(len(kept), prefix=True)]
            for i, (ax, p) in enumerate(zip(np.ravel(axes), drawn)):
                ax.scatter(outcome.design.matrix[points, column[p]], values[points], s=4, alpha=0.5)
                ax.set(xlabel=p, ylabel=q if i % cols == 0 else "")
            for ax in np.ravel(axes)[len(drawn):]:
                ax.remove()
            caption = (f"{q} against the {len(drawn)} parameters of largest |Spearman|" if wide
                       else f"{q} against each parameter")
            lines += [figures.save(fig, f"scatter-{q}", caption), ""]
    return lines
