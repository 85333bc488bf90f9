"""The gradient of one objective with respect to every varied parameter, `analysis: {type:
gradient}` (docs/methods.md, "Adjoint gradients").

`objective`: one reduction of one model output (objective.py). `method`: `adjoint` (one forward
and one backward pass of an equation model, equations.py), `forward` (its forward sensitivity
equations), `fd` (central differences of runs, h_j = delta |p_j|), or `auto`: the adjoint where
the model's equations can be differentiated, forward sensitivities for a fixed-step method (they
differentiate its discrete solution exactly), differences otherwise; `notes` says why.

Design: the nominal point (each parameter's `nominal`, else the model's own value, else its
median), then for `fd` p + h_j e_j and p - h_j e_j. Adjoint and forward compute in-process at
the nominal point, as local's `exact` does. Adaptive solvers run at rtol = delta * 1e-6 (local's
`tighten`), so that differences are not solver noise and the methods agree.

Results (analysis.json `results`): `objective`, `value` (J of the nominal run), `gradient`
(parameter -> dJ/dp), `normalised` (parameter -> p / J dJ/dp, null where J = 0), `ranking` (by
|normalised|, largest first), `method` (the one used), `cost` (`runs`, `integrations`,
`backward_steps`, `forward_seconds`, `backward_seconds`; the seconds are null for `fd`, whose
runs the executor times) and `notes`; `error` instead of numbers when the nominal run failed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

import numpy as np
from pydantic import Field, PositiveFloat, field_validator

from studyrun.analyses.base import FixedDesignAnalysis, StudyContext
from studyrun.analyses.gradient.objective import REDUCTIONS, parse_objective
from studyrun.analyses.gradient.records import GradientResults
from studyrun.analyses.local import exact_status, tighten
from studyrun.analyses.local.agreement import rank
from studyrun.analyses.local.sensitivity import difference_rows, perturbation_steps
from studyrun.core.design import Design, Outcome
from studyrun.core.errors import Problem
from studyrun.core.numbers import finite_or_none
from studyrun.core.plugin import Example

if TYPE_CHECKING:
    from studyrun.analyses.local.exact import SymbolicModel
    from studyrun.results.report.figures import Figures

Method = Literal["auto", "adjoint", "forward", "fd"]


class Gradient(FixedDesignAnalysis):
    """`analysis: {type: gradient}`: dJ/dp at the nominal point; see the module doc."""

    type: Literal["gradient"]
    tutorial = "Gradients"
    example = Example({"analysis": {"type": "gradient", "objective": "integral(y)"}},
                      failing={"parameters": {"a": {"nominal": 0.9}}},
                      failures="names")
    results_model = GradientResults
    objective: str = Field(description="J: " + " | ".join(f"{k}(x)" for k in REDUCTIONS)
                           + " of a model output x; a window (x, T0, T1) but for final and at "
                             "(at(x, T))")
    method: Method = Field("auto", description="adjoint | forward (sensitivity equations) | fd "
                           "(central differences) | auto: adjoint, else forward or fd, saying why")
    delta: float = Field(1e-4, gt=0, lt=1, description="fd: relative step of each parameter")
    solver_rtol: PositiveFloat | Literal["auto"] = Field(
        "auto", description="rtol of an adaptive solver for these runs; auto: delta * 1e-6 "
                            "when the model's own is looser (atol scaled alike)")

    @field_validator("objective")
    @classmethod
    def _objective_parses(cls, value: str) -> str:
        parse_objective(value)
        return value

    def model_for(self, model: Any) -> tuple[Any, list[str]]:
        """The model with an adaptive solver tightened, and a note saying so."""
        model, note = tighten(model, self.delta, self.solver_rtol)
        return model, [note] if note else []

    def check(self, context: StudyContext) -> list[Problem]:
        from studyrun.core.text import suggest
        from studyrun.models.base import HasEquations

        if not context.varied:
            return [Problem("gradient needs at least one varied parameter; give it a "
                            "distribution or bounds (its nominal value is the model's own "
                            "unless `nominal:` says otherwise)", "type")]
        objective = parse_objective(self.objective)
        try:
            known = context.model.output_names()
            times = context.model.to_system().grid.times \
                if isinstance(context.model, HasEquations) else None
        except Exception:  # an invalid model: its own check reports it
            return []
        if known is not None and objective.output not in known:
            return [Problem(f"the model has no output {objective.output!r}"
                            f"{suggest(objective.output, known)} (outputs: "
                            f"{', '.join(sorted(known))})", "objective")]
        if times is not None:
            try:
                objective.weights(np.zeros(len(times)), times)
            except ValueError as error:
                return [Problem(str(error), "objective")]
        return []

    def needs_series(self, context: StudyContext) -> list[str]:
        return [parse_objective(self.objective).output]

    def design(self, context: StudyContext, seed: np.random.SeedSequence) -> Design:
        """The nominal point, and for differences the 2m points around it."""
        names = list(context.varied)
        nominal = np.array([context.nominal(n) for n in names], dtype=float)
        steps = perturbation_steps(nominal, self.delta)
        output = parse_objective(self.objective).output
        method, notes, _ = resolve(self.method, context.model, names, [output])
        matrix = difference_rows(nominal, steps, True) if method == "fd" else nominal[None, :]
        return Design(names, matrix, {
            "method": method, "requested": self.method, "delta": self.delta,
            "nominal": dict(zip(names, nominal.tolist())),
            "steps": dict(zip(names, steps.tolist())), "notes": [*context.notes, *notes]})

    def describe_design(self, design: Design, context: StudyContext) -> str:
        method = design.info["method"]
        if method == "fd":
            return (f"fd: the nominal point and a central difference for each of "
                    f"{len(design.names)} parameters (relative step {self.delta:g})")
        return f"{method}: the nominal point, differentiated in-process"

    def analyse(self, outcome: Outcome, context: StudyContext) -> dict[str, Any]:
        info, names = outcome.design.info, outcome.design.names
        objective = parse_objective(self.objective)
        notes = [*info["notes"], *outcome.series_notes]
        head: dict[str, Any] = {"objective": self.objective, "method": info["method"]}
        if not outcome.ok[0] or outcome.time is None or objective.output not in outcome.series:
            why = "the nominal run failed" if not outcome.ok[0] else \
                f"the runs gave no time series {objective.output!r}"
            return head | {"error": f"no gradient: {why}", "notes": notes}
        series = np.where(outcome.ok[:, None], outcome.series[objective.output], np.nan)
        try:
            values = objective.evaluate(series, outcome.time)
        except ValueError as error:
            return head | {"error": f"no gradient: {self.objective}: {error}", "notes": notes}
        nominal = np.array([info["nominal"][n] for n in names])
        if info["method"] == "fd":
            gradient, cost = differences(values, outcome, notes)
        else:
            try:
                head["method"], gradient, cost = in_process(
                    info["method"], objective, context, info["nominal"], notes)
            except (RuntimeError, ArithmeticError, ValueError) as error:
                return head | {"error": f"no gradient: {error}", "notes": notes}
        value = float(values[0])
        if value != 0:
            normalised = {p: finite_or_none(v) for p, v in zip(names, gradient * nominal / value)}
            size = normalised
        else:
            notes.append("J is 0 at the nominal point: no normalised gradient; the ranking "
                         "follows |p dJ/dp|")
            normalised = {p: None for p in names}
            size = {p: finite_or_none(v) for p, v in zip(names, gradient * nominal)}
        return head | {
            "value": finite_or_none(value),
            "gradient": {p: finite_or_none(g) for p, g in zip(names, gradient)},
            "normalised": normalised,
            "ranking": rank({p: None if v is None else abs(v) for p, v in size.items()}),
            "cost": {"runs": len(outcome.ok), **cost}, "notes": notes}

    def report(self, analysis: dict[str, Any], outcome: Outcome | None, figures: "Figures") -> str:
        from studyrun.analyses.gradient.report import write_report

        return write_report(analysis, figures)


def resolve(requested: str, model: Any, names: list[str], outputs: list[str]
            ) -> tuple[str, list[str], "SymbolicModel | None"]:
    """The method used for `requested` (auto, adjoint, forward or fd), the notes that say why
    it is another, and the differentiated model for adjoint and forward."""
    from studyrun.models.equations import FIXED_METHODS

    if requested == "fd":
        return "fd", [], None
    ok, reason, symbolic = exact_status(model, names, outputs)
    if not ok:
        wanted = "adjoint" if requested == "auto" else requested
        return "fd", [f"{wanted} gradients are not available ({reason}); central differences "
                      "used"], None
    fixed = model.method in FIXED_METHODS
    if requested == "auto":
        if not fixed:
            return "adjoint", [], symbolic
        return "forward", [f"the model steps with {model.method}: forward sensitivities, which "
                           "differentiate its discrete solution exactly, used rather than the "
                           "adjoint (it differentiates the continuous equations)"], symbolic
    notes = [f"the adjoint differentiates the continuous equations (integrated by RK45), not "
             f"the model's {model.method} steps: the two differ by the step's error"
             ] if requested == "adjoint" and fixed else []
    return requested, notes, symbolic


def in_process(method: str, objective: Any, context: StudyContext, nominal: dict[str, float],
               notes: list[str]) -> tuple[str, np.ndarray, dict[str, Any]]:
    """(method used, dJ/dp, cost) by the adjoint or forward sensitivities at the nominal point;
    an adjoint that fails is followed by forward sensitivities, with a note."""
    from studyrun.analyses.gradient.equations import adjoint_gradient, forward_gradient

    model, names = context.model, list(nominal)
    system = model.to_system()
    symbolic = exact_status(model, names, [objective.output])[2]
    values = {**context.defaults, **context.fixed, **nominal}

    def weigh(times: np.ndarray, ys: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        return {objective.output: objective.weights(ys[objective.output], times)}

    if method == "adjoint":
        try:
            found = adjoint_gradient(symbolic, system, values, weigh, system.rtol, system.atol)
            return method, found.gradient, found.cost
        except (RuntimeError, ArithmeticError, ValueError) as error:
            notes.append(f"adjoint: {error}; forward sensitivities used")
    found = forward_gradient(symbolic, system, values, weigh, system.rtol, system.atol)
    return "forward", found.gradient, found.cost


def differences(values: np.ndarray, outcome: Outcome, notes: list[str]
                ) -> tuple[np.ndarray, dict[str, Any]]:
    """Central differences of J over the design's runs (NaN where a run failed), and the cost."""
    design = outcome.design
    steps = np.array([design.info["steps"][n] for n in design.names])
    m = len(steps)
    gradient = (values[1:1 + m] - values[1 + m:1 + 2 * m]) / (2 * steps)
    failed = [n for n, g in zip(design.names, gradient) if not np.isfinite(g)]
    if failed:
        notes.append(f"fd: a perturbed run failed for {', '.join(failed)}; its gradient is "
                     "unknown (null)")
    return gradient, {"integrations": len(values), "backward_steps": 0,
                      "forward_seconds": None, "backward_seconds": None}
