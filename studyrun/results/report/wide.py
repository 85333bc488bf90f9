"""Reports of many parameters: a figure draws the TOP that matter most by the analysis's own
measure, and the report's table lists every parameter, largest first, saying so. Of many
quantities, the figures of the first QUANTITIES_DRAWN are drawn (`Figures.draws`), and the
tables list every one.

Drawing a thousand bars, labels or scatter panels took a minute and gigabytes, and showed
nothing one could read; at most TOP parameters, figures and tables are as they always were.
"""

from __future__ import annotations

import math
from typing import Any, Mapping

TOP = 20  # parameters a figure shows of a study of more
QUANTITIES_DRAWN = 10  # quantities whose figures a report draws, of a study of more


def ranked(measure: Mapping[str, Any]) -> list[str]:
    """The names by decreasing |measure|, ties in their given order; None and NaN last."""
    def size(name: str) -> float:
        value = measure[name]
        known = isinstance(value, (int, float)) and not math.isnan(value)
        return -abs(value) if known else math.inf

    return sorted(measure, key=size)


def shown(measure: Mapping[str, Any], top: int = TOP) -> list[str]:
    """The names a figure draws: every one in its order, or the `top` largest when there are
    more."""
    return list(measure) if len(measure) <= top else ranked(measure)[:top]


def table_order(measure: Mapping[str, Any], top: int = TOP) -> list[str]:
    """The rows of a table: in their order, or every name by decreasing |measure| when a figure
    shows only the `top`."""
    return list(measure) if len(measure) <= top else ranked(measure)


def top_note(measure: Mapping[str, Any], what: str, top: int = TOP) -> str:
    """What a wide study's figures leave out, in one sentence; empty when they show everything."""
    n = len(measure)
    if n <= top:
        return ""
    return (f"*The figures show the {top} parameters of largest {what} of the {n:,}; the table "
            f"lists all {n:,}, largest {what} first.*")
