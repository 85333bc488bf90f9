"""Test helper: starts a grandchild that records its pid in argv[1], then both sleep."""

import subprocess
import sys
import time
from pathlib import Path

child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
Path(sys.argv[1]).write_text(str(child.pid))
print("hanging", file=sys.stderr, flush=True)
time.sleep(600)
