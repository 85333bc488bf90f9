"""The accuracy check of system-dynamics practice: integrate at the nominal values with the step
and with half the step; if every output agrees, the step is small enough (adaptive methods are
checked the same way with tolerances ten times tighter)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from studyrun.models.base import HasEquations
from studyrun.models.equations import FIXED_METHODS, normalize_method

LIMIT = 0.01  # the largest relative difference `studyrun run` accepts without a warning


@dataclass
class StepCheck:
    """Largest relative difference per output between the step and half the step."""

    method: str
    step: float | None
    differences: dict[str, float]

    @property
    def worst(self) -> tuple[str, float]:
        name = max(self.differences, key=self.differences.get)
        return name, self.differences[name]

    def describe(self) -> str:
        how = (f"{self.method} with step {self.step:g} against {self.step / 2:g}"
               if self.step is not None else f"{self.method} against tolerances ten times tighter")
        lines = [f"step check: {how}; largest relative difference per output:"]
        lines += [f"  {name:<24} {value:.3g}{'  <-- above 1%' if value > LIMIT else ''}"
                  for name, value in sorted(self.differences.items(), key=lambda kv: -kv[1])]
        return "\n".join(lines)


def check_step(context) -> StepCheck | None:
    """Run the check for an equation model (as the study's analysis runs it, every parameter at
    its nominal value); None for other model types."""
    if not isinstance(context.model, HasEquations):
        return None
    evaluator = context.model.build(context.folder)
    inputs = {name: np.array([context.nominal(name)]) for name in context.parameters}
    system = evaluator.system
    method = normalize_method(system.method)
    coarse = evaluator.integrate(inputs, 1)
    if method in FIXED_METHODS:
        step = system.grid.dt
        fine = evaluator.integrate(inputs, 1, step=step / 2)
    else:
        step = None
        fine = evaluator.integrate(inputs, 1, rtol=system.rtol / 10, atol=system.atol / 10)
    return StepCheck(method, step, {name: relative_difference(coarse.series[name], fine.series[name])
                                    for name in coarse.series})


def relative_difference(a: np.ndarray, b: np.ndarray) -> float:
    """max |a - b| over the grid, relative to the largest |b| (absolute when b is all zero)."""
    scale = float(np.nanmax(np.abs(b))) if np.size(b) else 0.0
    difference = float(np.nanmax(np.abs(a - b))) if np.size(b) else 0.0
    return difference / scale if scale > 0 else difference



