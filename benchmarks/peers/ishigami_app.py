"""Ishigami as a program: reads {"x1", "x2", "x3"} from a JSON file, writes {"y"} to another."""

import json
import math
import sys

p = json.load(open(sys.argv[1]))
y = math.sin(p["x1"]) + 7.0 * math.sin(p["x2"]) ** 2 + 0.1 * p["x3"] ** 4 * math.sin(p["x1"])
json.dump({"y": y}, open(sys.argv[2], "w"))
