"""Test helper: checks its arguments against the JSON list in argv[1]; writes argc and a match flag."""

import json
import sys

expected = json.loads(sys.argv[1])
with open("results.json", "w") as f:
    json.dump({"argc": len(sys.argv), "match": float(sys.argv[2:] == expected)}, f)
