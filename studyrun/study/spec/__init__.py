"""The load step's result: the `Study` model and its unions (`execution` holds the execution
block, `checks` the checks that span sections).

The unions are the registry's types (`registry.py`): a new type is found there, not added here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Union

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    NonNegativeInt,
    ValidationInfo,
    field_validator,
    model_validator,
)

from studyrun.analyses.base import AnalysisSpec
from studyrun.blocks.params import ParameterSpec
from studyrun.models.absent import NoModel
from studyrun.models.base import ModelSpec
from studyrun.study.spec.execution import Execution
from studyrun.study.spec.registry import registry

if TYPE_CHECKING:  # what a checker knows of a member: its base
    ModelUnion = ModelSpec
    AnalysisUnion = AnalysisSpec
else:
    ModelUnion = Annotated[Union[tuple(registry().models.values())], Field(discriminator="type")]
    AnalysisUnion = Annotated[Union[tuple(registry().analyses.values())],
                              Field(discriminator="type")]


class Study(BaseModel):
    """A whole study file."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$", max_length=200,
                      description="identifier; results go to results/<name>/")
    description: str = ""
    seed: NonNegativeInt = Field(0, description="every random choice derives from this")
    model: ModelUnion | None = Field(
        None, description="what makes the runs; may be left out when analysis.from gives them")
    parameters: dict[str, ParameterSpec] = Field(default_factory=dict)
    quantities: dict[str, str] | None = Field(
        None, description="name -> expression; without it every scalar output is a quantity")
    correlation: list[tuple[str, str, Annotated[float, Field(allow_inf_nan=False)]]] = Field(
        default_factory=list, description="[a, b, r] triples: the correlation r of parameters a "
        "and b's normal scores (a Gaussian copula); unlisted pairs are independent")
    analysis: AnalysisUnion
    execution: Execution = Field(default_factory=Execution)

    @property
    def model_spec(self) -> ModelSpec:
        """The model, or the stand-in of a study whose runs are all given."""
        return self.model if self.model is not None else NoModel()

    @model_validator(mode="before")
    @classmethod
    def _names_in_study(cls, data, info: ValidationInfo):
        """The names of the model type's variables as the study knows them (its
        `names_in_study`: a pysd model's one name however Vensim or PySD writes it); the
        validation context says where the study's files are (`study_dir`) and whether a model
        file may be translated to learn its names (`translate`)."""
        model = data.get("model") if isinstance(data, dict) else None
        kind = model.get("type") if isinstance(model, dict) else None
        found = registry().models.get(kind) if isinstance(kind, str) else None
        return data if found is None else found.names_in_study(data, info.context or {})

    @field_validator("quantities", mode="before")
    @classmethod
    def _quantities_as_text(cls, value):
        if isinstance(value, dict):
            return {k: str(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else v
                    for k, v in value.items()}
        return value
