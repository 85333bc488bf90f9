"""FORM's gradient of the limit state by the equation model's adjoint or forward sensitivities
(`gradient: auto | adjoint | forward | differences`; docs/methods.md, "Reliability: the
probability of failure").

g is a function of quantities that are each one reduction of one model output (max(I),
final(x), integral(x) ...), so dg/dx = sum_q dg/dq dq/dx is the gradient of a weighted sum of
the outputs on the grid: one forward and one backward solve (search/gradients.py) whatever the
number of parameters. The value of g at u still comes from its run through the executor and the
store; the gradient is computed in the driver at the same point and carried to the standard
normal space by the chain rule through the Nataf transform (space.Transform.pull_back).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from studyrun.analyses.reliability.space import Failure, Transform


@dataclass
class Choice:
    """The gradient a study gets: the method used, the in-process gradient (None for
    differences), why it is not the one asked for, and what stops an explicit request."""

    method: str
    gradient: Any = None
    notes: list[str] = field(default_factory=list)
    problem: str | None = None
    smooth: bool = False  # g is smooth in the parameters: no max or min, in quantity or condition


def choose(requested: str, context: Any, condition: Failure) -> Choice:
    """The gradient for `requested` in this study (see Choice); `auto` falls back to
    differences with a note, an explicit adjoint or forward that cannot be had is a problem."""
    from studyrun.analyses.gradient.objective import EXTREMES
    from studyrun.analyses.local import exact_status
    from studyrun.analyses.search.gradients import model_gradient
    from studyrun.models.base import HasEquations

    if requested == "differences":
        return Choice("differences")
    if not isinstance(context.model, HasEquations):
        kind = getattr(context.model, "type", "unknown")
        return refused(requested, f"they need an ode or stockflow model; this one is {kind}",
                       silent=True)
    found = objectives(condition, context.quantities)
    if isinstance(found, str):
        return refused(requested, found)
    names = list(context.varied)
    constants = set(context.model.to_system().constants)
    outside = [n for n in names if n not in constants]
    if outside:
        return refused(requested, f"parameters {', '.join(map(repr, outside))} are not "
                                  "constants of the model's equations")
    slopes = slope_of_condition(condition, list(found))
    if isinstance(slopes, str):
        return refused(requested, slopes)
    slopes, kinked = slopes
    outputs = list(dict.fromkeys(o.output for o in found.values()))
    ok, why, _ = exact_status(context.model, names, outputs)
    if not ok:
        return refused(requested, why)
    gradient, used, notes = model_gradient(requested, context, names, outputs,
                                           weigh(found, slopes))
    smooth = not kinked and all(o.kind not in EXTREMES for o in found.values())
    return Choice(used, gradient, notes, smooth=smooth)


def refused(requested: str, why: str, silent: bool = False) -> Choice:
    """Differences, with a note for auto (none for a model that has no equations: differences
    are its default) or a problem for an explicit adjoint or forward."""
    if requested == "auto":
        return Choice("differences", notes=[] if silent else [
            f"adjoint gradients are not available ({why}): differences used"])
    return Choice("differences", problem=(
        f"{requested} gradients are not available: {why}. They need an ode or stockflow model "
        "whose varied parameters are constants of its equations, and a failure condition on "
        "quantities that are each one reduction of one model output (max(x), min(x), final(x), "
        "at(x, T), integral(x), mean(x)); use gradient: differences (or auto)"))


def objectives(condition: Failure, quantities: dict[str, str] | None) -> dict[str, Any] | str:
    """Each quantity of the condition as one reduction of one output, or why one is not."""
    from studyrun.analyses.gradient.objective import parse_objective

    if quantities is None:
        return "the study defines no quantities (name each one the condition uses)"
    found = {}
    for name in sorted(condition.names):
        text = quantities.get(name)
        if text is None:
            return f"{name!r} is not a quantity of the study"
        try:
            found[name] = parse_objective(str(text))
        except ValueError as error:
            return f"quantity {name!r} = {text} is not one reduction of one model output " \
                   f"({error})"
    return found


def slope_of_condition(condition: Failure, names: list[str]
                       ) -> tuple[Callable[..., list[float]], bool] | str:
    """(quantity values) -> dg/dq for each of `names`, differentiated symbolically, and whether
    g has a kink or a switch in the quantities; or why the condition cannot be differentiated."""
    import sympy as sp

    from studyrun.analyses.local.exact import NON_SMOOTH
    from studyrun.blocks.expr import ExprError, to_sympy

    symbols = {n: sp.Symbol(f"q{i}", real=True) for i, n in enumerate(names)}
    try:
        left, right = (to_sympy(side, symbols) for side in (condition.left, condition.right))
    except ExprError as error:
        return f"the failure condition cannot be differentiated ({error.message})"
    g = left - right if condition.below else right - left
    kinked = bool(g.atoms(sp.Piecewise, *(getattr(sp, k) for k in NON_SMOOTH)))
    return sp.lambdify(list(symbols.values()), [sp.diff(g, s) for s in symbols.values()],
                       modules="numpy"), kinked


def weigh(found: dict[str, Any], slopes: Callable[..., list[float]]):
    """The weights on each output's grid whose sum with the outputs has the gradient of g:
    sum over the quantities q of dg/dq times q's own weights, at this run's outputs."""
    def weights(times: np.ndarray, ys: dict[str, np.ndarray], answer: Any
                ) -> dict[str, np.ndarray]:
        own = {q: o.weights(ys[o.output], times) for q, o in found.items()}
        values = [float(own[q] @ ys[o.output]) for q, o in found.items()]
        with np.errstate(all="ignore"):
            dg = np.broadcast_to(np.asarray(slopes(*values), dtype=float), (len(found),))
        out = {o.output: np.zeros(len(times)) for o in found.values()}
        for (q, o), d in zip(found.items(), dg):
            out[o.output] += d * own[q]
        return out

    return weights


@dataclass
class ExactSlope:
    """(g, u, g(u)) -> dg/du by the in-process gradient at x(u), pulled back through the
    transform; where it fails (or is not finite) differences of runs stand in, counted."""

    gradient: Any  # search.gradients.ModelGradient
    transform: Transform
    fallback: Callable[[Any, np.ndarray, float], np.ndarray]
    failures: list[str] = field(default_factory=list)

    def __call__(self, g: Any, u: np.ndarray, at: float) -> np.ndarray:
        try:
            return self.exact(u)
        except (RuntimeError, ArithmeticError, ValueError) as error:
            self.failures.append(str(error))
            return self.fallback(g, u, at)

    def exact(self, u: np.ndarray) -> np.ndarray:
        """dg/du by the model alone (no run); ArithmeticError where it is not finite."""
        x = self.transform.to_physical(u)[0]
        slope = self.transform.pull_back(u, np.asarray(self.gradient(x, {}), dtype=float))
        if not np.isfinite(slope).all():
            raise ArithmeticError("a derivative is not finite")
        return slope

    def summary(self) -> dict[str, Any]:
        """What it computed (no seconds: results must not depend on the machine)."""
        done = self.gradient.summary()
        return {"method": done["method"], "gradients": done["gradients"],
                "integrations": done["integrations"], "fallbacks": len(self.failures)}
