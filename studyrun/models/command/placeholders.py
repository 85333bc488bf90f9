"""`{name}` placeholders in argv elements and templates: the allowed names, splitting, filling."""

from __future__ import annotations

import re

PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
PLACEHOLDERS = ("params_file", "results_file", "workdir", "study_dir", "run_id", "seed")


def split_placeholders(text: str) -> tuple[str, ...]:
    """Literal text and placeholder names, alternating: ('lit', 'name', 'lit', ...)."""
    return tuple(PLACEHOLDER.split(text))


def render(parts: tuple[str, ...], values: dict[str, str]) -> str:
    if len(parts) == 1:
        return parts[0]
    return "".join(p if k % 2 == 0 else values[p] for k, p in enumerate(parts))
