"""Memory sizes as written in a study (`512MB`, `2GiB`, bytes): parsing and the setrlimit cap."""

from __future__ import annotations

import math
import re

_UNITS = {"": 1, "b": 1, "k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12,
          "ki": 2**10, "mi": 2**20, "gi": 2**30, "ti": 2**40}
_BYTES = re.compile(r"^\s*(\d+(?:\.\d*)?)\s*(|b|[kmgt]i?b?)\s*$", re.IGNORECASE)
MAX_BYTES = 2**63 - 1  # what setrlimit takes


def parse_bytes(text: str | int) -> int:
    """Bytes in `512MB`, `2GiB`, `1e9`-free integer text, or an int; ValueError if malformed."""
    if isinstance(text, int) and not isinstance(text, bool):
        number, unit = (float(text) if abs(text) <= MAX_BYTES else math.inf), ""
    else:
        match = _BYTES.match(str(text))
        if not match:
            raise ValueError(f"not a memory size: {text!r} (try '512MB' or '2GiB')")
        number, unit = float(match[1]), match[2].lower().removesuffix("b")
    try:
        size = int(number * _UNITS[unit])
    except (OverflowError, ValueError):  # a number beyond float64 (inf)
        size = MAX_BYTES + 1
    if size <= 0:
        raise ValueError(f"must be positive; got {text!r}")
    if size > MAX_BYTES:
        raise ValueError(f"too large: {str(text)[:40]!r} is more than 2**63 bytes")
    return size
