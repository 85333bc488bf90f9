"""The model plug-in point: a model spec validates its YAML and builds a batch evaluator.

A model evaluates a *batch* of runs at once (see core/batch.py for what it returns). Per-run
models loop inside the batch; vectorized models take the batch whole. No per-run Python objects
travel on the hot path. `build()` is abstract: a type without it is a TypeError when its class is
made.
"""

from __future__ import annotations

from abc import abstractmethod
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict

from studyrun.core.batch import Evaluator
from studyrun.core.errors import Problem
from studyrun.core.plugin import Example, check_complete

if TYPE_CHECKING:
    from studyrun.models.equations.system import EquationSystem


class ModelSpec(BaseModel):
    """Base of every `model:` block. Subclasses add `type: Literal[...]` and their own keys."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    # check() or dependencies() may run the study's code (a python model imports its module,
    # PySD loads its model); a model that only reads its files says False. `studyrun diff --rev`
    # without --results leaves such a check out and asks static_dependencies() instead.
    runs_code_to_check: ClassVar[bool] = True
    example: ClassVar[Example | None] = None  # the study studyrun.testing checks it with

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        check_complete(cls)

    @classmethod
    def names_in_study(cls, data: dict[str, Any], context: dict[str, Any]) -> dict[str, Any]:
        """The study file's data (before validation) with the names of this type's variables as
        the study knows them (pysd: one name however Vensim or PySD writes it); by default as
        written. `context`: `study_dir` (where its files are, when known) and `translate`
        (whether a model file may be read with the model's own tools)."""
        return data

    def defaults(self) -> dict[str, float]:
        """The model's own values of its inputs (constants), used when a study does not vary them."""
        return {}

    def input_names(self, study_dir: Path | None = None) -> set[str] | None:
        """The inputs the model accepts, or None when any name is allowed (python, command)."""
        return None

    def output_names(self) -> set[str] | None:
        """The outputs the model is known to produce, or None when only a run can tell."""
        return None

    def check(self, study_dir: Path) -> list[Problem]:
        """Problems found beyond the schema (an unimportable function, a missing file).

        Paths in the returned problems are relative to the `model` block (e.g. "function").
        """
        return []

    def with_whole_numbers(self, names: set[str]) -> "ModelSpec":
        """The model told which inputs the study gives as whole numbers (an integer constant,
        `values:` of integers), for a model that writes its inputs as text; itself by default."""
        return self

    def check_inputs(self, study_dir: Path, parameters: list[str],
                     varied: list[str]) -> list[Problem]:
        """Problems of the model against the study's parameters (a field naming none, a varied
        parameter the model never reads); paths are the study's (`parameters.x`, `model.run`)."""
        return []

    def dependencies(self, study_dir: Path) -> dict[str, Path]:
        """Files the runs read beyond the spec (name in a run's identity -> path): their content
        is part of every run's identity, so editing one re-runs the study."""
        return {}

    def static_dependencies(self, study_dir: Path) -> dict[str, Path]:
        """dependencies() as far as they are found without running any of the study's code:
        all of them for a model whose check runs none, none unless a model knows better."""
        return {} if self.runs_code_to_check else self.dependencies(study_dir)

    def uses_seed(self, study_dir: Path, run_code: bool = True) -> bool:
        """Whether runs draw random numbers from their seed (core/seeds.py): then the study's
        `seed` is part of every run's identity, so a new seed makes new runs. Without
        `run_code`, answered without running any of the study's code (`diff --rev`)."""
        return False

    def packages(self) -> tuple[str, ...]:
        """Distributions the runs rest on beyond studyrun's own (their versions go in the
        provenance)."""
        return ()

    def with_timeout(self, seconds: float) -> "ModelSpec":
        """The model with `execution.timeout` as its time limit per run where it sets none of
        its own; itself when it has no time limit."""
        return self

    @abstractmethod
    def build(self, study_dir: Path) -> Evaluator:
        """The evaluator for this model; cheap, picklable, imports lazily where it runs."""


@runtime_checkable
class HasEquations(Protocol):
    """A model given by equations (`ode`, `stockflow`): analyses that differentiate or integrate
    it themselves read its system, its method and tolerances. Test with isinstance."""

    method: str
    rtol: float
    atol: float

    def to_system(self) -> "EquationSystem": ...
