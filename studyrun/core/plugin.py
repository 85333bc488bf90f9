"""What every model and analysis type shares as a plug-in: the `type` tag a study names it by, the
check that a concrete type leaves no required hook unwritten, and the example study it is checked
with (`studyrun.testing`)."""

from __future__ import annotations

import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Mapping

FAILURES = ("drops", "refuses", "nulls", "names", "steers")


@dataclass(frozen=True)
class Example:
    """A small, fast study that shows a type at work: the blocks it gives (`analysis`; or
    `model`, `parameters`, `quantities`) replace those of `studyrun.testing`'s toy study (a
    python model of `a` and `b` in [0.1, 1], a Monte Carlo of 8 runs); `files` are written
    beside it (name -> text, or a file to copy)."""

    study: Mapping[str, Any]
    files: Mapping[str, str | Path] = field(default_factory=dict)
    # the toy's failing variant (a run raises where a > 0.9, `final` is NaN where b > 0.9), with
    # these blocks merged in, for the failed-runs check; None: not checked
    failing: Mapping[str, Any] | None = None
    # what the analysis does with failed runs: "drops" them (counted per quantity in
    # dropped_runs), "refuses" (an error entry saying why, with the count), "nulls" (a null
    # value per failed run), "names" (null sensitivities for the parameters whose runs failed,
    # named in the notes) or "steers" (an iterative fit steers away; analysis.json counts them)
    failures: Literal["drops", "refuses", "nulls", "names", "steers"] = "drops"


def type_tag(cls: type) -> str | None:
    """The `type:` a study names this class by: its `type` field's one Literal value; None for a
    base class (no such field) or a stand-in whose tag has a default (the absent model's)."""
    fields = getattr(cls, "model_fields", {})
    if "type" not in fields or not fields["type"].is_required():
        return None
    values = typing.get_args(fields["type"].annotation)
    if typing.get_origin(fields["type"].annotation) is not Literal or len(values) != 1:
        return None
    return str(values[0])


def check_complete(cls: type) -> None:
    """A type a study can name must write every required hook: TypeError when the class is
    made, not when a study first runs it."""
    missing = sorted(getattr(cls, "__abstractmethods__", ()))
    if missing and type_tag(cls) is not None:
        raise TypeError(f"{cls.__module__}.{cls.__qualname__} (type: {type_tag(cls)}) does not "
                        f"write the required hook{'s' * (len(missing) > 1)} "
                        f"{', '.join(missing)}")
