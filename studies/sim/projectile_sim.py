#!/usr/bin/env python3
"""A projectile in flight until it lands: a simulator whose series end on an event.

Each run's output grid is its own: the program samples the flight every `step` seconds while
the projectile is above the ground and ends with the landing, so a run's series are as long as
its flight (0.2 s for a slow, flat throw; 11 s for a fast, steep one). Standard library only:

    model:
      type: command
      run: [python3, "{study_dir}/sim/projectile_sim.py", "{params_file}"]
      params_file: params.json
      results_file: results.json

Parameters (all optional): speed (launch speed, m/s, default 20), angle (degrees above the
ground, default 45), g (gravity, m/s^2, default 9.81), step (sampling interval, s, default 0.05).
Writes results.json with the series time, height and distance (no scalars): the flight time is
the last time, the apex the largest height. Exits with status 2 and a message on stderr for an
unknown parameter or an invalid value.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

DEFAULTS = {"speed": 20.0, "angle": 45.0, "g": 9.81, "step": 0.05}


def fail(message: str) -> None:
    print(f"projectile_sim: {message}", file=sys.stderr)
    raise SystemExit(2)


def read_params(path: Path) -> dict[str, float]:
    given = json.loads(path.read_text())
    unknown = sorted(set(given) - set(DEFAULTS))
    if unknown:
        fail(f"unknown parameter {unknown[0]!r}; known: {', '.join(DEFAULTS)}")
    params = {**DEFAULTS, **given}
    for name, value in params.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
            fail(f"{name} must be a positive number; got {value!r}")
    return {name: float(value) for name, value in params.items()}


def fly(speed: float, angle: float, g: float, step: float) -> dict[str, list[float]]:
    """Positions every `step` seconds while above the ground, then the landing point."""
    up = speed * math.sin(math.radians(angle))
    along = speed * math.cos(math.radians(angle))
    landing = 2 * up / g
    time, height, distance = [], [], []
    t, i = 0.0, 0
    while t < landing:
        y = up * t - g * t * t / 2
        if y < 0:  # rounding just before the landing: the flight is over
            break
        time.append(t)
        height.append(y)
        distance.append(along * t)
        i += 1
        t = i * step
    time.append(landing)
    height.append(0.0)
    distance.append(along * landing)
    return {"time": time, "height": height, "distance": distance}


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: projectile_sim.py PARAMS.json", file=sys.stderr)
        return 2
    Path("results.json").write_text(json.dumps(fly(**read_params(Path(argv[1])))))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
