"""Pipeline step *load*, first half: a YAML file to plain data that remembers where each key stands.

`read_yaml` composes the YAML node tree with PyYAML's safe loader and converts it itself, so every
key and value keeps its FILE:LINE:COL; every mistake in the file is a `StudyError` with a position.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import yaml

from studyrun.blocks.expr import too_large
from studyrun.core.errors import Problem, StudyError
from studyrun.core.text import number_of_digits, one_line, quote, shorten

VALUE = "<value>"  # a path suffix: the position of a key's value rather than of the key
MAX_ALIAS_GROWTH = 100_000  # aliases may add at most this many nodes (billion laughs guard)
MAX_ALIAS_TEXT = 1_000_000  # ... and at most this many characters of text (a long value repeated)
MAX_DEPTH = 100  # nesting deeper than this is a mistake, not a study
EMPTY = "the file is empty; a study needs at least model, parameters and analysis"
_MAP, _SEQ = "tag:yaml.org,2002:map", "tag:yaml.org,2002:seq"
_MERGE, _STR = "tag:yaml.org,2002:merge", "tag:yaml.org,2002:str"
_INT = "tag:yaml.org,2002:int"
_DIGITS = re.compile(r"^[-+]?(0x[0-9a-f_]+|0b[01_]+|0o?[0-7_]+|[0-9][0-9_]*)$", re.IGNORECASE)
ABSENT = object()  # a value that is not in the data at all
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml composes ~4x faster, same nodes


@dataclass
class Source:
    """Plain data read from YAML plus where each key and value stands."""

    data: Any
    positions: dict[tuple, tuple[str, int, int]]
    file: str = ""  # the file the data was read from (its top level)
    includes: dict[str, str] = field(default_factory=dict)  # key -> path of the spliced-in file

    def where(self, path: Sequence[str | int]) -> tuple[str, int | None, int | None]:
        """The deepest recorded position along `path` (walking back to the nearest ancestor)."""
        path = tuple(path)
        for end in range(len(path), -1, -1):
            if path[:end] in self.positions:
                return self.positions[path[:end]]
        return (self.file or "<study>", None, None)

    def problem(self, path: Sequence[str | int], message: str) -> Problem:
        """A Problem at `path`, with its dotted name (`cases[2].x`) and position."""
        file, line, col = self.where(path)
        return Problem(one_line(message), path=one_line(format_path(path)), file=file, line=line,
                       col=col)


def format_path(path: Sequence[str | int]) -> str:
    """`('cases', 2, 'x')` -> `cases[2].x`; the `<value>` marker is left out."""
    text = ""
    for part in path:
        if part == VALUE:
            continue
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


def sort_key(problem: Problem) -> tuple:
    """Problems in file, line, column order."""
    return (problem.file or "", problem.line or 0, problem.col or 0, problem.path)


def format_problems(problems: Sequence[Problem]) -> str:
    """One `FILE:LINE:COL: path: message` line per problem."""
    return "\n".join(str(p) for p in problems)


def describe(value: Any) -> str:
    """A value as a message shows it: 'abc' (quoted text), 5, true, a list, nothing (empty)."""
    if value is None or value is ABSENT:
        return "nothing (an empty value)"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        value = int(value)
    if isinstance(value, str):
        return quote(value, limit=60)
    if isinstance(value, int) and abs(value) > sys.float_info.max:
        return f"{number_of_digits(value, limit=60)} (numbers are floats, at most about 1.8e308)"
    return shorten(str(value), limit=60)



def read_yaml(path: Path) -> Source:
    """Read a YAML file safely into a `Source`; every mistake is a StudyError with its position.

    Mapping keys are always strings, as written (`on:` stays "on", `1:` stays "1"); values are
    what `yaml.safe_load` gives. Duplicate keys are errors, and aliases may not blow up the data.
    """
    name = str(path)
    text = _read_text(Path(path), name)
    try:
        loader = _LOADER(text)
        try:
            root = loader.get_single_node()
        finally:
            loader.dispose()
    except yaml.MarkedYAMLError as exc:
        raise StudyError([_syntax_problem(exc, name, text)]) from None
    except yaml.reader.ReaderError as exc:  # a control character YAML does not allow
        line, col = _line_col(text, exc.position)
        code = f"U+{exc.character:04X}" if isinstance(exc.character, int) else repr(exc.character)
        raise StudyError(f"not a text file (it contains the control character {code}, which YAML does "
                         "not allow)", file=name, line=line, col=col) from None
    except yaml.YAMLError as exc:  # none other is known while loading; kept as a safety net
        message = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise StudyError(f"not a valid YAML file: {message}", file=name, line=1, col=1) from None
    except RecursionError:
        raise StudyError(f"nested too deeply (more than {MAX_DEPTH} levels)",
                         file=name, line=1, col=1) from None
    if root is None or (isinstance(root, yaml.ScalarNode) and root.tag.endswith(":null") and not root.value):
        raise StudyError(EMPTY, file=name, line=1, col=1)  # nothing, or only `---`
    return _convert_document(root, loader, name)


def _read_text(path: Path, name: str) -> str:
    """The file's text, or a StudyError for a missing, unreadable or binary file."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise StudyError("file not found", file=name, line=1, col=1) from None
    except IsADirectoryError:
        raise StudyError("is a folder, not a file", file=name, line=1, col=1) from None
    except OSError as exc:
        raise StudyError(f"cannot read the file: {exc.strerror or exc}", file=name, line=1, col=1) from None
    if raw.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise StudyError("not a UTF-8 text file (it is UTF-16); save it as UTF-8 text",
                         file=name, line=1, col=1)
    if b"\x00" in raw:
        line, col = _line_col(raw, raw.index(b"\x00"))
        raise StudyError("not a text file (it contains NUL bytes); save it as UTF-8 text",
                         file=name, line=line, col=col)
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line, col = _line_col(raw, exc.start)
        raise StudyError(f"not a text file (byte 0x{raw[exc.start]:02x} is not UTF-8); save it as UTF-8 text",
                         file=name, line=line, col=col) from None
    if not text.strip():
        raise StudyError(EMPTY, file=name, line=1, col=1)
    return text


def _line_col(text: str | bytes, offset: int) -> tuple[int, int]:
    newline = "\n" if isinstance(text, str) else b"\n"
    before = text[:offset]
    return before.count(newline) + 1, offset - (before.rfind(newline) + 1) + 1


def _syntax_problem(exc: yaml.MarkedYAMLError, name: str, text: str) -> Problem:
    mark = exc.problem_mark or exc.context_mark
    line, col = (mark.line + 1, mark.column + 1) if mark is not None else (1, 1)
    message = exc.problem or exc.context or "invalid YAML"
    if exc.context and exc.problem:
        message = f"{exc.problem} ({exc.context}"
        if exc.context_mark is not None and exc.context_mark.line + 1 != line:
            message += f" at line {exc.context_mark.line + 1}"
        message += ")"
    lines = text.splitlines()
    if "'\\t'" in message or (line <= len(lines) and lines[line - 1][col - 1:col] == "\t"):
        message += "; indent with spaces, not tabs"
    return Problem(one_line(f"YAML syntax error: {message}"), file=name, line=line, col=col)


def _convert_document(root: yaml.Node, loader: yaml.SafeLoader, name: str) -> Source:
    """Check the node tree's size and shape, then convert it to a Source (or raise all problems)."""
    _check_alias_growth(root, name)
    converter = _Converter(loader, name)
    data = converter.convert(root, ())
    if not isinstance(data, dict) and not converter.problems:
        kind = "a list" if isinstance(data, list) else f"a single value ({describe(data)})"
        converter.problems.append(Problem(
            f"the top level must be a mapping of keys (model, parameters, analysis, ...); got {kind}",
            file=name, line=root.start_mark.line + 1, col=root.start_mark.column + 1))
    if converter.problems:
        raise StudyError(sorted(converter.problems, key=sort_key))
    converter.positions.setdefault((), (name, 1, 1))
    return Source(data, converter.positions, file=name)


def _check_alias_growth(root: yaml.Node, name: str) -> None:
    """Refuse recursive aliases and aliases that expand the data far beyond what is written, in
    values or in characters; the error stands at the anchored node whose repetition is too much."""
    sizes: dict[int, tuple[int, int]] = {}  # node -> (values, characters) once expanded
    busy: set[int] = set()
    added = [0, 0]  # values and characters the aliases add beyond what is written

    def fail(node: yaml.Node, message: str) -> StudyError:
        m = node.start_mark
        return StudyError(message, file=name, line=m.line + 1, col=m.column + 1)

    def size(node: yaml.Node, depth: int) -> tuple[int, int]:
        key = id(node)
        if key in sizes:  # an alias: the node's whole expansion is written again
            values, chars = sizes[key]
            added[0] += values
            added[1] += chars
            if added[0] > MAX_ALIAS_GROWTH or added[1] > MAX_ALIAS_TEXT:
                raise fail(node, alias_growth_message(values, chars))
            return values, chars
        if key in busy:
            raise fail(node, "an alias refers to a node that contains it (a recursive structure)")
        if depth > MAX_DEPTH:
            raise fail(node, f"nested too deeply (more than {MAX_DEPTH} levels)")
        busy.add(key)
        values, chars = 1, len(node.value) if isinstance(node, yaml.ScalarNode) else 0
        children = node.value if isinstance(node, yaml.SequenceNode) else \
            [n for pair in node.value for n in pair] if isinstance(node, yaml.MappingNode) else []
        for child in children:
            child_values, child_chars = size(child, depth + 1)
            values, chars = values + child_values, chars + child_chars
        busy.discard(key)
        sizes[key] = (values, chars)
        return values, chars

    size(root, 0)


def alias_growth_message(values: int, chars: int) -> str:
    """Why an alias of the node anchored here is refused (a billion-laughs guard)."""
    what = f"{values:,} value{'s' if values != 1 else ''}, {chars:,} characters"
    return (f"aliases of the value anchored here ({what}) expand "
            f"the file by more than {MAX_ALIAS_GROWTH:,} values or {MAX_ALIAS_TEXT:,} characters "
            "beyond what is written (is it an alias bomb?); write the repeated part out, or "
            "repeat it less")


class _Converter:
    """Turns a composed node tree into plain data, recording positions and collecting problems."""

    def __init__(self, loader: yaml.SafeLoader, name: str) -> None:
        self.loader, self.name = loader, name
        self.positions: dict[tuple, tuple[str, int, int]] = {}
        self.problems: list[Problem] = []

    def at(self, node: yaml.Node) -> tuple[str, int, int]:
        return (self.name, node.start_mark.line + 1, node.start_mark.column + 1)

    def fail(self, node: yaml.Node, path: tuple, message: str) -> None:
        _, line, col = self.at(node)
        self.problems.append(Problem(one_line(message), path=one_line(format_path(path)),
                                     file=self.name, line=line, col=col))

    def convert(self, node: yaml.Node, path: tuple) -> Any:
        self.positions[path + (VALUE,)] = self.at(node)
        if isinstance(node, yaml.ScalarNode):
            return self.convert_scalar(node, path)
        if isinstance(node, yaml.SequenceNode) and node.tag == _SEQ:
            items = []
            for index, child in enumerate(node.value):
                self.positions[path + (index,)] = self.at(child)
                items.append(self.convert(child, path + (index,)))
            return items
        if isinstance(node, yaml.MappingNode) and node.tag == _MAP:
            return self.convert_mapping(node, path)
        self.fail(node, path, f"unsupported YAML tag {_short_tag(node.tag)}")
        return None

    def convert_scalar(self, node: yaml.ScalarNode, path: tuple) -> Any:
        if node.tag == _STR:
            return node.value  # what SafeConstructor gives, without its overhead
        try:
            value = self.loader.construct_object(node, deep=True)
            if isinstance(value, int) and value.bit_length() > 1024:  # beyond float64
                self.fail(node, path, too_large(node.value.lstrip("+-")))
                return None
            return value
        except yaml.constructor.ConstructorError:
            if node.tag == "tag:yaml.org,2002:value":  # a bare `=`
                self.fail(node, path, f"{node.value!r} alone is not a YAML value; put it in quotes")
            else:
                self.fail(node, path, f"unsupported YAML tag {_short_tag(node.tag)}")
        except Exception:  # noqa: BLE001 - e.g. `!!int abc`: PyYAML raises ValueError and others
            if node.tag == _INT and len(node.value) > 300 and _DIGITS.match(node.value):
                # more digits than Python converts (4300)
                self.fail(node, path, too_large(node.value.lstrip("+-")))
            else:
                self.fail(node, path, f"cannot read {quote(node.value)} as {_short_tag(node.tag)}")
        return None

    def convert_mapping(self, node: yaml.MappingNode, path: tuple) -> dict:
        result: dict[str, Any] = {}
        for key_node, value_node, explicit in self.pairs(node, path):
            if not isinstance(key_node, yaml.ScalarNode):
                self.fail(key_node, path, "a key must be a plain name, not a list or a mapping")
                continue
            key = key_node.value
            if key in result:
                if explicit:
                    _, first, _ = self.positions[path + (key,)]
                    self.fail(key_node, path + (key,), f"duplicate key '{key}' (first at line {first}); "
                              "YAML would silently keep only the last one")
                continue
            self.positions[path + (key,)] = self.at(key_node)
            result[key] = self.convert(value_node, path + (key,))
        return result

    def pairs(self, node: yaml.MappingNode, path: tuple):
        """(key, value, explicit) node pairs: the mapping's own first, then `<<: *merged` ones."""
        merges: list[yaml.Node] = []
        for key_node, value_node in node.value:
            if key_node.tag == _MERGE:
                merges.extend(value_node.value if isinstance(value_node, yaml.SequenceNode) else [value_node])
            else:
                yield key_node, value_node, True
        for merged in merges:
            if isinstance(merged, yaml.MappingNode) and merged.tag == _MAP:
                yield from ((k, v, False) for k, v, _ in self.pairs(merged, path))
            else:
                self.fail(merged, path, "a merge key (<<) needs a mapping or a list of mappings")


def _short_tag(tag: str) -> str:
    prefix = "tag:yaml.org,2002:"
    return f"'!!{tag[len(prefix):]}'" if tag.startswith(prefix) else repr(tag)
