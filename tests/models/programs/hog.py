"""Test helper: allocates and touches argv[1] megabytes, then writes results.json."""

import json
import sys

block = bytearray(int(sys.argv[1]) * 2**20)
block[::4096] = b"x" * len(block[::4096])
with open("results.json", "w") as f:
    json.dump({"allocated": len(block)}, f)
