#!/usr/bin/env bash
# Creates benchmarks/out/peers-venv with the peer tools (never studyrun dependencies).
# Usage: bash benchmarks/peers/setup_venv.sh   (idempotent; ~1-2 min the first time)
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
venv="$here/out/peers-venv"
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
fi
if ! "$venv/bin/python" -c "import ema_workbench, easyvvuq, pysd, SALib, six, pandas, openturns; assert int(pandas.__version__[0]) < 3" 2>/dev/null; then
  "$venv/bin/python" -m pip install -q --upgrade pip
  # six: numpoly (via easyvvuq) imports it undeclared; pandas<3: the SALib these pin predates it
  "$venv/bin/python" -m pip install -q ema_workbench easyvvuq pysd SALib six "pandas<3" openturns 2>&1 \
    | grep -v "^WARNING: Location" || true
fi
"$venv/bin/python" - <<'PY'
from importlib import metadata
print("peers-venv:", ", ".join(f"{n} {metadata.version(n)}" for n in
      ("ema_workbench", "easyvvuq", "pysd", "SALib", "openturns", "numpy")))
PY
