"""reliability's results in analysis.json: pf with its interval and beta, how it converged, and
(form, sorm, importance) the design point and importance factors."""

from __future__ import annotations

from typing import Any

from studyrun.results.records import ByName, Count, Flag, Lines, Number, Numbers, Record, Text


class Round(Record):
    """A round of the estimate: the runs so far, pf and its cov (FORM: the limit state g)."""

    runs: Count | None = None
    pf: Number = None
    cov: Number = None
    g: Number = None


class DesignPoint(Record):
    """The most likely failure point, in the parameters' space and the standard normal one."""

    physical: ByName = {}
    standard: ByName = {}


class Sorm(Record):
    """SORM's curvatures at the design point and pf by its formulas."""

    curvatures: Numbers = []
    breitung: Number = None
    hohenbichler_rackwitz: Number = None
    form_pf: Number = None


class GradientUse(Record):
    """form, sorm, importance: how the gradients of g were had, and (adjoint, forward) how many
    were computed in-process, with how many integrations, and how many fell back to
    differences."""

    method: Text | None = None
    gradients: Count | None = None
    integrations: Count | None = None
    fallbacks: Count | None = None


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
    dropped_runs: Count | None = None
    gradient: GradientUse | None = None
    warnings: Lines = []
    notes: Lines = []
