"""Fields in argv elements and templates: `{name}` or `{name:spec}` (a Python format spec), and
`{{name}}` for the literal text `{name}`; every other brace is text (a JSON object, an awk
program). Parsed without evaluating anything, checked against the kind of value each name holds
(a whole number, a real number, a text), and filled in."""

from __future__ import annotations

import re
from dataclasses import dataclass

PLACEHOLDERS = ("params_file", "results_file", "workdir", "study_dir", "run_id", "seed")
MAX_WIDTH = 1000  # a field's width or precision at most: a run's file stays small
_TOKEN = re.compile(r"\{\{([A-Za-z_][A-Za-z0-9_]*(?::[^{}\n]*)?)\}\}"  # {{name}}: text
                    r"|\{([A-Za-z_][A-Za-z0-9_]*)(?::([^{}\n]*))?\}")  # {name} or {name:spec}
# Python's format-spec mini-language: [[fill]align][sign][z][#][0][width][grouping][.precision][type]
_SPEC = re.compile(r"(?:.?[<>=^])?[-+ ]?z?#?0?(?P<width>\d+)?[_,]?(?:\.(?P<precision>\d+))?"
                   r"(?P<type>[bcdeEfFgGnosxX%])?", re.DOTALL)
_SAMPLES = {"whole": 1, "real": 0.5, "text": "text"}
KINDS = {"whole": "a whole number", "real": "a real number", "text": "a text"}


@dataclass(frozen=True)
class Field:
    """`{name:spec}` at offset `at` of its text."""

    name: str
    spec: str
    at: int

    def __str__(self) -> str:
        return f"{{{self.name}{':' if self.spec else ''}{self.spec}}}"


class FieldError(ValueError):
    """A field whose format spec is malformed: the message and the offset of its brace."""

    def __init__(self, message: str, at: int) -> None:
        super().__init__(message)
        self.at = at


Parts = tuple["str | Field", ...]  # literal text and fields, in order


def parse(text: str) -> Parts:
    """The literal texts and fields of `text`; FieldError at a field whose spec is malformed."""
    parts: list[str | Field] = []
    literal, start = [], 0
    for match in _TOKEN.finditer(text):
        literal.append(text[start:match.start()])
        start = match.end()
        if match[1] is not None:
            literal.append("{" + match[1] + "}")
            continue
        parts += ["".join(literal), _field(match[2], match[3] or "", match.start())]
        literal = []
    literal.append(text[start:])
    return (*parts, "".join(literal))


def _field(name: str, spec: str, at: int) -> Field:
    field = Field(name, spec, at)
    match = _SPEC.fullmatch(spec)
    if match is None:
        raise FieldError(f"{field}: {spec!r} is not a format spec (Python's, e.g. d, .6e, "
                         f">12.4f); write {{{field}}} for the literal text {field}", at)
    for part in ("width", "precision"):
        if match[part] is not None and int(match[part]) > MAX_WIDTH:
            raise FieldError(f"{field}: a {part} of {int(match[part]):,} is more than "
                             f"{MAX_WIDTH}", at)
    return field


def fields(parts: Parts) -> list[Field]:
    return [p for p in parts if isinstance(p, Field)]


def spec_problem(field: Field, kind: str) -> str | None:
    """Why `field`'s spec cannot format a value of this kind ('whole', 'real', 'text'), or None."""
    if not field.spec:
        return None
    sample = _SAMPLES[kind]
    kind_type = _SPEC.fullmatch(field.spec)["type"]  # type: ignore[index]
    if kind == "whole" and kind_type == "c":
        why = "c writes a character, not a number"
    else:
        try:
            format(sample, field.spec)
            return None
        except ValueError as exc:
            why = str(exc)
    hint = {"real": f"write {{{field.name}}} (every digit), {{{field.name}:.6e}} or "
                    f"{{{field.name}:>12.4f}}; d is for whole numbers (an integer constant, "
                    "values: of integers)",
            "whole": f"write {{{field.name}}}, {{{field.name}:d}} or {{{field.name}:>8d}} (or "
                     f"{{{field.name}:.3f}} to write it as a real)",
            "text": f"write {{{field.name}}} or a width such as {{{field.name}:>40}}"}[kind]
    return f"{field} does not fit {field.name}, {KINDS[kind]} ({why}); {hint}"


def render(parts: Parts, values: dict[str, object]) -> str:
    """The text with every field filled in by `format(value, spec)`: a whole number stays one
    (`10`), a real number without a spec has every digit (its repr: `0.1`, `10.0`, `1e-20`)."""
    if len(parts) == 1:
        return parts[0]  # type: ignore[return-value]
    return "".join(p if isinstance(p, str) else format(values[p.name], p.spec) for p in parts)


def line_col(text: str, at: int) -> tuple[int, int]:
    """1-based line and column of offset `at` in `text`."""
    line = text.count("\n", 0, at) + 1
    return line, at - (text.rfind("\n", 0, at) + 1) + 1
