"""Test helper: writes a results file that is not what was asked (mode in argv[1])."""

import sys
from pathlib import Path

mode = sys.argv[1]
out = Path("results.json")
if mode == "garbage":
    out.write_text("{not json at all")
elif mode == "text":
    out.write_text('{"x": 1.0, "y": "abc"}')
elif mode == "list":
    out.write_text("[1, 2, 3]")
elif mode == "csv-garbage":
    Path("results.csv").write_text("time,y\n0,1\n1,banana\n")
elif mode == "csv-notime":
    Path("results.csv").write_text("t,y\n0,1\n1,2\n")
elif mode == "none":
    print("forgot to write results", file=sys.stderr)
