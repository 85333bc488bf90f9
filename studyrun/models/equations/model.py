"""The model spec `ode` and `stockflow` share (auxiliaries, lookups, constants, method and
tolerances), which checks itself and builds the evaluator."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

from pydantic import Field, field_validator

from studyrun.core.errors import Problem, StudyError
from studyrun.models.base import ModelSpec
from studyrun.models.equations.evaluator import EquationEvaluator
from studyrun.models.equations.lookups import LookupSpec
from studyrun.models.equations.methods import Method, normalize_method
from studyrun.models.equations.system import EquationSystem, Expression


class EquationModel(ModelSpec):
    """What `ode` and `stockflow` share: auxiliaries, lookups, constants, method and tolerances
    (so every equation model is a `HasEquations`)."""

    auxiliaries: dict[str, Expression] = {}
    lookups: dict[str, LookupSpec] = {}
    constants: dict[str, float] = {}
    method: Method = "RK45"
    rtol: float = Field(1e-6, gt=0, description="relative tolerance of adaptive solvers")
    atol: float = Field(1e-9, ge=0, description="absolute tolerance of adaptive solvers")
    runs_code_to_check: ClassVar[bool] = False

    @field_validator("method", mode="before")
    @classmethod
    def _normalize_method(cls, value: Any) -> Any:
        return normalize_method(value)

    def to_system(self) -> EquationSystem:
        raise NotImplementedError

    def spec_problems(self) -> list[Problem]:
        """Problems a subclass finds in its own keys (rates of unknown states, ...)."""
        return []

    def defaults(self) -> dict[str, float]:
        return dict(self.constants)

    def input_names(self, study_dir: Path | None = None) -> set[str] | None:
        return set(self.constants)

    def output_names(self) -> set[str] | None:
        system = self.to_system()
        return set(system.initial) | set(system.variables)

    def check(self, study_dir: Path) -> list[Problem]:
        return self.spec_problems() + self.to_system().check()

    def build(self, study_dir: Path) -> EquationEvaluator:
        problems = self.check(study_dir)
        if problems:
            raise StudyError(problems)
        return EquationEvaluator(self.to_system())

    def lookup_tables(self) -> dict[str, tuple[list[float], list[float], bool]]:
        return {k: (v.x, v.y, v.extrapolate) for k, v in self.lookups.items()}
