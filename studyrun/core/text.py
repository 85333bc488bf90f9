"""Text from a study or a model made safe to print: no terminal control, no endless values.

A model's stderr or a study's value may hold escape sequences (ESC [2J clears the screen, OSC 0
sets the window title), line breaks that would split a FILE:LINE:COL line, or 5,000 digits;
`terminal_safe` and `one_line` show control characters as escapes (\\x1b), `encodable` lone
surrogates, `shorten` and `cut_values` shorten long values to their start and their length.
"""

from __future__ import annotations

import difflib
import re
import sys
from typing import Iterable

LIMIT = 80  # a value longer than this is cut in a message
WORD_LIMIT = 200  # an unquoted run without spaces (a path, a key) longer than this is cut
_BIDI = [*range(0x202A, 0x202F), *range(0x2066, 0x206A)]  # text direction overrides
_CONTROLS = [*range(0x20), *range(0x7F, 0xA0), 0x2028, 0x2029, *_BIDI]
_ESCAPES = {c: repr(chr(c))[1:-1] if c < 0x2028 else f"\\u{c:04x}" for c in _CONTROLS}
_TERMINAL = {c: e for c, e in _ESCAPES.items() if c not in (ord("\n"), ord("\t"))}
_ONE_LINE = {**{c: e for c, e in _ESCAPES.items() if c != ord("\t")}, ord("\n"): " "}
_NUMBER = re.compile(r"[-+]?\d+")
_DIGITS = re.compile(r"[-+]?\d{%d,}" % (LIMIT + 1))
_QUOTED = re.compile(  # a quoted value standing alone: never from an apostrophe to a quote
    r"""(?<![^\s(\[{=])(?:'(?:[^'\\]|\\.){%d,}'|"(?:[^"\\]|\\.){%d,}")(?=$|[\s;,.:)\]}])"""
    % (LIMIT + 1, LIMIT + 1))
_WORD = re.compile(r"\S{%d,}" % (WORD_LIMIT + 1))


def terminal_safe(text: str) -> str:
    """Text for a terminal, lines kept: every other control character (ESC, BEL, \\r, C1, bidi
    overrides) shown as its escape, so a model's output cannot drive the terminal."""
    return text.translate(_TERMINAL)


def encodable(text: str) -> str:
    """`text` as UTF-8 can hold it: a lone surrogate (a model's message about bytes it decoded
    with surrogateescape, '\\udc80') shown as its escape, as runs.csv and analysis.json need."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


def one_line(text: str) -> str:
    """A message on one line and safe for a terminal: newlines become spaces, other line breaks
    (\\r, U+2028, ...) and control characters their escapes."""
    return text.translate(_ONE_LINE)


def shorten(text: str, limit: int = LIMIT) -> str:
    """`text` when short; else its start, an ellipsis and its length ('a number of 5,000 digits'
    for a long integer)."""
    if len(text) <= limit:
        return text
    if _NUMBER.fullmatch(text):
        return f"a number of {len(text.lstrip('+-')):,} digits"
    return f"{text[:limit - 3]}... ({len(text):,} characters)"


def quote(value: str, limit: int = LIMIT) -> str:
    """A text value quoted for a message ('abc'), cut when long."""
    if len(value) > limit and _NUMBER.fullmatch(value):
        return shorten(value, limit)
    quoted = repr(value)
    if len(quoted) <= limit + 2:
        return quoted
    return f"{quoted[:limit - 3]}...{quoted[0]} ({len(value):,} characters)"


def number_of_digits(value: int, limit: int = LIMIT) -> str:
    """An integer as a message shows it: itself, or 'a number of 5,000 digits' when long."""
    try:
        return shorten(str(value), limit)
    except ValueError:  # beyond Python's limit on converting an int to text
        return f"a number of more than {sys.get_int_max_str_digits():,} digits"


def cut_values(message: str) -> str:
    """A message with every long quoted value, long number and very long word cut."""
    message = _QUOTED.sub(lambda m: f"{m[0][:LIMIT - 3]}...{m[0][0]} ({len(m[0]) - 2:,} characters)",
                          message)
    message = _DIGITS.sub(lambda m: shorten(m[0]), message)
    return _WORD.sub(lambda m: shorten(m[0], WORD_LIMIT), message)


def closest(word: str, choices: Iterable[str], cutoff: float = 0.6) -> str | None:
    """The choice most like `word` (one that differs only in case first, else difflib's
    similarity at least `cutoff`), or None."""
    choices = list(choices)
    same = [choice for choice in choices if choice.lower() == word.lower()]
    if same:
        return same[0]
    close = difflib.get_close_matches(word, choices, n=1, cutoff=cutoff)
    return close[0] if close else None


def suggest(word: str, choices: Iterable[str]) -> str:
    """'; did you mean 'x'?' when a close choice exists, else ''."""
    match = closest(word, choices)
    return "" if match is None else f"; did you mean {match!r}?"
