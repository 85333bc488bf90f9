"""Local sensitivity and identifiability of dynamic models (plan and analyse steps): FME's
sensFun and collin (Soetaert and Petzoldt 2010; Brun et al. 2001), reduced-partition
coefficients and the agreement of rankings (docs/methods.md, "Local sensitivity functions" and
the four sections after it).

Design: the nominal point (each parameter's `nominal`, else the model's own value, else its
median), then p + h_j e_j for every parameter, then p - h_j e_j for central differences
(h_j = delta |p_j|, or delta where p_j is 0): 2m + 1 runs, m + 1 for forward differences, one
for `exact` alone. Adaptive solvers of `ode` and `stockflow` models get rtol = delta * 1e-6
(atol in proportion) unless `solver_rtol` says otherwise, so that differences are not solver
noise. `exact` integrates the forward sensitivity equations in-process (exact.py) and falls back
to central differences, saying why, where the equations are not differentiable.

Results (analysis.json `results`), keyed by output: per parameter `L1`, `L2`, `mean`, `min`,
`max` of the normalised S = (p / y) dy/dp over the output grid, `ranking` (by L1), `points`,
`excluded_points` (y = 0), `method`, and `functions` (time and S per parameter). Besides the
outputs, whose names may therefore not be any of these: `ranking` (L1 summed over outputs),
`collinearity` (collinearity.py), `partition` (partition.py), `agreement` (agreement.py: each
compared method and the partitions against the full grid), `quantities` (each quantity's
`value`, `derivative` dq/dp, `normalised` (p / q) dq/dp and `ranking`, by differences) and
`notes`.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PositiveFloat,
    PositiveInt,
    field_validator,
)

from studyrun.analyses.base import FixedDesignAnalysis, StudyContext
from studyrun.analyses.local.collinearity import MAX_SUBSETS, subset_count
from studyrun.analyses.local.records import LocalResults
from studyrun.analyses.local.sensitivity import difference_rows, perturbation_steps
from studyrun.core.design import Design, Outcome
from studyrun.core.errors import Problem
from studyrun.core.plugin import Example

if TYPE_CHECKING:
    from studyrun.results.report.figures import Figures

Method = Literal["central", "forward", "exact"]
RESERVED = ("ranking", "collinearity", "partition", "agreement", "quantities", "notes")
RTOL_PER_DELTA = 1e-6  # auto solver rtol = delta * this
RTOL_FLOOR = 1e-13


class PartitionSpec(BaseModel):
    """Coefficients on fewer trajectory points (docs/methods.md,
    "Reduced-partition sensitivity coefficients")."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    intervals: PositiveInt = Field(4, description="intervals of the first uniform partition "
                                                  "(Algorithm 1), doubled until it settles")
    tolerance: PositiveFloat = Field(0.05, description="Algorithm 1 stops when no coefficient "
                                                       "changes by more than this (relative)")
    radius: PositiveFloat = Field(0.05, description="Algorithm 2's clustering tolerance: max-norm "
                                  "of differences relative to each coordinate's range")
    scale: Literal["relative", "absolute"] = Field(
        "relative", description="relative: p_j df/dp_j, comparable across units; absolute: "
                                "df/dp_j as the dissertation writes it")


class Local(FixedDesignAnalysis):
    """`analysis: {type: local}`: sensitivity functions, their summaries and identifiability."""

    type: Literal["local"]
    tutorial = "Local sensitivity"
    example = Example({"analysis": {"type": "local", "outputs": ["y"]}},
                      failing={"parameters": {"a": {"nominal": 0.9}}},
                      failures="names")
    results_model = LocalResults
    outputs: list[str] = Field(min_length=1, description="the model's time series to study")
    method: Method = Field("central", description="central | forward differences, or exact "
                           "(forward sensitivity equations; ode and stockflow models)")
    compare: list[Method] = Field(default_factory=list, description="other methods to compute "
                                  "and compare with (agreement of rankings, largest differences)")
    delta: float = Field(1e-4, gt=0, lt=1, description="relative perturbation of each parameter")
    solver_rtol: PositiveFloat | Literal["auto"] = Field(
        "auto", description="rtol of an adaptive solver for these runs; auto: delta * 1e-6 "
                            "when the model's own is looser (atol scaled alike)")
    output_scale: dict[str, PositiveFloat] = Field(
        default_factory=dict, description="output -> a fixed scale to divide by instead of y(t) "
                                          "(FME's varscale), for outputs that cross zero")
    collinearity_max: int | None = Field(None, ge=2, description="largest subset size for the "
                                         "collinearity index (default: every size)")
    threshold: PositiveFloat = Field(20.0, description="collinearity index above which a subset "
                                                       "is poorly identifiable")
    top: PositiveInt | None = Field(None, description="interval of top positions for the "
                                    "interval-coincidence coefficient (default: half the parameters)")
    partition: PartitionSpec | Literal[False] = Field(
        default_factory=PartitionSpec, description="coefficients on fewer trajectory points "
                                                   "(ode and stockflow models); false to skip")

    @field_validator("outputs")
    @classmethod
    def _outputs_unique(cls, value: list[str]) -> list[str]:
        twice = sorted({v for v in value if value.count(v) > 1})
        if twice:
            raise ValueError(f"each output once; got {', '.join(twice)} more than once")
        return value

    def model_for(self, model: Any) -> tuple[Any, list[str]]:
        """The model with an adaptive solver tightened for differences, and a note saying so."""
        model, note = tighten(model, self.delta, self.solver_rtol)
        return model, [note] if note else []

    def check(self, context: StudyContext) -> list[Problem]:
        parameters = context.varied
        problems = [] if parameters else [Problem(
            "local needs at least one varied parameter; give it a distribution or bounds "
            "(its nominal value is the model's own unless `nominal:` says otherwise)", "type")]
        try:
            known = context.model.output_names()
        except Exception:  # an invalid model: its own check reports it
            known = None
        for i, name in enumerate(self.outputs):
            if name in RESERVED:
                problems.append(Problem(f"an output cannot be called {name!r} here (the results "
                                        f"use {', '.join(RESERVED)})", f"outputs[{i}]"))
            elif known is not None and name not in known:
                from studyrun.core.text import suggest

                problems.append(Problem(f"the model has no output {name!r}{suggest(name, known)}"
                                        f" (outputs: {', '.join(sorted(known))})", f"outputs[{i}]"))
        problems += [Problem(f"{name!r} is not one of the outputs", f"output_scale.{name}")
                     for name in self.output_scale if name not in self.outputs]
        if subset_count(len(parameters), self.collinearity_max) > MAX_SUBSETS:
            problems.append(Problem(f"{subset_count(len(parameters), self.collinearity_max)} "
                                    f"parameter subsets are too many (at most {MAX_SUBSETS}); "
                                    f"set collinearity_max (try 4)", "collinearity_max"))
        return problems

    def needs_series(self, context: StudyContext) -> list[str]:
        return list(self.outputs)

    def methods(self, names: list[str], model: Any) -> tuple[list[str], list[str]]:
        """The methods computed, the primary first, with `exact` replaced where it cannot be."""
        wanted = list(dict.fromkeys([self.method, *self.compare]))
        ok, reason, _ = exact_status(model, names, self.outputs) if "exact" in wanted \
            else (True, "", None)
        if ok:
            return wanted, []
        if self.method == "exact":
            wanted[0] = "central"
            note = f"exact sensitivities are not available ({reason}); central differences used"
        else:
            note = f"exact sensitivities are not available ({reason}); not compared"
        return list(dict.fromkeys(m for m in wanted if m != "exact")), [note]

    def design(self, context: StudyContext, seed: np.random.SeedSequence) -> Design:
        """The nominal point, then the perturbed points the difference methods need."""
        names = list(context.varied)
        nominal = np.array([context.nominal(n) for n in names], dtype=float)
        steps = perturbation_steps(nominal, self.delta)
        methods, notes = self.methods(names, context.model)
        central, differences = "central" in methods, bool({"central", "forward"} & set(methods))
        matrix = difference_rows(nominal, steps, central) if differences else nominal[None, :]
        info = {"method": methods[0], "methods": methods, "delta": self.delta,
                "nominal": dict(zip(names, nominal.tolist())),
                "steps": dict(zip(names, steps.tolist())), "central": central,
                "notes": [*context.notes, *notes]}
        return Design(names, matrix, info)

    def analyse(self, outcome: Outcome, context: StudyContext) -> dict[str, Any]:
        from studyrun.analyses.local.results import analyse_local

        names = outcome.design.names
        symbolic = exact_status(context.model, names, self.outputs)[2] \
            if "exact" in outcome.design.info["methods"] else None
        values = {**context.defaults, **{n: context.nominal(n) for n in context.parameters}}
        return analyse_local(self, outcome, context.model, values, symbolic)

    def report(self, analysis: dict[str, Any], outcome: Outcome | None, figures: "Figures") -> str:
        from studyrun.analyses.local.report import write_report

        return write_report(analysis, figures)


def tighten(model: Any, delta: float, solver_rtol: float | str) -> tuple[Any, str | None]:
    """The model with an adaptive solver's tolerances fit for differences, and a note."""
    from studyrun.models.base import HasEquations
    from studyrun.models.equations import FIXED_METHODS

    if not isinstance(model, HasEquations):
        return model, (f"differences of a {getattr(model, 'type', '')} model are only as "
                       f"accurate as its own computation: an adaptive solver inside it needs a "
                       f"relative tolerance far below delta ({delta:g})")
    if model.method in FIXED_METHODS:
        return model, None
    rtol = max(min(model.rtol, delta * RTOL_PER_DELTA), RTOL_FLOOR) \
        if solver_rtol == "auto" else float(solver_rtol)
    if math.isclose(rtol, model.rtol, rel_tol=1e-12):
        return model, None
    atol = model.atol * rtol / model.rtol
    note = (f"the {model.method} solver ran at rtol={rtol:g}, atol={atol:g} (the model's own: "
            f"rtol={model.rtol:g}, atol={model.atol:g}) so that differences with a relative "
            f"step of {delta:g} are not solver noise")
    return model.model_copy(update={"rtol": rtol, "atol": atol}), note


_EXACT: dict[tuple, tuple[bool, str, Any]] = {}  # (model, parameters, outputs) -> find_exact_status's
_EXACT_KEPT = 8


def exact_status(model: Any, names: list[str], outputs: list[str]) -> tuple[bool, str, Any]:
    """find_exact_status, once per model, parameters and outputs: differentiating a model
    symbolically is slow, and design and analyse both ask."""
    key = (model.model_dump_json(), tuple(names), tuple(outputs))
    if key not in _EXACT:
        found = find_exact_status(model, names, outputs)
        while len(_EXACT) >= _EXACT_KEPT:
            _EXACT.pop(next(iter(_EXACT)))
        _EXACT[key] = found
    return _EXACT[key]


def find_exact_status(model: Any, names: list[str], outputs: list[str]
                      ) -> tuple[bool, str, Any]:
    """(True, '', the differentiated model) when the model's equations can be differentiated
    exactly, else (False, the reason, None)."""
    from studyrun.models.base import HasEquations

    if not isinstance(model, HasEquations):
        kind = getattr(model, "type", "unknown")
        return False, f"they need an ode or stockflow model; this one is {kind}", None
    from studyrun.analyses.local.exact import NotDifferentiable, symbolic_model

    try:
        return True, "", symbolic_model(model.to_system(), names, outputs)
    except NotDifferentiable as error:
        return False, str(error), None
    except Exception as error:  # sympy cannot handle it: say so, use differences
        return False, f"{type(error).__name__}: {error}", None
