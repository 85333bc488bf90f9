"""Parameter sweeps: a full grid of levels per parameter, or an explicit list of cases.

Formulas, defaults and edge cases: docs/methods.md, "Parameter sweeps".
"""

from __future__ import annotations

import itertools
from typing import Any, Literal

import numpy as np
from pydantic import Field, PositiveInt, RootModel, model_validator

from studyrun.analyses.base import FixedDesignAnalysis
from studyrun.blocks.params import Real, Whole
from studyrun.core.design import Design, Outcome
from studyrun.core.numbers import finite_or_none
from studyrun.core.plugin import Example
from studyrun.results.records import STRICT, Numbers, Record
from studyrun.results.report.markdown import table


class SweepQuantity(Record):
    """A quantity at each case of the grid, in the design's order (null where a run failed)."""

    values: Numbers = []


class SweepResults(RootModel[dict[str, SweepQuantity]]):
    """Quantity -> its values."""

    model_config = STRICT


class Sweep(FixedDesignAnalysis):
    """Every combination of `levels` values per parameter (first parameter slowest), or `cases`."""

    type: Literal["sweep"]
    tutorial = "Sweeps"
    example = Example({"analysis": {"type": "sweep", "levels": 4}},
                      failing={},
                      failures="nulls")
    results_model = SweepResults
    levels: PositiveInt | dict[str, PositiveInt | list[Whole | Real]] = Field(
        5, description="points per parameter across its bounds, or explicit values per parameter "
        "(integers stay whole numbers)")
    cases: list[dict[str, float]] | None = Field(None, description="explicit runs, one mapping each")

    @model_validator(mode="after")
    def _check_cases(self) -> "Sweep":
        if self.cases is not None and not self.cases:
            raise ValueError("cases is empty; list at least one case, or drop it to sweep a grid")
        return self

    def run_count(self, context) -> tuple[int, str] | None:
        """The grid's size (the product of each parameter's levels); cases are written out."""
        if self.cases is not None:
            return None
        size = 1
        for name in context.varied:
            levels = self.levels.get(name, 5) if isinstance(self.levels, dict) else self.levels
            size *= len(levels) if isinstance(levels, list) else int(levels)
        return size, "levels"

    def design(self, context, seed) -> Design:
        parameters = context.varied
        names = list(parameters)
        if self.cases is not None:
            return self._design_cases(names, parameters)
        axes = [self.axis(name, parameters[name]) for name in names]
        matrix = np.array(list(itertools.product(*axes)), dtype=float).reshape(-1, len(names))
        return Design(names, matrix, {"grid": {n: a for n, a in zip(names, map(list, axes))}})

    def whole_numbers(self, parameters) -> set[str]:
        """A parameter given a list of levels is whole when they are all integers; else as its
        kind says."""
        lists = {n: v for n, v in self.levels.items() if isinstance(v, list)} \
            if isinstance(self.levels, dict) else {}
        return {name for name, p in parameters.items()
                if (all(isinstance(v, int) for v in lists[name]) if name in lists else p.whole)}

    def axis(self, name: str, parameter) -> list[float]:
        levels = self.levels.get(name, 5) if isinstance(self.levels, dict) else self.levels
        if isinstance(levels, list):
            return [float(v) for v in levels]
        if getattr(parameter, "values", None):  # a discrete parameter sweeps its own values
            return [float(v) for v in parameter.values]
        low, high = parameter.bounds()
        return np.linspace(low, high, levels).tolist() if levels > 1 else [parameter.median()]

    def _design_cases(self, names: list[str], parameters) -> Design:
        medians = {name: parameters[name].nominal_value(None) for name in names}
        matrix = np.array([[case.get(n, medians[n]) for n in names] for case in self.cases], dtype=float)
        return Design(names, matrix.reshape(-1, len(names)), {"cases": len(self.cases)})

    def analyse(self, outcome: Outcome, context) -> dict[str, Any]:
        return {name: {"values": [finite_or_none(v) if ok else None
                                  for v, ok in zip(values, outcome.ok)]}
                for name, values in outcome.values.items()}

    def report(self, analysis, outcome, figures) -> str:
        if outcome is None:
            return ""
        names = outcome.design.names
        quantities = list(analysis["results"])
        rows = [[*row, *(analysis["results"][q]["values"][i] for q in quantities)]
                for i, row in enumerate(outcome.design.matrix[:200].tolist())]
        lines = ["## Sweep", "", table([*names, *quantities], rows), ""]
        if outcome.design.matrix.shape[0] > 200:
            lines += [f"(first 200 of {outcome.design.matrix.shape[0]} runs; all are in runs.csv)", ""]
        if len(names) >= 1:
            lines += draw_lines(outcome, analysis, figures)
        return "\n".join(lines)


def draw_lines(outcome: Outcome, analysis, figures) -> list[str]:
    """Each quantity against the first parameter, one line per combination of the others (the
    first 12 combinations met in run order)."""
    lines = []
    x = outcome.design.matrix[:, 0]
    others = outcome.design.matrix[:, 1:]
    if others.shape[1]:
        combos, first, group = np.unique(others, axis=0, return_index=True, return_inverse=True)
        group = group.reshape(-1)
        shown = np.argsort(first, kind="stable")[:12]
    else:
        combos, group, shown = np.zeros((1, 0)), np.zeros(len(x), dtype=int), np.zeros(1, dtype=int)
    masks = [group == g for g in shown]
    labels = [", ".join(f"{n}={v:g}" for n, v in zip(outcome.design.names[1:], combos[g].tolist()))
              for g in shown]
    for q, result in analysis["results"].items():
        if not figures.draws(q):
            continue
        y = np.array(result["values"], dtype=float)  # None (a failed run) becomes NaN
        fig, ax = figures.new()
        for mask, label in zip(masks, labels):
            ax.plot(x[mask], y[mask], marker="o", label=label or None)
        ax.set(xlabel=outcome.design.names[0], ylabel=q, title=f"{q} across the sweep")
        if others.shape[1]:
            ax.legend(fontsize=7)
        lines += [figures.save(fig, f"sweep-{q}", f"{q} across the sweep"), ""]
    return lines
