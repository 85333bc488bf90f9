"""reliability's results in analysis.json: pf with its interval and beta, how it converged,
(form, sorm, importance) the design point and importance factors, form's and sorm's check by
importance sampling, and ak-mcs's surrogate."""

from __future__ import annotations

from typing import Any

from studyrun.results.records import ByName, Count, Flag, Lines, Number, Numbers, Record, Text


class Round(Record):
    """A round of the estimate: the runs so far, pf and its cov (FORM: the limit state g)."""

    runs: Count | None = None
    pf: Number = None
    cov: Number = None
    g: Number = None
    population: Count | None = None
    min_u: Number = None
    misclassified: Number = None


class DesignPoint(Record):
    """The most likely failure point, in the parameters' space and the standard normal one."""

    physical: ByName = {}
    standard: ByName = {}


class Sorm(Record):
    """SORM's curvatures at the design point and pf by its formulas."""

    curvatures: Numbers = []
    breitung: Number = None
    hohenbichler_rackwitz: Number = None
    tvedt: Number = None
    form_pf: Number = None


class GradientUse(Record):
    """form, sorm, importance: how the gradients of g were had, and (adjoint, forward) how many
    were computed in-process, with how many integrations, and how many fell back to
    differences."""

    method: Text | None = None
    gradients: Count | None = None
    integrations: Count | None = None
    fallbacks: Count | None = None


class Check(Record):
    """Importance sampling around the design points that checks FORM's or SORM's pf."""

    runs: Count | None = None
    pf: Number = None
    cov: Number = None
    ci: Numbers | None = None
    design_points: Count | None = None


class Classifier(Record):
    """AK-MCS's Gaussian process at the end: the population it classified, the least U there,
    and the expected number of points it misclassifies (the sum of Phi(-U))."""

    population: Count | None = None
    min_u: Number = None
    misclassified: Number = None
    misclassified_share: Number = None


class Plane(Record):
    """Two parameters: runs to draw in their plane, each (x1, x2, g)."""

    parameters: list[str] = []
    points: list[list[Number]] = []


class ReliabilityResults(Record):
    """The probability of failure pf, beta = -Phi^-1(pf), and what the method found."""

    pf: Number = None
    pf_below: Number = None
    beta: Number = None
    cov: Number = None
    ci: Numbers | None = None
    runs: Count | None = None
    method: Text | None = None
    converged: Flag | None = None
    convergence: list[Round] = []
    design_point: DesignPoint | None = None
    design_points: list[dict[str, Any]] = []
    importance: ByName = {}
    iterations: Count | None = None
    sorm: Sorm | None = None
    form_pf: Number = None
    check: Check | None = None
    surrogate: Classifier | None = None
    plane: Plane | None = None
    dropped_runs: Count | None = None
    gradient: GradientUse | None = None
    warnings: Lines = []
    notes: Lines = []
