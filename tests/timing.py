"""Per-test wall and CPU time, for finding where the suite waits (opt-in: STUDYRUN_TEST_TIMES=FILE).

Each test appends one JSON line to FILE: its node id, its wall time (setup, call and teardown),
the CPU of the test process, of the children it reaped and of the `studyrun` processes that
tests/cli_server.py forked for it. A test whose wall time is far above its CPU is waiting on
processes, clusters, sleeps or timeouts (its waiting here: the wall time beyond its CPU
stretched by the load on two cores), and when it began, in which test process. `python
tests/timing.py FILE` ranks them, and says when each test process ran its last test (a process
that ends long before the others, or a suite that ends long after its last test, is waiting).
"""

from __future__ import annotations

import json
import os
import resource
import sys
import threading
import time

import pytest

CLI_CPU = [0.0, 0]  # CPU seconds and number of the processes tests/cli_server.py forked so far
CLI_CALLS: list[list] = []  # each one's CPU seconds and first two arguments, for the record


def _children() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


class Timing:
    def __init__(self, path: str) -> None:
        self.path = path

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item):
        CLI_CALLS.clear()
        began = time.time()
        start = (time.perf_counter(), time.process_time(), _children(), *CLI_CPU)
        yield
        end = (time.perf_counter(), time.process_time(), _children(), *CLI_CPU)
        wall, own, children, cli, calls = (b - a for a, b in zip(start, end))
        record = {"test": item.nodeid, "began": round(began, 3),  # when, in which test process
                  "process": os.environ.get("PYTEST_XDIST_WORKER", "main"),
                  "wall": round(wall, 3), "cpu": round(own, 3),
                  "children": round(children, 3), "cli": round(cli, 3), "cli_calls": calls,
                  "load": round(os.getloadavg()[0], 2),
                  # threads left running: studyrun's isolated runner then starts a new
                  # interpreter (~2 s of CPU) where it would fork
                  "threads": threading.active_count(), "cli_args": CLI_CALLS}
        with open(self.path, "a") as out:
            out.write(json.dumps(record) + "\n")


def report(path: str, top: int = 40) -> None:
    """The tests (and modules) of FILE ranked by wall time and by waiting (wall minus CPU)."""
    records = [json.loads(line) for line in open(path)]
    for r in records:
        r["all_cpu"] = r["cpu"] + r["children"] + r["cli"]
        # waiting beyond the test's share of two cores at the load it ran under
        r["wait"] = r["wall"] - r["all_cpu"] * max(1.0, r["load"] / 2)
    modules: dict[str, list[float]] = {}
    for r in records:
        m = modules.setdefault(r["test"].split("::")[0], [0.0, 0.0, 0.0, 0])
        m[0] += r["wall"]
        m[1] += r["all_cpu"]
        m[2] += r["wait"]
        m[3] += 1
    print(f"{len(records)} tests: wall {sum(r['wall'] for r in records):.0f} s, "
          f"CPU {sum(r['all_cpu'] for r in records):.0f} s, of which `studyrun` processes "
          f"{sum(r['cli'] for r in records):.0f} s ({sum(r.get('cli_calls', 0) for r in records)})")
    ends: dict[str, float] = {}  # each test process's last test's end (records since "began")
    for r in records:
        if "began" in r:
            ends[r["process"]] = max(ends.get(r["process"], 0.0), r["began"] + r["wall"])
    if ends:
        first = min(r["began"] for r in records if "began" in r)
        print("each test process's last test ended at (s after the first began): " + ", ".join(
            f"{p} {end - first:.1f}" for p, end in sorted(ends.items())))
    print("\nmodules by wall:   wall    cpu   wait  tests")
    for name, (wall, cpu, wait, n) in sorted(modules.items(), key=lambda kv: -kv[1][0])[:top]:
        print(f"{name:60s} {wall:6.1f} {cpu:6.1f} {wait:6.1f} {n:5d}")
    for key in ("wall", "wait"):
        print(f"\ntests by {key}:   wall    cpu   wait  load")
        for r in sorted(records, key=lambda r: -r[key])[:top]:
            print(f"{r['test'][:90]:90s} {r['wall']:6.1f} {r['all_cpu']:6.1f} {r['wait']:6.1f} "
                  f"{r['load']:5.1f}")


if __name__ == "__main__":
    report(sys.argv[1], *(int(a) for a in sys.argv[2:]))
