"""Numbers as JSON holds them: NaN and infinities have no JSON form, so they become null."""

from __future__ import annotations

import math
from typing import Any


def finite_or_none(value: Any) -> float | None:
    """A plain float (numpy scalars unwrapped), or None for NaN and infinities."""
    value = float(value)
    return value if math.isfinite(value) else None
