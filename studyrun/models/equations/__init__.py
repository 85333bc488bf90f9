"""The shared core of the `ode` and `stockflow` models (the model step of the pipeline).

Both model types reduce to one :class:`EquationSystem`: states with initial values, one
derivative per state, algebraic variables (flows and auxiliaries, evaluated in topological
order), lookups and constants. The system is checked (unknown names, circular definitions,
states without an initial value), compiled with :mod:`studyrun.blocks.expr` and integrated over a whole
batch of runs at once, each state an array of shape (n,).

Integration methods:

- ``euler`` and ``rk4``: fixed step over the whole ensemble (numpy arrays runs x states).
- ``RK45``: a vectorized Dormand-Prince 5(4) pair with scipy's RK45 semantics (same tableau,
  initial step, step-size control and quartic dense output), but with *per-member* step size and
  error norm, so a run's result does not depend on which other runs share its batch.
- ``RK23``, ``DOP853``, ``LSODA``, ``Radau``, ``BDF``: :func:`scipy.integrate.solve_ivp` once per
  member (slower, but exactly independent of the batch).

A member whose integration fails (overflow, NaN, solver failure) gets a message in
``ModelOutput.errors``; the batch goes on.

Formulas, defaults and edge cases: docs/methods.md, "Equation models: integration methods".
"""

from studyrun.models.equations.compiled import BoundSystem, CompiledSystem
from studyrun.models.equations.evaluator import (
    EquationEvaluator,
    batch_constants,
    evaluate_variables,
    transposed_all,
)
from studyrun.models.equations.fixed import fixed_steps, integrate_fixed, nonfinite_errors
from studyrun.models.equations.lookups import Lookup, LookupSpec
from studyrun.models.equations.methods import (
    FIXED_METHODS,
    METHODS,
    PER_MEMBER_METHODS,
    Method,
    normalize_method,
)
from studyrun.models.equations.model import EquationModel
from studyrun.models.equations.per_member import MAX_EVALUATIONS, integrate_each
from studyrun.models.equations.rk45 import MAX_STEPS, integrate_rk45
from studyrun.models.equations.system import RESERVED, EquationSystem, Expression, topological_order
from studyrun.models.equations.timegrid import TimeGrid, TimeSpan

__all__ = [
    "BoundSystem", "CompiledSystem", "EquationEvaluator", "EquationModel", "EquationSystem",
    "Expression", "FIXED_METHODS", "Lookup", "LookupSpec", "MAX_EVALUATIONS", "MAX_STEPS",
    "METHODS", "Method", "PER_MEMBER_METHODS", "RESERVED", "TimeGrid", "TimeSpan",
    "batch_constants", "evaluate_variables", "fixed_steps", "integrate_each", "integrate_fixed",
    "integrate_rk45", "nonfinite_errors", "normalize_method", "topological_order",
    "transposed_all",
]
