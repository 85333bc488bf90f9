"""Small Markdown builders shared by every analysis's report section, and the one way text that
studyrun did not write (names, descriptions, paths, provenance, error texts: anything read from a
study, a CSV or analysis.json) enters report.md: `escape`, `paragraphs`, `code` and `fence` make
it read as itself, never as a link, an image, HTML or a way out of a code span. `table` escapes
every text cell and header; studyrun's own Markdown passes through as a `Markdown` string.
"""

from __future__ import annotations

import re
from typing import Any, Iterable, Sequence

from studyrun.core.text import one_line, terminal_safe


class Markdown(str):
    """Text that is Markdown already, written by studyrun's own code (or escaped): `table` and the
    other builders pass it through as it is."""


# What would be Markdown or HTML anywhere in a line (CommonMark's rules and Python-Markdown's): a
# backslash before punctuation (it would escape it), code, emphasis, the `]` that ends a link's
# text or a reference's label (`escape` also escapes one that ends the text: what follows it is
# not known), a tag or an autolink, an entity; a `|` only in a table's cell (`cell`) or a text
# of several lines (`paragraphs`), where it could make one. What is text to both is left as it
# is, so ordinary text reads the same in report.md: an underscore inside a word (peak_time), a
# `*` between spaces (a * b), `[0, 1]`, `p < 0.05`.
_INLINE = re.compile(r"\\(?=[!-/:-@\[-`{-~])|`|(?<!\s)\*|\*(?!\s)|\](?=\s*[(\[]|:)"
                     r"|<(?=[A-Za-z/!?])|&(?=#?\w+;)|(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])")
_REPLACE = {"<": "&lt;", "&": "&amp;"}
# What would start a block at a line's start: a heading, a list, a quote, a fence, a rule or a
# setext line, a link reference's definition (Python-Markdown takes `[r\]: x` for one).
_BLOCK = re.compile(r"^(\s*)(?:([#=~>[]|[+-](?=\s|$)|-(?=[-\s]*$))|(\d+)([.)])(?=\s|$))")
_LEADING = {"=": "&#61;", "~": "&#126;", ">": "&gt;"}  # no backslash escapes in Python-Markdown


def escape(text: Any) -> Markdown:
    """`text` on one line, as Markdown that renders as the text itself: control characters shown
    as escapes, Markdown and HTML specials escaped."""
    line = _escape_line(one_line(str(text)))
    return Markdown(line[:-1] + "\\]") if line.endswith("]") else line  # what follows is unknown


def paragraphs(text: Any) -> Markdown:
    """Several lines of text (a description), each escaped as `escape` does, its line breaks and
    blank lines kept so that its paragraphs stay paragraphs."""
    lines = terminal_safe(str(text)).strip().splitlines()
    return Markdown("\n".join(_escape_line(line.strip()).replace("|", "\\|") for line in lines))


def _escape_line(line: str) -> Markdown:
    line = _INLINE.sub(lambda m: _REPLACE.get(m[0], "\\" + m[0]), line)
    return Markdown(_BLOCK.sub(lambda m: m[1] + (
        _LEADING.get(m[2], "\\" + m[2]) if m[2] else f"{m[3]}\\{m[4]}"), line, count=1))


def code(text: Any) -> Markdown:
    """`text` as an inline code span nothing in it can close: fenced by more backticks than it
    holds in a row. A `|` is escaped, as GitHub needs in a table (where it would split the cell)."""
    text = one_line(str(text)).replace("|", "\\|")
    if not text.strip():
        return escape(text)
    ticks = "`" * (1 + max((len(run) for run in re.findall("`+", text)), default=0))
    pad = " " if text[0] in "` " or text[-1] in "` " else ""
    return Markdown(f"{ticks}{pad}{text}{pad}{ticks}")


def fence(text: Any, info: str = "") -> Markdown:
    """`text` as a fenced code block no line of it can close."""
    text = terminal_safe(str(text)).rstrip("\n")
    ticks = "`" * max(3, 1 + max((len(run) for run in re.findall("`+", text)), default=0))
    return Markdown(f"{ticks}{info}\n{text}\n{ticks}")


def cell(value: Any, digits: int = 4) -> str:
    """A table cell or header: Markdown as it is, a number formatted, any other text escaped."""
    if isinstance(value, Markdown):
        return value
    text = _escape_line(one_line(value)) if isinstance(value, str) else format_number(value, digits)
    return text.replace("|", "\\|")  # followed by ` |`: a `]` at its end ends no link


def format_number(value: Any, digits: int = 4) -> str:
    """A number as a short, readable string; any other value as escaped text."""
    if isinstance(value, (bool, int)) or value is None:  # counts whole: 64128, not 6.413e+04
        return str(value)
    if isinstance(value, float):
        if value != value:  # NaN
            return "nan"
        return f"{value:.{digits}g}"
    return escape(value)


def table(headers: Sequence[Any], rows: Iterable[Sequence[Any]], digits: int = 4) -> str:
    """A Markdown table with numbers formatted to `digits` significant figures and every text
    escaped (but `Markdown` cells)."""
    lines = ["| " + " | ".join(cell(h) for h in headers) + " |", "|" + "---|" * len(headers)]
    for row in rows:
        lines.append("| " + " | ".join(cell(v, digits) for v in row) + " |")
    return "\n".join(lines)
