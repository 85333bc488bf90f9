"""Test helper: writes 30 numbered lines to stderr, then exits with status 1."""

import sys

for k in range(30):
    print(f"error line {k}", file=sys.stderr)
sys.exit(1)
