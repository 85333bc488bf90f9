"""The one reader of a results folder's analysis.json: a folder from elsewhere is data, so its
file is read within bounds (size, nesting, digits) and checked against a typed model of what
`studyrun run` writes before any command looks inside it.

Whatever is wrong is one `StudyError`: "FOLDER: not a studyrun results folder: WHAT".
"""

from __future__ import annotations

import hashlib
import json
import math
import sys
from pathlib import Path
from typing import Annotated, Any

from pydantic import (
    Field,
    ValidationError,
    ValidationInfo,
    ValidatorFunctionWrapHandler,
    field_validator,
)
from pydantic_core import PydanticCustomError

from studyrun.core.errors import StudyError
from studyrun.core.text import one_line, shorten
from studyrun.results.records import Count, Lines, Record, results_model

MAX_BYTES = 256 * 2**20  # a study's analysis.json is kilobytes to a few megabytes
MAX_DEPTH = 64  # studyrun nests a dozen levels at most; json and the readers recurse
MAX_INT_BITS = 1023  # an integer that a float can hold: diff and the reports compute with floats

Text = Annotated[str, Field(max_length=10_000)]
Path_ = Annotated[str, Field(max_length=4096, pattern=r"^[^\x00]*$")]


class Runs(Record):
    """`runs`: how many runs the results rest on (every entry a count)."""

    __pydantic_extra__: dict[str, Count] = Field(init=False)

    planned: Count  # distinct runs
    succeeded: Count
    failed: Count
    reused: Count = 0  # computed by an earlier session (or adopted from analysis.from)
    evaluated: Count | None = None  # iterative: points asked for, repeats counted
    executed: Count | None = None  # computed in this session
    given: Count | None = None  # read from a file (analysis.from)
    adopted: Count | None = None  # copied from an earlier folder's store


class Execution(Record):
    """`execution`: where the runs went and what happened there."""

    scheduler: Text = "none"
    batch_size: Count | None = None  # fixed designs
    executed: Count = 0
    notes: Lines = Field(default_factory=list)


class Provenance(Record):
    """`provenance`: what the results rest on; the study file typed for the readers that open it."""

    studyrun: Text | None = None
    python: Text | None = None
    packages: dict[str, Text | None] = Field(default_factory=dict)
    study_file: Path_ | None = None
    study_sha256: Text | None = None
    git: dict[str, Any] | None = None
    seed: Count | None = None
    started: Text | None = None
    finished: Text | None = None
    builds_on: dict[str, Any] | None = None  # calibrate: the earlier calibration it started from
    given: dict[str, Any] | None = None  # the runs read from a file


class AnalysisFile(Record):
    """analysis.json (docs/reference/results.md; schemas/analysis.schema.json): written through
    this model and read through it; `results` is checked against its analysis type's model."""

    study: Text
    analysis: Text
    runs: Runs
    results: Any  # the analysis type's results model (an object), checked by _typed below
    design: dict[str, Any] | None = None  # fixed designs: what the design was
    execution: Execution = Field(default_factory=Execution)
    warnings: Lines = Field(default_factory=list)
    provenance: Provenance = Field(default_factory=Provenance)
    study_yaml_sha256: Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")] | None = None

    @field_validator("analysis")
    @classmethod
    def _known(cls, kind: str) -> str:
        if results_model(kind) is None:
            raise PydanticCustomError("analysis_type", "is not an analysis type studyrun knows")
        return kind

    @field_validator("results", mode="wrap")
    @classmethod
    def _typed(cls, value: Any, handler: ValidatorFunctionWrapHandler,
               info: ValidationInfo) -> Any:
        """The analysis type's own results model (records.results_model) checks `results`."""
        model = results_model(info.data["analysis"]) if "analysis" in info.data else None
        return handler(value) if model is None else model.model_validate(value)

    def text(self) -> str:
        """The file's text: indented JSON, numbers as written (never NaN), one line at the end."""
        return json.dumps(self.dump(), indent=2, allow_nan=False) + "\n"


class Malformed(ValueError):
    """What a reader deeper in analysis.json (a stored surrogate, a response surface) found
    wrong: its key path and what; the command turns it into `not_results`."""


def not_results(folder: Path, what: str) -> StudyError:
    """The error for a folder whose analysis.json is not what studyrun writes."""
    return StudyError(f"{folder}: not a studyrun results folder: {one_line(what)}; run its "
                      "study again to write its results anew")


def parse(folder: Path) -> tuple[dict[str, Any], str]:
    """The folder's analysis.json, read within the bounds above and checked against
    AnalysisFile, its `results` against its analysis type's model: the content as read (a dict,
    for the readers that look further in) and the sha256 of its bytes."""
    path = Path(folder) / "analysis.json"
    with open(path, "rb") as handle:
        raw = handle.read(MAX_BYTES + 1)
    if len(raw) > MAX_BYTES:
        raise not_results(folder, f"analysis.json is larger than {MAX_BYTES // 2**20} MiB, the "
                                  "most studyrun reads")
    try:
        data = json.loads(raw)
    except RecursionError:
        data = None
        deep = True
    except ValueError as error:  # bad JSON or UTF-8, or an integer of more than 4,300 digits
        what = (f"holds an integer of more than {sys.get_int_max_str_digits():,} digits"
                if "integer string conversion" in str(error) else f"is not JSON ({error})")
        raise not_results(folder, f"analysis.json {what}") from None
    else:
        deep = False
    if deep:
        raise not_results(folder, f"analysis.json nests deeper than {MAX_DEPTH} levels")
    problem = bounds_problem(data)
    if problem:
        raise not_results(folder, f"analysis.json: {problem}")
    try:
        AnalysisFile.model_validate(data)
    except ValidationError as error:
        raise not_results(folder, f"analysis.json: {first_error(error)}") from None
    return data, hashlib.sha256(raw).hexdigest()


def bounds_problem(data: Any) -> str | None:
    """What makes a parsed document too deep or a number too large to compute with, if
    anything (walked without recursion)."""
    stack = [(data, 1, "")]
    while stack:
        value, depth, where = stack.pop()
        if depth > MAX_DEPTH:
            return f"{shorten(where, 80)} nests deeper than {MAX_DEPTH} levels"
        if isinstance(value, dict):
            stack += [(item, depth + 1, f"{where}.{key}" if where else str(key))
                      for key, item in value.items()]
        elif isinstance(value, list):
            stack += [(item, depth + 1, f"{where}.{i}" if where else str(i))
                      for i, item in enumerate(value)]
        elif isinstance(value, int) and not isinstance(value, bool) \
                and value.bit_length() > MAX_INT_BITS:
            return (f"{shorten(where, 80)} is an integer of about "
                    f"{math.floor(value.bit_length() * math.log10(2)) + 1:,} digits; at most "
                    "308 digits (what a float holds)")
    return None


MUST = {"dict_type": "must be an object", "model_type": "must be an object",
        "model_attributes_type": "must be an object", "list_type": "must be a list",
        "string_type": "must be a string", "int_type": "must be an integer",
        "bool_type": "must be true or false", "float_type": "must be a number",
        "analysis_type": "is not an analysis type studyrun knows",
        "int_from_float": "must be an integer", "missing": "is missing"}
KINDS = {dict: "an object", list: "a list", str: "a string", bool: "true or false",
         type(None): "null", int: "an integer", float: "a number"}


def first_error(error: ValidationError) -> str:
    """The first mismatch with the model: its key path, what it must be and what it is (of a
    value that may take one of several types, each of them)."""
    errors = error.errors(include_url=False)
    first = errors[0]
    loc = first["loc"]
    members = [e for e in errors if e["loc"] and e["loc"][:-1] == loc[:-1]
               and e["input"] is first["input"] and isinstance(e["loc"][-1], str)
               and e["loc"][-1].split("[")[0] in TAGS]
    if len(members) > 1 and members[0] is first:
        loc = loc[:-1]  # a union's members, each named by its type at the end of the path
        kinds = dict.fromkeys(member(str(e["loc"][-1])) for e in members)
        if "a number" in kinds:
            kinds.pop("an integer", None)
        must = "must be " + " or ".join(kinds)
    else:
        must = MUST.get(first["type"], first["msg"].replace("Input should", "must"))
    path = ".".join(str(part) for part in loc)
    where = f"`{shorten(path, 80)}`" if path else "the document"
    if first["type"] == "missing":
        return f"{where} is missing"
    found = KINDS.get(type(first.get("input")), "a value")
    return f"{where} {must}; found {found}"


TAGS = {"int": "an integer", "float": "a number", "none": "null", "str": "a string",
        "bool": "true or false", "list": "a list", "dict": "an object"}  # a union's members


def member(tag: str) -> str:
    """A union member as pydantic tags it at the end of an error's path (`int`, `list[...]`),
    in words."""
    return TAGS[tag.split("[")[0]]
