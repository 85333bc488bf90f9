"""The analyse step of `local`: sensitivity functions by every method asked for, their
summaries per output, the overall ranking, collinearity, partitions and agreement.

`spec` is the `local` block throughout (not imported here: the block's module imports this one).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from studyrun.analyses.local.agreement import compare_rankings, rank
from studyrun.analyses.local.collinearity import analyse_collinearity
from studyrun.analyses.local.sensitivity import (
    difference_quotients,
    normalise,
    overall_ranking,
    relative_difference,
    summarise,
)
from studyrun.core.design import Outcome
from studyrun.core.numbers import finite_or_none

Functions = dict[str, tuple[np.ndarray, np.ndarray]]  # output -> y (T,), dy/dp (T, m)


class MethodFailed(Exception):
    """A method gave no sensitivity functions; the message says why."""


def analyse_local(spec, outcome: Outcome, model: Any, values: dict[str, float],
                  symbolic: Any) -> dict[str, Any]:
    """The `results` block (see the package docstring) of the runs of `model`, every input of
    which has its nominal value in `values`; `symbolic` is the differentiated model for
    `exact` (None without it)."""
    design = outcome.design
    names, info = design.names, design.info
    nominal = np.array([info["nominal"][n] for n in names])
    notes = list(info.get("notes", [])) + outcome.series_notes
    computed: dict[str, tuple[np.ndarray, Functions]] = {}
    for method in info["methods"]:
        try:
            computed[method] = functions_by(method, spec, outcome, notes, model, values,
                                            symbolic)
        except MethodFailed as error:
            notes.append(f"{method}: {error}")
    primary = info["methods"][0]
    if primary not in computed:
        return {**{o: {"error": f"no sensitivity functions: {notes[-1]}"} for o in spec.outputs},
                "notes": notes}
    scaled = {method: {output: normalise(raw, y, nominal, spec.output_scale.get(output))
                       for output, (y, raw) in found.items()}
              for method, (_, found) in computed.items()}
    results = summarise_outputs(computed[primary][0], scaled[primary], names, primary)
    results["ranking"], _ = overall_ranking([results[o] for o in spec.outputs], names)
    stacked = np.vstack([scaled[primary][o][0] for o in spec.outputs])
    results["collinearity"] = analyse_collinearity(stacked, names, spec.collinearity_max,
                                                   spec.threshold)
    results["agreement"] = compare_methods(spec, computed, scaled, names)
    partition = partition_results(spec, names, notes, model, values)
    if partition is not None:
        results["partition"] = partition
        notes += [initial_state_note(name, states, results, spec.outputs)
                  for name, states in partition["initial_state_only"].items()]
        for other in ("uniform", "clustering"):
            results["agreement"][f"full vs {other}"] = compare_rankings(
                partition["full"]["ranking"], partition[other]["ranking"], spec.top)
    results.update(quantity_results(outcome, info["methods"], nominal, notes))
    results["notes"] = notes
    return results


def initial_state_note(name: str, states: list[str], results: dict[str, Any],
                       outputs: list[str]) -> str:
    """Why a parameter that only sets initial states has partition coefficients of 0, and where
    its effect is measured instead."""
    l1 = ", ".join(f"{o} {results[o]['L1'][name]:.4g}" for o in outputs
                   if results[o].get("L1", {}).get(name) is not None)
    return (f"partition: {name} only sets the initial value of {', '.join(states)}, so its "
            f"coefficients are 0: they measure the right-hand side's sensitivity df/dp "
            '(docs/methods.md, "Reduced-partition sensitivity coefficients"), and f never '
            f"reads {name}. Its effect on the trajectory is "
            f"in the sensitivity functions' L1" + (f" ({l1})" if l1 else ""))


def summarise_outputs(time: np.ndarray, scaled: dict[str, tuple[np.ndarray, int]],
                      names: list[str], method: str) -> dict[str, Any]:
    """Per output: the summaries, the method, the points left out and the functions."""
    results = {}
    for output, (functions, excluded) in scaled.items():
        results[output] = summarise(functions, names) | {
            "method": method, "excluded_points": excluded,
            "functions": {"time": time.tolist(), "normalised": {
                p: functions[:, j].tolist() for j, p in enumerate(names)}}}
    return results


def quantity_results(outcome: Outcome, methods: list[str], nominal: np.ndarray,
                     notes: list[str]) -> dict[str, Any]:
    """{"quantities": ...} when there are quantities and difference runs to take them from."""
    quantities = quantity_sensitivities(outcome, methods, nominal)
    if quantities:
        return {"quantities": quantities}
    if outcome.values:
        notes.append("quantities are differentiated by differences, and exact alone plans none; "
                     "add compare: [central] for their sensitivities")
    return {}


def quantity_sensitivities(outcome: Outcome, methods: list[str], nominal: np.ndarray
                           ) -> dict[str, Any]:
    """Each quantity's value, dq/dp and (p / q) dq/dp at the nominal point, by the first
    difference method computed (none with `exact` alone: quantities have no exact form)."""
    scheme = next((m for m in methods if m in ("central", "forward")), None)
    if scheme is None:
        return {}
    design = outcome.design
    steps = np.array([design.info["steps"][n] for n in design.names])
    used = 1 + len(steps) * (2 if scheme == "central" else 1)
    found = {}
    for name, values in outcome.values.items():
        column = np.where(outcome.ok[:used], values[:used], np.nan)[:, None]
        slope = difference_quotients(column, steps, scheme)[0]
        value = float(column[0, 0])
        with np.errstate(invalid="ignore", divide="ignore"):
            scaled = slope * nominal / value if value != 0 else np.full(len(steps), np.nan)
        normalised = {p: finite_or_none(v) for p, v in zip(design.names, scaled)}
        found[name] = {"value": finite_or_none(value), "method": scheme,
                       "derivative": {p: finite_or_none(v) for p, v in zip(design.names, slope)},
                       "normalised": normalised,
                       "ranking": rank({p: None if v is None else abs(v)
                                        for p, v in normalised.items()})}
    return found


def functions_by(method: str, spec, outcome: Outcome, notes: list[str], model: Any,
                 values: dict[str, float], symbolic: Any) -> tuple[np.ndarray, Functions]:
    """The output grid and each output's y and dy/dp by one method."""
    if method == "exact":
        return exact_by(spec, outcome.design, model, values, symbolic)
    design = outcome.design
    steps = np.array([design.info["steps"][n] for n in design.names])
    m = len(steps)
    used = 1 + m * (2 if method == "central" else 1)
    if not outcome.ok[0]:
        raise MethodFailed("the nominal run failed")
    failed = [design.names[(i - 1) % m] for i in np.flatnonzero(~outcome.ok[:used])]
    if failed:
        notes.append(f"{method}: a perturbed run failed for {', '.join(sorted(set(failed)))}; "
                     f"its sensitivities are unknown (null)")
    found: Functions = {}
    for output in spec.outputs:
        if output not in outcome.series:
            raise MethodFailed(f"the runs gave no time series {output!r}")
        series = np.where(outcome.ok[:used, None], outcome.series[output][:used], np.nan)
        found[output] = (series[0], difference_quotients(series, steps, method))
    time = outcome.time if outcome.time is not None else np.arange(series.shape[1], dtype=float)
    return np.asarray(time, dtype=float), found


def exact_by(spec, design: Any, model: Any, values: dict[str, float], symbolic: Any
             ) -> tuple[np.ndarray, Functions]:
    """The forward sensitivity equations, integrated in-process at the nominal point."""
    from studyrun.analyses.local.exact import NotDifferentiable, exact_functions

    system = model.to_system()
    values = {**values, **design.info["nominal"]}
    try:
        return exact_functions(system, values, design.names, spec.outputs, system.rtol,
                               system.atol, symbolic)
    except (NotDifferentiable, RuntimeError, ArithmeticError, ValueError) as error:
        raise MethodFailed(str(error)) from None


def compare_methods(spec, computed: dict, scaled: dict, names: list[str]
                    ) -> dict[str, Any]:
    """Each other method against the primary: rankings overall and per output, and the largest
    difference of dy/dp over time relative to the primary's largest |dy/dp| (normalised
    functions would magnify both methods' noise where y is near 0)."""
    methods = list(computed)
    primary, agreement = methods[0], {}
    for other in methods[1:]:
        per_output, entries = {}, {primary: [], other: []}
        for output in spec.outputs:
            a = summarise(scaled[primary][output][0], names)
            b = summarise(scaled[other][output][0], names)
            entries[primary].append(a)
            entries[other].append(b)
            gaps = relative_difference(computed[other][1][output][1],
                                       computed[primary][1][output][1])
            per_output[output] = compare_rankings(a["ranking"], b["ranking"], spec.top) | {
                "max_relative_difference": dict(zip(names, gaps))}
        first, _ = overall_ranking(entries[primary], names)
        second, _ = overall_ranking(entries[other], names)
        agreement[f"{primary} vs {other}"] = compare_rankings(first, second, spec.top) | {
            "outputs": per_output}
    return agreement


def partition_results(spec, names: list[str], notes: list[str], model: Any,
                      values: dict[str, float]) -> dict | None:
    """Coefficients on fewer trajectory points, for equation models when asked."""
    from studyrun.models.base import HasEquations

    if spec.partition is False or not isinstance(model, HasEquations):
        return None
    from studyrun.analyses.local.partition import analyse_partition

    settings = spec.partition
    try:
        return analyse_partition(model.to_system(), values, names, spec.delta,
                                 settings.scale == "relative", settings.intervals,
                                 settings.tolerance, settings.radius)
    except (RuntimeError, ArithmeticError, ValueError) as error:
        notes.append(f"partition: {error}")
        return None
