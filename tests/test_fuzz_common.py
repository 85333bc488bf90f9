"""Shared helpers of the fuzz suite (tests/test_fuzz_*.py); holds no tests itself.

The property every fuzz test checks: loading a study ends in a `Loaded` or in a `StudyError`
whose every line reads `FILE:LINE:COL: ...`, within a time limit, and nothing else escapes.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import sys
import time
from pathlib import Path

from conftest import run_earlier_steps
from hypothesis import HealthCheck, Phase, settings

from studyrun.core.errors import StudyError
from studyrun.study.loading import load_study

REPO = Path(__file__).resolve().parents[1]
STUDIES = REPO / "studies"
LOCATED = re.compile(r"^[^:\n]+:\d+:\d+: ")
TIME_LIMIT = 10.0  # seconds for one load (a few ms as a rule); a hang fails, a slow CI does not
# e.g. 20 for a long hunt; .ci/run fuzzes at 8 after the README's suite
SCALE = float(os.environ.get("STUDYRUN_FUZZ_SCALE", "1"))


# No explain phase: after a failure it replays examples under a line tracer, which with the audit
# hook below turns a failing example of seconds into minutes (past pytest-timeout, which then
# hides the failure itself behind a FlakyStrategyDefinition).
FAST = settings(deadline=None, suppress_health_check=list(HealthCheck),
                phases=[phase for phase in Phase if phase is not Phase.explain])


def examples(count: int) -> int:
    """`count` examples, times STUDYRUN_FUZZ_SCALE. At 1 (the README's suite: every change)
    the fuzz tests take some 15 s of CPU; each run draws new examples, and CI draws 8 times
    as many."""
    return max(1, int(count * SCALE))


class Hang(BaseException):
    """Raised by the alarm when one example runs past its time limit (a BaseException, so that
    no `except Exception` in the code under test can swallow it)."""


@contextlib.contextmanager
def time_limit(seconds: float = TIME_LIMIT):
    """Fail with Hang when the block runs longer than `seconds` (main thread, POSIX). A timer
    already running (pytest-timeout's) is put back afterwards with what remains of it."""
    def alarm(signum, frame):
        raise Hang(f"still running after {seconds} s")

    previous = signal.signal(signal.SIGALRM, alarm)
    start = time.monotonic()
    outer, _ = signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        if outer > 0:
            signal.setitimer(signal.ITIMER_REAL, max(outer - (time.monotonic() - start), 0.001))


# An audit hook (PEP 578) sees what no assertion on results can: code compiled from text and
# run, a shell or a process started, a file written, a socket opened.
WATCHED = ("exec", "os.system", "os.exec", "os.posix_spawn", "os.spawn", "os.fork",
           "subprocess.Popen", "os.remove", "os.unlink", "os.rename", "os.rmdir", "os.mkdir",
           "shutil.", "socket.", "ctypes.", "builtins.input", "code.", "pickle.find_class",
           "webbrowser.", "urllib.")
_WRITING = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC
_AUDIT = {"armed": False, "events": []}


def _audit(event: str, args: tuple) -> None:
    if not _AUDIT["armed"]:
        return
    if event == "exec" and os.path.isfile(getattr(args[0], "co_filename", "")):
        return  # a module imported from its file (a study's python model), not text run as code
    if event == "exec" and _library_code(sys._getframe(1)):  # (sys._getframe is audited
        return  # too: call it for exec events only, or the hook recurses)
    if any("__pycache__" in str(a) for a in args[:1]):
        return  # importing a study's python module caches its bytecode
    if event == "open" and isinstance(args[0], int) and _library_code(sys._getframe(1)):
        return  # ... through a descriptor: importlib writes the .pyc it opened by name above
    writes = event == "open" and len(args) > 2 and (
        (isinstance(args[1], str) and any(m in args[1] for m in "wax+"))
        or (isinstance(args[2], int) and args[2] & _WRITING))
    if event.startswith(WATCHED) or writes:
        _AUDIT["events"].append((event, repr(args)[:200]))


# Libraries compile code of their own: namedtuple and dataclass methods, scipy.stats argument
# parsers, anything a module does while it is imported (lazily, by the first study to need it).
_LIBRARY_CALLERS = {("namedtuple", "collections"), ("_create_fn", "dataclasses"),
                    ("_attach_argparser_methods", "stats")}


def _library_code(frame) -> bool:
    code = frame.f_code
    module = os.path.splitext(os.path.basename(code.co_filename))[0]
    package = os.path.basename(os.path.dirname(code.co_filename))
    if {(code.co_name, module), (code.co_name, package)} & _LIBRARY_CALLERS:
        return True
    while frame is not None:
        if frame.f_code.co_filename.startswith("<frozen importlib"):
            return True
        frame = frame.f_back
    return False


sys.addaudithook(_audit)  # hooks cannot be removed; this one only records while armed


class watched:
    """Arms the audit hook; on leaving, fails if code was run from text, a process started or a
    file written inside the block."""

    def __enter__(self):
        _AUDIT["events"].clear()
        _AUDIT["armed"] = True
        return self

    def __exit__(self, *exc):
        _AUDIT["armed"] = False
        events = list(_AUDIT["events"])
        _AUDIT["events"].clear()
        if exc[0] is None:
            assert not events, f"validation reached {events}"
        return False


def assert_located(error: StudyError) -> None:
    """Every line of the error is FILE:LINE:COL: ..., and there is at least one."""
    text = str(error)
    assert error.problems and text.strip(), "a StudyError with no problem in it"
    for line in text.splitlines():
        assert LOCATED.match(line), f"not a FILE:LINE:COL line: {line!r}\nin:\n{text}"


def load_cleanly(path: Path, seconds: float = TIME_LIMIT) -> str:
    """Load a study; 'valid' or 'invalid' (a located StudyError); anything else fails the test."""
    start = time.perf_counter()
    try:
        with time_limit(seconds), watched():
            load_study(path)
        outcome = "valid"
    except StudyError as error:
        assert_located(error)
        outcome = "invalid"
    assert time.perf_counter() - start < seconds
    return outcome


def copy_studies(target: Path) -> Path:
    """studies/ (model files, python modules, simulator scripts) copied to `target`, with the
    results the sequential examples start from beside it and the PySD translations of its
    Vensim models made (validating a pysd study translates its model once, into a cache: files
    written and code compiled that the audit hook would see)."""
    from studyrun.models.pysd import translate

    shutil.copytree(STUDIES, target, ignore=shutil.ignore_patterns("__pycache__", "results"))
    run_earlier_steps(target)
    for model in sorted(target.glob("models/*.mdl")):
        translate(model)
    return target


def study_files() -> list[str]:
    """The names of the example studies (each a valid study to mutate)."""
    return sorted(p.name for p in STUDIES.glob("*.yaml"))
