#!/usr/bin/env python3
"""Exponential decay, y(t) = y0 * exp(-k t): a stand-in for an external simulator.

The example program of the `command` model: standard library only, so it starts fast. It reads
the run's parameters from a JSON (or YAML) file and writes a results JSON with scalars and time
series, as studyrun's `command` model expects:

    model:
      type: command
      run: [python3, "{study_dir}/sim/decay_sim.py", "{params_file}", "{results_file}"]
      params_file: params.json
      results_file: results.json
      timeout: 30

Parameters (all optional): k (decay rate, 1/time, default 0.5), y0 (initial amount, default
100), stop (end time, default 10), step (output interval, default 0.5).
Outputs: scalars final_y, half_life (ln 2 / k), auc (integral of y over [0, stop]); series y and
outflow (k y) on the "time" grid. The answers are analytic, so studies can check them exactly.
An unknown parameter name or an invalid value exits with status 2 and a message on stderr.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

DEFAULTS = {"k": 0.5, "y0": 100.0, "stop": 10.0, "step": 0.5}


def fail(message: str) -> None:
    """Stop with status 2 and a message on stderr, where studyrun records it on the run."""
    print(f"decay_sim: {message}", file=sys.stderr)
    raise SystemExit(2)


def read_params(path: Path) -> dict[str, float]:
    """The parameters in a .json or .yaml file, over the defaults; SystemExit(2) if invalid."""
    text = path.read_text()
    if path.suffix.lower() in (".yaml", ".yml"):
        import yaml  # only needed for YAML parameter files

        given = yaml.safe_load(text) or {}
    else:
        given = json.loads(text)
    unknown = sorted(set(given) - set(DEFAULTS))
    if unknown:
        fail(f"unknown parameter {unknown[0]!r}; known: {', '.join(DEFAULTS)}")
    params = {**DEFAULTS, **given}
    for name, value in params.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            fail(f"{name} must be a number; got {value!r}")
    if params["k"] <= 0 or params["step"] <= 0 or params["stop"] <= 0:
        fail("k, stop and step must be positive")
    return {name: float(value) for name, value in params.items()}


def simulate(k: float, y0: float, stop: float, step: float) -> dict:
    """Outputs of one run: scalars and series on the output grid (stop included)."""
    count = int(math.floor(stop / step + 1e-9)) + 1
    time = [i * step for i in range(count)]
    if stop - time[-1] > 1e-9 * stop:
        time.append(stop)
    y = [y0 * math.exp(-k * t) for t in time]
    return {
        "final_y": y0 * math.exp(-k * stop),
        "half_life": math.log(2) / k,
        "auc": y0 / k * -math.expm1(-k * stop),
        "time": time,
        "y": y,
        "outflow": [k * v for v in y],
    }


def main(argv: list[str]) -> int:
    if len(argv) not in (2, 3):
        print("usage: decay_sim.py PARAMS.json [RESULTS.json]", file=sys.stderr)
        return 2
    params = read_params(Path(argv[1]))
    results = simulate(**params)
    out = Path(argv[2] if len(argv) == 3 else "results.json")
    out.write_text(json.dumps(results))
    print(f"decay_sim: k={params['k']:g} y0={params['y0']:g} -> final_y={results['final_y']:g}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
