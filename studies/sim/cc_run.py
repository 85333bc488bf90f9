"""Compile a C program once and run it, so that an example study can ship its program as source.

usage: python3 cc_run.py PROGRAM.c [ARGUMENT ...]

The binary goes to build/ beside the source (kept out of git), named by a hash of the source and
the compiler's flags: an edited source is built again, and runs started together never run a
half-written binary (each builds to a temporary name, then renames it). The compiler is $CC, or
cc. -ffp-contract=off keeps a * b + c two roundings on every machine, as the source says.
"""

import hashlib
import os
import subprocess
import sys
import tempfile
from pathlib import Path

FLAGS = ["-O2", "-ffp-contract=off"]
source = Path(sys.argv[1]).resolve()
digest = hashlib.sha256(source.read_bytes() + " ".join(FLAGS).encode()).hexdigest()[:16]
binary = source.parent / "build" / f"{source.stem}-{digest}"
if not binary.exists():
    binary.parent.mkdir(exist_ok=True)
    fd, temporary = tempfile.mkstemp(dir=binary.parent, prefix=f".{source.stem}-")
    os.close(fd)
    try:
        compiler = os.environ.get("CC", "cc")
        subprocess.run([compiler, *FLAGS, "-o", temporary, str(source), "-lm"], check=True)
        os.replace(temporary, binary)
    finally:
        if os.path.exists(temporary):
            os.unlink(temporary)
os.execv(binary, [str(binary), *sys.argv[2:]])
