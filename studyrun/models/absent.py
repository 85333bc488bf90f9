"""The model of a study that has none: its runs are given (`analysis.from:`), so none is made."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar, Literal

from studyrun.core.batch import Evaluator, ModelOutput, RunContext
from studyrun.models.base import ModelSpec

NO_MODEL = ("the study has no model: its runs are given (analysis.from); add a model: block to "
            "make new runs")


class NoModel(ModelSpec):
    """`model:` left out: any parameter and quantity names are allowed (the given columns)."""

    type: Literal["none"] = "none"
    runs_code_to_check: ClassVar[bool] = False

    def build(self, study_dir: Path) -> Evaluator:
        return NoRuns()


class NoRuns(Evaluator):
    """Fails every run it is asked for, saying why."""

    def __call__(self, inputs: dict, context: RunContext) -> ModelOutput:
        n = len(context.run_ids)
        return ModelOutput(n=n, errors=[NO_MODEL] * n)
