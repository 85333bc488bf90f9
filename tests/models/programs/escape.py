"""Test helper: starts a grandchild in a new session (out of the run's process group) that sleeps
forever with argv[1] on its command line, then hangs (argv[2] == "hang") or writes results."""

import json
import subprocess
import sys
import time

subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)", sys.argv[1]],
                 start_new_session=True)
if sys.argv[2] == "hang":
    time.sleep(600)
json.dump({"x": 1.0}, open("results.json", "w"))
