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

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from studyrun.core.errors import StudyError
from studyrun.core.text import one_line, shorten

MAX_BYTES = 256 * 2**20  # a study's analysis.json is kilobytes to a few megabytes
MAX_DEPTH = 64  # studyrun nests a dozen levels at most; json and the readers recurse
MAX_INT_BITS = 1023  # an integer that a float can hold: diff and the reports compute with floats

Count = Annotated[int, Field(strict=True, ge=0, le=2**63 - 1)]
Text = Annotated[str, Field(max_length=10_000)]


class Runs(BaseModel):
    """`runs`: how many runs the results rest on (every entry a count)."""

    model_config = ConfigDict(extra="allow", frozen=True)
    __pydantic_extra__: dict[str, Count]

    planned: Count
    succeeded: Count
    failed: Count
    reused: Count = 0


class Provenance(BaseModel):
    """`provenance`: what a reader takes from it typed; the rest as written."""

    model_config = ConfigDict(extra="allow", frozen=True)

    study_file: Annotated[str, Field(max_length=4096, pattern=r"^[^\x00]*$")] | None = None


class AnalysisFile(BaseModel):
    """analysis.json as `studyrun run` writes it (docs/reference/results.md); `results` is the
    analysis's own, each reader checks what it takes from there."""

    model_config = ConfigDict(extra="allow", frozen=True)

    study: Text
    analysis: Text
    runs: Runs
    results: dict[str, Any]
    design: dict[str, Any] | None = None
    execution: dict[str, Any] = Field(default_factory=dict)
    warnings: list[str] = Field(default_factory=list)
    provenance: Provenance = Field(default_factory=Provenance)
    study_yaml_sha256: Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")] | None = None


class Malformed(ValueError):
    """What a reader deeper in analysis.json (a stored surrogate, a response surface) found
    wrong: its key path and what; the command turns it into `not_results`."""


def not_results(folder: Path, what: str) -> StudyError:
    """The error for a folder whose analysis.json is not what studyrun writes."""
    return StudyError(f"{folder}: not a studyrun results folder: {one_line(what)}; run its "
                      "study again to write its results anew")


def parse(folder: Path) -> tuple[dict[str, Any], str]:
    """The folder's analysis.json, read within the bounds above and checked against
    AnalysisFile: the content as read (a dict, for the readers that look further in) and the
    sha256 of its bytes."""
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
        "int_from_float": "must be an integer", "missing": "is missing"}
KINDS = {dict: "an object", list: "a list", str: "a string", bool: "true or false",
         type(None): "null", int: "an integer", float: "a number"}


def first_error(error: ValidationError) -> str:
    """The first mismatch with the model: its key path, what it must be and what it is."""
    first = error.errors(include_url=False)[0]
    path = ".".join(str(part) for part in first["loc"])
    where = f"`{shorten(path, 80)}`" if path else "the document"
    if first["type"] == "missing":
        return f"{where} is missing"
    found = KINDS.get(type(first.get("input")), "a value")
    must = MUST.get(first["type"], first["msg"].replace("Input should", "must"))
    return f"{where} {must}; found {found}"
