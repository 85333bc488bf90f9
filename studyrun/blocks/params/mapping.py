"""From the unit cube to a study's parameters: natural values column by column, and the varied
parameters."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from studyrun.blocks.params.base import ParameterBase
from studyrun.blocks.params.union import ParameterSpec
from studyrun.blocks.params.values import Fixed


def map_unit(parameters: Mapping[str, ParameterBase], u: np.ndarray) -> np.ndarray:
    """Unit-cube rows to natural values: column j through the j-th parameter's ppf."""
    u = np.asarray(u, dtype=float)
    return np.column_stack([p.ppf(u[:, j]) for j, p in enumerate(parameters.values())]) \
        if parameters else np.empty((len(u), 0))


def varied(parameters: Mapping[str, ParameterSpec]) -> dict[str, ParameterSpec]:
    """The parameters the study varies (all but the fixed ones), in study order."""
    return {name: p for name, p in parameters.items() if not isinstance(p, Fixed)}
