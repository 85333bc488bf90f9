"""What the typed records of analysis.json are made of: `Record` (a pydantic model that writes
its keys in the order they were given, so a file passes through it unchanged), the value types
its fields share, and the analysis types' results models, looked up by `type`.

Each analysis declares its results model as `results_model` on its class; the model types the
keys its tutorial and docs/reference/results.md name and keeps any other key as written.
"""

from __future__ import annotations

from typing import Annotated, Any, Callable

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    SerializerFunctionWrapHandler,
    ValidatorFunctionWrapHandler,
    model_serializer,
    model_validator,
)

Count = Annotated[int, Field(strict=True, ge=0, le=2**63 - 1)]
Integer = Annotated[int, Field(strict=True)]
# a number as JSON holds it: an integer stays one (written `3`, not `3.0`), null for NaN or inf;
# strict, as every model here is: true is not 1
Number = int | float | None
Flag = Annotated[bool, Field(strict=True)]
Text = Annotated[str, Field(max_length=1_000_000)]
Lines = list[Text]
ByName = dict[str, Number]  # parameter (or term, quantity) -> number
Numbers = list[Number]
Series = dict[str, Number | Numbers]  # parameter -> a number, or one a time for a series
Table = dict[str, dict[str, Number]]  # a -> b -> number (S2, a correlation matrix)


STRICT = ConfigDict(frozen=True, strict=True)  # for a RootModel of results per quantity


class Record(BaseModel):
    """A JSON object with typed keys: other keys are kept as written, and every key is written
    back where it was given (declared keys need not come first)."""

    model_config = ConfigDict(extra="allow", frozen=True, strict=True)
    _order: tuple[str, ...] = PrivateAttr(default=())

    @model_validator(mode="wrap")
    @classmethod
    def _remember_order(cls, data: Any, handler: ValidatorFunctionWrapHandler) -> Any:
        record = handler(data)
        if isinstance(data, dict) and isinstance(record, Record):
            record._order = tuple(str(key) for key in data)
        return record

    @model_serializer(mode="wrap")
    def _in_order(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        written: dict[str, Any] = handler(self)
        first = {key: written[key] for key in self._order if key in written}
        return first | {key: value for key, value in written.items() if key not in first}

    def dump(self) -> dict[str, Any]:
        """The record as JSON data: its keys as given, none it was not given."""
        return self.model_dump(mode="json", by_alias=True, exclude_unset=True)


class Precision(Record):
    """What a precision target (`until:`) adds to a quantity's entry."""

    convergence: dict[str, Any] | list[Any] | None = None
    samples_reached: Count | None = None
    target: dict[str, Any] | Text | None = None
    target_met: Flag | None = None


class Entry(Precision):
    """The keys every per-quantity entry may hold: the runs it rests on, and what to know."""

    effective_N: Count | None = None
    dropped_blocks: Count | None = None
    dropped_runs: Count | None = None
    error: Text | None = None
    warnings: Lines = Field(default_factory=list)
    notes: Lines = Field(default_factory=list)


RESULTS_MODELS: dict[str, type[BaseModel]] = {}  # analysis type -> its results model
# What makes the analysis types known (they sit above this layer): set by studyrun.commands.
load_types: Callable[[], object] | None = None


def register(kind: str, model: type[BaseModel]) -> None:
    """Note an analysis type's results model (analyses/base.py, as each type is defined)."""
    RESULTS_MODELS[kind] = model


def results_model(kind: str) -> type[BaseModel] | None:
    """The results model of an analysis type; None for a type studyrun does not know."""
    if not RESULTS_MODELS and load_types is not None:
        load_types()
    if not RESULTS_MODELS:
        raise RuntimeError("no analysis type is registered: import studyrun.study.spec first")
    return RESULTS_MODELS.get(kind)
