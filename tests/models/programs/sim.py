"""Test helper: y = a * exp(-b * t) on a grid; reads .json/.yaml/`name = value` params.

usage: sim.py PARAMS [RESULTS]   (RESULTS .json or .csv, default results.json in the cwd)
Optional parameters: n (grid points, default 5), t0 (grid start, default 0), stop (default 4).
"""

import json
import math
import sys
from pathlib import Path

params_path = Path(sys.argv[1])
results_path = Path(sys.argv[2] if len(sys.argv) > 2 else "results.json")
text = params_path.read_text()
if params_path.suffix == ".json":
    p = json.loads(text)
elif params_path.suffix in (".yaml", ".yml"):
    import yaml
    p = yaml.safe_load(text)
else:  # a rendered template: `name = value` lines, other lines ignored
    p = {}
    for line in text.splitlines():
        if "=" in line:
            key, _, value = line.partition("=")
            try:
                p[key.strip()] = float(value)
            except ValueError:
                pass
a, b = p.get("a", 1.0), p.get("b", 0.5)
n, t0, stop = int(p.get("n", 5)), p.get("t0", 0.0), p.get("stop", 4.0)
time = [t0 + (stop - t0) * k / (n - 1) for k in range(n)]
y = [a * math.exp(-b * t) for t in time]
z = [2 * v for v in y]
if results_path.suffix == ".csv":
    lines = ["time,y,z"] + [f"{t!r},{u!r},{w!r}" for t, u, w in zip(time, y, z)]
    results_path.write_text("\n".join(lines) + "\n")
else:
    out = {"time": time, "y": y, "z": z, "final": y[-1], "sum": a + b,
           "a_type": 1.0 if isinstance(p.get("a"), float) else 0.0}
    results_path.write_text(json.dumps(out))
print("done", params_path.name)
