"""Small Markdown builders shared by every analysis's report section."""

from __future__ import annotations

from typing import Any, Iterable, Sequence


def format_number(value: Any, digits: int = 4) -> str:
    """A number as a short, readable string; other values as they are."""
    if isinstance(value, (bool, int)) or value is None:  # counts whole: 64128, not 6.413e+04
        return str(value)
    if isinstance(value, float):
        if value != value:  # NaN
            return "nan"
        return f"{value:.{digits}g}"
    return str(value)


def table(headers: Sequence[str], rows: Iterable[Sequence[Any]], digits: int = 4) -> str:
    """A Markdown table with numbers formatted to `digits` significant figures."""
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    for row in rows:
        lines.append("| " + " | ".join(format_number(v, digits) for v in row) + " |")
    return "\n".join(lines)
