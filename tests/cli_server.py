"""`python -m studyrun ARGS` for the tests, a process each, without paying the imports each time.

This process imports studyrun and its heavy dependencies once (about 2 s of CPU that every
`python -m studyrun run` pays), then forks a child per request: each call is still a process of
its own, with its own folder, environment, output, exit status and signals, that runs
`studyrun/__main__.py` as `python -m studyrun` does and ends as studyrun's CLI ends
(`studyrun.cli.end`: without its modules' teardown, which in a fork writes to every page it
shares with this server).
Requests and answers are JSON lines on stdin and stdout; a request is
{"args", "cwd", "env", "stdout", "stderr"} (files for the child's output), the answers are the
child's pid, then its exit status and CPU seconds.
"""

from __future__ import annotations

import gc
import importlib
import json
import os
import sys
import threading

PRELOADED = ("numpy", "scipy.stats", "pandas", "matplotlib", "matplotlib.figure",
             "matplotlib.backends.backend_agg", "statsmodels.regression.linear_model", "SALib",
             "pydoe", "yaml", "pydantic", "dask.distributed", "studyrun.cli", "studyrun.commands.pipeline",
             "studyrun.study.spec")  # the last builds the registry's types: 0.1-0.3 s a process


def serve() -> dict:
    """Answer requests until stdin closes; returns only in a forked child, with its request."""
    for name in PRELOADED:
        importlib.import_module(name)
    # the installed versions analysis.json records, read once here rather than in every child
    importlib.import_module("studyrun.results.provenance").package_versions(("pysd",))
    # a python model's imports are found in children of one interpreter that imported numpy,
    # scipy and pandas, as a process of several studies finds them, not each in a fresh one
    importlib.import_module("studyrun.models.imports").Zygote.start()
    assert threading.active_count() == 1, "a preloaded module started a thread: fork is unsafe"
    # the preloaded objects are never collected: out of the collector's sight, a child neither
    # scans them nor copies every page it touches when it does (0.8 s of CPU at each child's exit)
    gc.freeze()
    answers = sys.stdout
    print(json.dumps({"ready": True}), file=answers, flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        pid = os.fork()
        if pid == 0:
            return request
        print(json.dumps({"pid": pid}), file=answers, flush=True)
        _, status, usage = os.wait4(pid, 0)
        print(json.dumps({"status": os.waitstatus_to_exitcode(status),
                          "cpu": usage.ru_utime + usage.ru_stime}), file=answers, flush=True)
    raise SystemExit(0)


def become(request: dict) -> None:
    """Turn this forked child into `python -m studyrun ARGS` run in the request's folder."""
    with open(os.devnull, "rb") as null:
        os.dup2(null.fileno(), 0)
    for fd, path in ((1, request["stdout"]), (2, request["stderr"])):
        with open(path, "wb") as out:
            os.dup2(out.fileno(), fd)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    sys.path[0] = os.getcwd()  # `python -m` puts the working folder first
    sys.argv = ["studyrun", *request["args"]]


if __name__ == "__main__":
    become(serve())
    import runpy

    from studyrun.cli import end

    try:  # studyrun/__main__.py ends through `end` itself; argparse's exits (--help) end here
        runpy.run_module("studyrun", run_name="__main__", alter_sys=True)
    except SystemExit as exit:
        # a status as a number ends fast; a message, Ctrl-C or a traceback ends as Python does
        if exit.code is not None and not isinstance(exit.code, int):
            raise
        end(exit.code or 0)
    end(0)
