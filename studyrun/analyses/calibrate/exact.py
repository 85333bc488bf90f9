"""Exact Jacobians of the residuals of equation models (`jacobian: exact`), from the forward
sensitivity equations of the local analysis (:mod:`studyrun.analyses.local.exact`); and the
cost's gradient for lbfgsb (`gradient:`), by the adjoint or the forward sensitivities of the
cost as a weighted sum of the model's outputs on its grid (docs/methods.md, "Adjoint gradients").

The residuals at p still come from the runs on the executor; their derivatives dmod/dp come
from one integration of the model with its sensitivities, in the driver, interpolated to the
observations like the model itself and weighted like the residuals. A model that cannot be
differentiated exactly (lookups, kinks in states or parameters) falls back to finite differences
with a note.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from studyrun.analyses.calibrate.cost import CostFunction
from studyrun.analyses.search.fit import Box
from studyrun.models.base import HasEquations


def exact_jacobian(context, costs: CostFunction, box: Box) -> tuple[Callable | None, str | None]:
    """p -> J (N, m), or None and the reason when the model has no exact derivatives."""
    from studyrun.analyses.local.exact import NotDifferentiable, exact_functions, symbolic_model

    model = context.model
    if not isinstance(model, HasEquations):
        return None, "exact Jacobians need an ode or stockflow model; used forward differences"
    system = model.to_system()
    try:
        symbolic = symbolic_model(system, box.names, costs.outputs)
    except NotDifferentiable as error:
        return None, f"no exact Jacobian ({error}); used forward differences"

    def jacobian(p: np.ndarray) -> np.ndarray:
        values = {**context.fixed, **dict(zip(box.names, map(float, p)))}
        times, found = exact_functions(system, values, box.names, costs.outputs, system.rtol,
                                       system.atol, symbolic)
        return residual_jacobian(costs, times, {o: found[o][1] for o in costs.outputs})

    return jacobian, None


def residual_jacobian(costs: CostFunction, times: np.ndarray,
                      derivatives: dict[str, np.ndarray]) -> np.ndarray:
    """d(weighted, scaled residuals)/dp (N, m) from each output's dy/dp (T, m) on the grid."""
    m = next(iter(derivatives.values())).shape[1]
    J = np.empty((costs.n, m))
    for term, (i, f) in zip(costs.terms, costs.interpolation(times)):
        dy = derivatives[term.output]
        right = dy[np.minimum(i + 1, len(dy) - 1)]
        J[term.start:term.stop] = dy[i] * (1 - f)[:, None] + right * f[:, None]
    return J * (np.sqrt(costs.scales) / costs.err)[:, None]


def cost_gradient(requested: str, context, costs: CostFunction, box: Box):
    """(the in-process gradient of the cost or None for differences, {"method": used}, notes).
    cost = sum_i r_i^2 with r_i = c_i (the model at x_i - obs_i), c_i = sqrt(scale_i) / err_i,
    the model linearly interpolated between grid points: d cost/dp is the gradient of the
    weighted sum of outputs with 2 r_i c_i shared between the two grid points around x_i."""
    from studyrun.analyses.search.gradients import model_gradient

    factor = np.sqrt(costs.scales) / costs.err

    def weigh(times: np.ndarray, ys: dict, answer: dict) -> dict[str, np.ndarray]:
        share = 2 * answer["vector"] * factor
        found = {o: np.zeros(len(times)) for o in costs.outputs}
        for term, (i, f) in zip(costs.terms, costs.interpolation(times)):
            part = share[term.start:term.stop]
            np.add.at(found[term.output], i, part * (1 - f))
            np.add.at(found[term.output], np.minimum(i + 1, len(times) - 1), part * f)
        return found

    gradient, method, notes = model_gradient(requested, context, box.names, costs.outputs, weigh)
    return gradient, {"method": method}, notes
