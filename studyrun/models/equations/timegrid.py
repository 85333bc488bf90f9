"""The clock of an equation model: the `time:` block (start, stop, step) and the
fixed-step grid with its output times."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from studyrun.core.errors import Problem


class TimeSpan(BaseModel):
    """The `time:` block both equation models share: start, stop and step."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    start: float = 0.0
    stop: float
    step: float = Field(gt=0)


@dataclass(frozen=True)
class TimeGrid:
    """Integration from ``start`` to ``stop`` with fixed step ``dt``, output every ``save_every``."""

    start: float
    stop: float
    dt: float
    save_every: float

    def problems(self, prefix: str = "time") -> list[Problem]:
        out = []
        if not all(math.isfinite(v) for v in (self.start, self.stop, self.dt, self.save_every)):
            out.append(Problem(f"start, stop and steps must be finite numbers; got start="
                               f"{self.start}, stop={self.stop}, step={self.dt}", prefix))
            return out
        if not self.stop > self.start:
            out.append(Problem(f"stop must be after start; got start={self.start}, "
                               f"stop={self.stop}", f"{prefix}.stop"))
            return out
        if not self.dt > 0 or not self.save_every > 0:
            out.append(Problem("steps must be positive", f"{prefix}.step"))
            return out
        if not _is_multiple(self.stop - self.start, self.save_every):
            out.append(Problem(f"stop - start ({self.stop - self.start:g}) must be a multiple of "
                               f"the output interval ({self.save_every:g})", f"{prefix}.stop"))
        if not _is_multiple(self.save_every, self.dt):
            out.append(Problem(f"the output interval ({self.save_every:g}) must be a multiple of "
                               f"the step ({self.dt:g})", prefix))
        return out

    @property
    def n_steps(self) -> int:
        return int(round((self.stop - self.start) / self.dt))

    @property
    def stride(self) -> int:
        return int(round(self.save_every / self.dt))

    @property
    def times(self) -> np.ndarray:
        count = int(round((self.stop - self.start) / self.save_every)) + 1
        grid = self.start + np.arange(count) * self.save_every
        grid[-1] = self.stop
        return grid

    def with_step(self, dt: float) -> TimeGrid:
        return TimeGrid(self.start, self.stop, dt, self.save_every)


def _is_multiple(total: float, step: float) -> bool:
    ratio = total / step
    if not math.isfinite(ratio):  # 1e300 / 1e-300
        return False
    return abs(ratio - round(ratio)) <= 1e-9 * max(1.0, abs(ratio))
