"""The integration method names a model may ask for, and their canonical spelling."""

from __future__ import annotations

from typing import Any, Literal

FIXED_METHODS = ("euler", "rk4")
PER_MEMBER_METHODS = ("RK23", "DOP853", "LSODA", "Radau", "BDF")
METHODS = (*FIXED_METHODS, "RK45", *PER_MEMBER_METHODS)
Method = Literal["euler", "rk4", "RK45", "RK23", "DOP853", "LSODA", "Radau", "BDF"]


def normalize_method(value: Any) -> Any:
    """Accept method names in any case (``rk45``, ``lsoda``) and return the canonical spelling."""
    if isinstance(value, str):
        return {m.lower(): m for m in METHODS}.get(value.strip().lower(), value)
    return value
