"""Issue 9: studyrun side by side with the tools users would otherwise pick, in one invocation.

    bash benchmarks/peers/setup_venv.sh      # once: benchmarks/out/peers-venv (EMA Workbench,
                                             # EasyVVUQ, PySD, SALib), never studyrun dependencies
    python benchmarks/compare.py [--only peers,command,pysd,scaling,parallel]
                                 [--source head|tree|COMMIT]

peers     Sobol' of Ishigami (N = 1024 base samples, first and total order: 5,120 runs) with
          studyrun (vectorized and scalar model), a plain Python loop + SALib (as it is, and
          keeping studyrun's record of every run: SQLite rows committed per batch, a CSV of
          every run: peers/record_loop.py), EMA Workbench
          (SequentialEvaluator; MultiprocessingEvaluator on 2 processes) and EasyVVUQ (Python
          action; file-based local execution, on fewer samples: it takes ~40 ms a run).
          Per run "after start-up": each peer times itself after its imports; studyrun is timed
          in-process around studyrun.run() after importing what it will use (SALib, scipy.stats,
          matplotlib). Every tool's cost per run is the same slope, between N = 1024 and 8192
          (EasyVVUQ's Python action: 128 and 1024), so fixed costs cancel alike; the average
          per run at N = 1024 is given beside it.
command   A small compiled program (peers/ishigami_app.c: reads input.json, writes output.json;
          peers/ishigami_app.py where there is no C compiler) run once per run of a Sobol'
          design: by subprocess.run in a plain loop (peers/command_loop.py; in one folder, and
          in a new folder per run), by studyrun (a `command` model, scheduler sync: one run after
          another, as the loop), and by EasyVVUQ's CreateRunDirectory / Encode / ExecuteLocal /
          Decode. Per run: the slope of wall and CPU time (this process and its programs) after
          imports, between N = 32 and 256 (160 and 1,280 runs), the fastest of 3 at each.
          On a shared machine these slopes carry milliseconds of noise; the target (at most
          1 ms per run over launching the program bare) is judged on a measure that cancels
          it: in one process, batches of 20 runs alternate between the bare loop (a folder per
          run) and studyrun's command model (its evaluator, as a worker runs it), 60 times
          each; the overhead is the median of the paired differences.
          --scratch DIR puts every tool's run folders in DIR (e.g. /dev/shm: no disk).
pysd      the flowers model: PySD (model.run per parameter set, peers venv) against studyrun's
          10,000-run Monte Carlo (slope between 16 and 10,000 runs).
scaling   Monte Carlo of Ishigami, 10^3 to 10^6 runs, scalar and vectorized, through `studyrun
          run` and as a plain Python script; Sobol' through `studyrun run` and SALib directly.
          Wall time and peak RSS against runs: measured/scaling.csv and measured/scaling.png.
parallel  models of 1, 20 and 200 ms a run (busy loops, and time.sleep: the latter needs no core,
          so it shows the runner's own losses apart from CPU contention) on 1 and 2 workers, on a LocalCluster
          and on a `dask scheduler` + `dask worker` started here on 127.0.0.1. Throughput is taken
          from the model's own trace of each run on the workers (start-up reported apart);
          efficiency = throughput / (workers / cost).

Writes benchmarks/measured/{peers,command,scaling,parallel}.csv and scaling.png.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

from harness import (
    HERE,
    OUT,
    PEERS_PYTHON,
    PRIORITY,
    RESULTS,
    TRACE_FILE,
    UNIFORM_PI,
    bench_env,
    best,
    last_float,
    measure,
    python,
    run_study,
    show,
    traced_run,
    use_source,
    write_rows,
    write_study,
)

PEERS = HERE / "peers"


def row(table: list, measure_: str, value: float, unit: str, **extra) -> dict:
    entry = {"measure": measure_, "measured": round(value, 6), "unit": unit, "target": "",
             "meets": "", **extra}
    table.append(entry)
    show(entry)
    return entry


def target(entry: dict, text: str, ok: bool) -> None:
    entry.update(target=text, meets="yes" if ok else "NO")
    print(f"    target {text}: {entry['meets']}", flush=True)


# ------------------------------------------------------------------ peers: Sobol' of Ishigami

def sobol_study(n: int, vectorized: bool):
    function = "benchmodels:ishigami" if vectorized else "benchmodels:ishigami_scalar"
    kind = "vec" if vectorized else "scalar"
    return write_study(f"peers-sobol-{kind}-{n}", {
        "seed": 1, "model": {"type": "python", "function": function, "vectorized": vectorized},
        "parameters": {"x1": UNIFORM_PI, "x2": UNIFORM_PI, "x3": UNIFORM_PI},
        "quantities": {"y": "value"},
        "analysis": {"type": "sobol", "samples": n, "second_order": False}})


IN_PROCESS = """
import resource, time
def cpu():  # getrusage counts microseconds, os.times 10 ms ticks
    own, waited = (resource.getrusage(who) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
    return own.ru_utime + own.ru_stime + waited.ru_utime + waited.ru_stime
t0 = time.perf_counter()
import studyrun, studyrun.commands.pipeline, scipy.stats, matplotlib.pyplot
from SALib.sample import sobol as _s
from SALib.analyze import sobol as _a
t1, c1 = time.perf_counter(), cpu()
result = studyrun.run({path!r}, out={out!r}, fresh=True{extra})
t2, c2 = time.perf_counter(), cpu()
print(f"import={{t1 - t0}} work={{t2 - t1}} cpu={{c2 - c1}} "
      f"runs={{result.analysis['runs']['planned']}}")
"""


def studyrun_in_process(path, extra: str = "", results=OUT / "results") -> dict:
    done = python(IN_PROCESS.format(path=str(path), out=str(results / path.stem), extra=extra))
    return {k: last_float(done["stdout"], k) for k in ("import", "work", "cpu", "runs")}


def peer(script: str, *args: str, interpreter=None) -> dict:
    done = measure([interpreter or PEERS_PYTHON, PEERS / script, *args])
    values = {k: last_float(done["stdout"], k) for k in ("runs", "import", "work", "per_run")}
    values["cpu"] = last_float(done["stdout"], "cpu") if " cpu=" in done["stdout"] else None
    values["wall"] = done["wall"]
    return values


def peer_slope(script: str, small: int, large: int, repeats: int, *args: str,
               interpreter=None) -> dict:
    """A peer's cost per run as a slope between two sizes (the least of `repeats` at each), plus
    its average per run at the small size; the same measure as studyrun's."""
    low = min((peer(script, *args, "--samples", str(small), interpreter=interpreter)
               for _ in range(repeats)), key=lambda v: v["work"])
    high = min((peer(script, *args, "--samples", str(large), interpreter=interpreter)
                for _ in range(repeats)), key=lambda v: v["work"])
    slope = (high["work"] - low["work"]) / (high["runs"] - low["runs"])
    return {**low, "slope": slope, "average": low["per_run"]}


def compare_peers(table: list, repeats: int) -> None:
    """Every tool's per-run cost is the slope between N = 1024 and 8192 (5,120 and 40,960 runs):
    fixed costs (the analysis of a small sample, report figures) cancel. Each tool runs
    `repeats` times at each size, in turns across the tools (`slopes`), and the least wall and
    the least CPU at each size make the slopes: one pass each was too noisy to judge a ratio
    (three fresh pairs gave 5.0, 8.4 and 3.1 us a run). The targets are judged on CPU slopes,
    which a loaded machine inflates least; EMA's multiprocessing pool is judged on wall (its
    CPU is in processes it does not wait for)."""
    small, large = 1024, 8192

    def in_process(vectorized: bool):
        extra = "" if vectorized else ", scheduler='sync'"
        return lambda n: studyrun_in_process(sobol_study(n, vectorized), extra)

    def script(name: str, *args: str, interpreter=None):
        return lambda n: peer(name, *args, "--samples", str(n), interpreter=interpreter)

    tools = {"vectorized": in_process(True), "scalar": in_process(False),
             "loop": script("salib_loop.py", interpreter=sys.executable),
             "record": script("record_loop.py", "--where", str(OUT), interpreter=sys.executable)}
    if PEERS_PYTHON.exists():
        tools |= {f"ema {evaluator}": script("ema_ishigami.py", "--evaluator", evaluator)
                  for evaluator in ("sequential", "multiprocessing")}
    got = slopes(tools, small, large, repeats)
    us = 1e6

    def add(name: str, text: str, tool: str, **extra) -> dict:
        done, low = got[name], got[name]["low"]
        return row(table, f"{text}: per run (slope N {small} -> {large}, least of {repeats})",
                   done["wall"] * us, "us", tool=tool, runs=int(low["runs"]),
                   cpu_slope_us=round(done["cpu"] * us, 2),
                   after_startup_s=round(low["work"], 3),
                   average_us=round(done["average"] * us, 1),
                   imports_s=round(low["import"], 3), **extra)

    for label in ("vectorized", "scalar"):
        cli = best(min(repeats, 2), run_study, sobol_study(small, label == "vectorized"))
        add(label, f"studyrun ({label} model)", "studyrun", cli_wall_s=round(cli["wall"], 3))
    scalar, loop, record = got["scalar"], got["loop"], got["record"]
    entry = add("loop", "plain Python loop + SALib", "python loop + SALib")
    target(entry, f"studyrun scalar within 1.3x of the loop in CPU (measured "
           f"{scalar['cpu'] / loop['cpu']:.2f}x; wall {scalar['wall'] / loop['wall']:.2f}x)",
           scalar["cpu"] <= 1.3 * loop["cpu"])
    entry = add("record", "plain Python loop + SALib keeping every run (SQLite rows committed "
                "per batch, a CSV)", "python loop + SALib + record")
    target(entry, f"studyrun scalar within 1.2x of the loop that keeps the same record in CPU "
           f"(measured {scalar['cpu'] / record['cpu']:.2f}x; wall "
           f"{scalar['wall'] / record['wall']:.2f}x)", scalar["cpu"] <= 1.2 * record["cpu"])
    if not PEERS_PYTHON.exists():
        print("no peers venv: run bash benchmarks/peers/setup_venv.sh for EMA Workbench, EasyVVUQ")
        return
    for evaluator in ("sequential", "multiprocessing"):
        done = got[f"ema {evaluator}"]
        entry = add(f"ema {evaluator}", f"EMA Workbench ({evaluator})", "ema_workbench",
                    vs_studyrun_vectorized=round(done["wall"] / got["vectorized"]["wall"], 1),
                    vs_studyrun_scalar=round(done["wall"] / scalar["wall"], 1))
    sequential, pool = got["ema sequential"], got["ema multiprocessing"]
    ratio = min(sequential["wall"], pool["wall"]) / scalar["wall"]
    cpu_ratio = sequential["cpu"] / scalar["cpu"]
    target(entry, f"studyrun (scalar) >= 10x faster per run than EMA's best evaluator (in CPU, "
           f"against the sequential one, {cpu_ratio:.1f}x; wall against the best "
           f"{ratio:.1f}x; vectorized {sequential['wall'] / got['vectorized']['wall']:.1f}x)",
           min(cpu_ratio, ratio) >= 10)
    easy = peer_slope("easyvvuq_ishigami.py", 128, small, 1, "--action", "python")
    entry = row(table, "EasyVVUQ (python action): per run (slope N 128 -> 1024)",
                easy["slope"] * 1e6, "us", tool="easyvvuq", runs=int(easy["runs"]),
                after_startup_s=round(easy["work"], 3), average_us=round(easy["average"] * 1e6, 1),
                imports_s=round(easy["import"], 3), cli_wall_s=round(easy["wall"], 3),
                vs_studyrun_vectorized=round(easy["slope"] / got["vectorized"]["wall"], 1),
                vs_studyrun_scalar=round(easy["slope"] / scalar["wall"], 1))
    ratio = easy["slope"] / scalar["wall"]
    target(entry, f"studyrun (scalar) >= 100x faster per run than EasyVVUQ (measured {ratio:.0f}x)",
           ratio >= 100)
    local = peer("easyvvuq_ishigami.py", "--action", "local", "--samples", "16")
    row(table, "EasyVVUQ (local action): per run, average of 80 runs (too slow for a slope)",
        local["per_run"] * 1e6, "us", tool="easyvvuq", runs=int(local["runs"]),
        after_startup_s=round(local["work"], 3), imports_s=round(local["import"], 3),
        cli_wall_s=round(local["wall"], 3),
        vs_studyrun_scalar=round(local["per_run"] / scalar["wall"], 1))


# ------------------------------------------------------------------ command: a program per run

def command_program() -> list[str]:
    """The program every tool runs: peers/ishigami_app.c compiled into benchmarks/out (cc -O2),
    or the Python script peers/ishigami_app.py where there is no C compiler."""
    source, app = PEERS / "ishigami_app.c", OUT / "ishigami_app"
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler and (not app.exists() or app.stat().st_mtime < source.stat().st_mtime):
        OUT.mkdir(exist_ok=True)
        subprocess.run([compiler, "-O2", "-o", str(app), str(source), "-lm"], check=True)
    if app.exists():
        return [str(app)]
    return [sys.executable, str(PEERS / "ishigami_app.py")]


def command_study(n: int, program: list[str], timeout: float | None = None):
    model = {"type": "command", "run": [*program, "{params_file}", "{results_file}"],
             "params_file": "input.json", "results_file": "output.json"}
    if timeout is not None:
        model["timeout"] = timeout
    return write_study(f"command-sobol-{n}{'-timeout' if timeout else ''}", {
        "seed": 1, "model": model,
        "parameters": {"x1": UNIFORM_PI, "x2": UNIFORM_PI, "x3": UNIFORM_PI},
        "quantities": {"y": "y"},
        "analysis": {"type": "sobol", "samples": n, "second_order": False}})


def slopes(tools: dict, small: int, large: int, repeats: int) -> dict:
    """Per tool, wall and CPU seconds per run after imports, each the slope between N = small and
    large (the least wall and, apart, the least CPU of `repeats` at each size, the repeats taken
    in turns across the tools so that a busy spell of the shared machine falls on all of them),
    the average wall per run at `small`, and `low`: the fastest measurement at `small`."""
    fastest: dict = {}
    least_cpu: dict = {}
    for _ in range(repeats):
        for name, measure_at in tools.items():
            for n in (small, large):
                done = measure_at(n)
                if (name, n) not in fastest or done["work"] < fastest[name, n]["work"]:
                    fastest[name, n] = done
                if done.get("cpu") is not None:
                    least_cpu[name, n] = min(least_cpu.get((name, n), done["cpu"]), done["cpu"])
    out = {}
    for name in tools:
        low, high = fastest[name, small], fastest[name, large]
        runs = high["runs"] - low["runs"]
        cpu = ((least_cpu[name, large] - least_cpu[name, small]) / runs
               if (name, small) in least_cpu else None)
        out[name] = {"wall": (high["work"] - low["work"]) / runs, "cpu": cpu,
                     "average": low["work"] / low["runs"], "runs": high["runs"], "low": low}
    return out


ALTERNATING = """
import statistics, sys, tempfile, time
from pathlib import Path
import numpy as np
sys.path.insert(0, {peers!r})
from command_loop import launch
from studyrun.core.batch import RunContext
from studyrun.models.command import Command

program, block, blocks = {program!r}, {block}, {blocks}
scratch = Path(tempfile.mkdtemp(prefix="alternating-", dir={scratch!r}))
x = np.random.default_rng(1).uniform(-np.pi, np.pi, (block, 3))
inputs = {{"x1": x[:, 0], "x2": x[:, 1], "x3": x[:, 2]}}


def model(timeout):
    spec = {{"type": "command", "run": [*program, "{{params_file}}", "{{results_file}}"],
            "params_file": "input.json", "results_file": "output.json", "timeout": timeout}}
    evaluator = Command.model_validate(spec).build(scratch)

    def batch(k):
        ids = np.arange(k * block, (k + 1) * block)
        out = evaluator(inputs, RunContext(run_ids=ids, workdir=scratch / "work"))
        assert out.errors == [None] * block, out.errors[0]
    return batch


tools = {{"bare": lambda k: launch(program, x.tolist(), scratch, per_run=True),
         "studyrun": model(None), "timeout": model(60.0)}}
seconds = {{name: [] for name in tools}}
order = list(tools)
for k in range(blocks):
    for name in order[k % 3:] + order[:k % 3]:  # each goes first in turn
        start = time.perf_counter()
        tools[name](k)
        seconds[name].append((time.perf_counter() - start) / block)
for name in ("studyrun", "timeout"):
    over = statistics.median(s - b for s, b in zip(seconds[name], seconds["bare"]))
    print(f"{{name}}_over={{over}}")
for name, values in seconds.items():
    print(f"{{name}}={{statistics.median(values)}}")
"""


def compare_command(table: list, repeats: int, small: int = 32, large: int = 256,
                    scratch: Path = OUT, block: int = 20, blocks: int = 60) -> None:
    """Every tool's run folders under `scratch` (studyrun's results folder too)."""
    program = command_program()
    scratch.mkdir(parents=True, exist_ok=True)
    done = python(ALTERNATING.format(peers=str(PEERS), program=program, block=block,
                                     blocks=blocks, scratch=str(scratch)))
    median = {k: last_float(done["stdout"], k) for k in ("bare", "studyrun", "timeout")}
    for name, label in (("studyrun", "command model"),
                        ("timeout", "command model with a timeout (60 s)")):
        over = last_float(done["stdout"], f"{name}_over")
        entry = row(table, f"studyrun {label} over the bare loop (a folder per run): per run, "
                    f"median of {blocks} pairs of alternating batches of {block} runs",
                    over * 1e6, "us", tool="studyrun", program=os.path.basename(program[-1]),
                    bare_us=round(median["bare"] * 1e6, 1),
                    studyrun_us=round(median[name] * 1e6, 1), folders_in=str(scratch))
        target(entry, f"at most 1 ms per run over launching the program bare (measured "
               f"{over * 1e3:.2f} ms)", over <= 1e-3)

    def bare(folders: str):
        def at(n: int) -> dict:
            done = measure([sys.executable, PEERS / "command_loop.py", *program, "--samples",
                            str(n), "--folders", folders, "--where", str(scratch)])
            return {k: last_float(done["stdout"], k) for k in ("runs", "work", "cpu")}
        return at

    def studyrun(timeout: float | None):
        return lambda n: studyrun_in_process(command_study(n, program, timeout),
                                             ", scheduler='sync'", scratch / "results")

    def easyvvuq(n: int) -> dict:
        done = measure([PEERS_PYTHON, PEERS / "easyvvuq_ishigami.py", "--action", "local",
                        "--samples", str(n), "--program", " ".join(program),
                        "--where", str(scratch)])
        return {k: last_float(done["stdout"], k) for k in ("runs", "work", "cpu")}

    tools = {"subprocess.run loop, one folder": ("bare", bare("one")),
             "subprocess.run loop, a folder per run": ("bare", bare("per-run")),
             "studyrun run, command model": ("studyrun", studyrun(None)),
             "studyrun run, command model with a timeout (60 s)": ("studyrun", studyrun(60.0))}
    if PEERS_PYTHON.exists():
        tools["EasyVVUQ, encode / execute / decode"] = ("easyvvuq", easyvvuq)
    else:
        print("no peers venv: run bash benchmarks/peers/setup_venv.sh for EasyVVUQ")
    results = slopes({k: v[1] for k, v in tools.items()}, small, large, repeats)
    floor = min(v["wall"] for k, v in results.items() if tools[k][0] == "bare")
    for label, slope in results.items():
        entry = row(table, f"{label}: per run (slope N {small} -> {large})", slope["wall"] * 1e6,
                    "us", tool=tools[label][0], program=os.path.basename(program[-1]),
                    runs=int(slope["runs"]), cpu_us=round(slope["cpu"] * 1e6, 1),
                    average_us=round(slope["average"] * 1e6, 1), folders_in=str(scratch))
        if tools[label][0] != "bare":
            entry["over_bare_us"] = round((slope["wall"] - floor) * 1e6, 1)


# ------------------------------------------------------------------ PySD: flowers

def compare_pysd(table: list) -> None:
    from bench_equations import FLOWERS, equation_study

    quantities = {"final_area": "final(area)", "peak_growth": "max(growth)"}
    runs = {n: best(2, run_study, equation_study(f"flowers-{n}", "flowers", FLOWERS, quantities,
                                                 n)) for n in (16, 10_000)}
    per_run = (runs[10_000]["cpu"] - runs[16]["cpu"]) / (10_000 - 16)  # one process: CPU time
    row(table, "studyrun flowers: per run (CPU, 16 -> 10,000 runs)", per_run * 1e6, "us",
        tool="studyrun", runs=10_000, cli_wall_s=round(runs[10_000]["wall"], 3))
    if not PEERS_PYTHON.exists():
        return
    done = measure([PEERS_PYTHON, PEERS / "pysd_flowers.py", "--runs", "10"])
    pysd = last_float(done["stdout"], "per_run")
    entry = row(table, "PySD flowers: per run (model.run)", pysd * 1e6, "us", tool="pysd", runs=10,
                translate_s=round(last_float(done["stdout"], "translate"), 3),
                imports_s=round(last_float(done["stdout"], "import"), 3),
                vs_studyrun=round(pysd / per_run))
    target(entry, f"studyrun >= 1000x faster per run than PySD (measured {pysd / per_run:.0f}x)",
           pysd / per_run >= 1000)


# ------------------------------------------------------------------ scaling

PLAIN_MC = """
import time, resource
t0 = time.perf_counter()
import numpy as np
from benchmodels import ishigami, ishigami_scalar
n = {n}
x = np.random.default_rng(1).uniform(-np.pi, np.pi, (n, 3))
if {vectorized}:
    y = ishigami(x[:, 0], x[:, 1], x[:, 2])
else:
    y = np.array([ishigami_scalar(x1=a, x2=b, x3=c) for a, b, c in x.tolist()])
summary = (y.mean(), y.std(), np.percentile(y, [5, 50, 95]))
print(f"work={{time.perf_counter() - t0}}")
"""


def compare_scaling(table: list, sizes: list[int]) -> None:
    from bench_sobol import SALIB_DIRECT

    for vectorized, label in ((True, "vectorized"), (False, "scalar")):
        for n in sizes:
            path = write_study(f"scaling-mc-{label}-{n}", {
                "seed": 1, "model": {"type": "python", "vectorized": vectorized,
                                     "function": "benchmodels:" + ("ishigami" if vectorized
                                                                   else "ishigami_scalar")},
                "parameters": {"x1": UNIFORM_PI, "x2": UNIFORM_PI, "x3": UNIFORM_PI},
                "quantities": {"y": "value"},
                "analysis": {"type": "montecarlo", "samples": n, "sampling": "random"}})
            done = run_study(path)
            scheduler = json.loads((OUT / "results" / path.stem / "analysis.json").read_text())[
                "execution"]["scheduler"]
            row(table, f"montecarlo {label} {n}: studyrun", done["wall"], "s", kind="montecarlo",
                model=label, tool="studyrun", runs=n, rss_mb=round(done["rss_mb"]),
                cpu_s=round(done["cpu"], 2), scheduler=scheduler)
            plain = python(PLAIN_MC.format(n=n, vectorized=vectorized))
            row(table, f"montecarlo {label} {n}: plain Python", plain["wall"], "s",
                kind="montecarlo", model=label, tool="plain python", runs=n,
                rss_mb=round(plain["rss_mb"]), cpu_s=round(plain["cpu"], 2))
    for n in sizes:
        base = 1 << max(4, round(n / 5).bit_length() - 1)  # N (D + 2) = 5 N runs near n
        path = sobol_study(base, True)
        done = run_study(path)
        row(table, f"sobol vectorized {5 * base}: studyrun", done["wall"], "s", kind="sobol",
            model="vectorized", tool="studyrun", runs=5 * base, rss_mb=round(done["rss_mb"]),
            cpu_s=round(done["cpu"], 2))
        salib = python(SALIB_DIRECT.format(n=base))
        row(table, f"sobol vectorized {5 * base}: SALib directly", salib["wall"], "s",
            kind="sobol", model="vectorized", tool="SALib directly", runs=5 * base,
            rss_mb=round(salib["rss_mb"]), cpu_s=round(salib["cpu"], 2))
    plot_scaling(table)


def plot_scaling(table: list) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    series: dict[str, list] = {}
    for entry in table:
        if "runs" in entry and "kind" in entry:
            key = f"{entry['kind']} {entry['model']}: {entry['tool']}"
            series.setdefault(key, []).append((entry["runs"], entry["measured"], entry["rss_mb"]))
    for key, points in series.items():
        points.sort()
        style = "-o" if "studyrun" in key else "--s"
        left.plot([p[0] for p in points], [p[1] for p in points], style, label=key, markersize=4)
        right.plot([p[0] for p in points], [p[2] for p in points], style, label=key, markersize=4)
    for axis, ylabel in ((left, "wall time, process start to end (s)"), (right, "peak RSS (MB)")):
        axis.set_xscale("log")
        axis.set_yscale("log")
        axis.set_xlabel("runs")
        axis.set_ylabel(ylabel)
        axis.grid(True, which="both", alpha=0.3)
    left.legend(fontsize=7)
    fig.suptitle("Ishigami: studyrun against a plain Python script and SALib directly")
    fig.tight_layout()
    fig.savefig(RESULTS / "scaling.png", dpi=80)
    print(f"wrote {RESULTS / 'scaling.png'}")


# ------------------------------------------------------------------ parallel efficiency

def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class DaskScheduler:
    """`dask scheduler` and `dask worker --nworkers N` on 127.0.0.1, stopped on exit."""

    def __init__(self, workers: int) -> None:
        self.workers = workers
        self.address = f"tcp://127.0.0.1:{free_port()}"
        self.processes: list[subprocess.Popen] = []

    def __enter__(self) -> str:
        env, port = bench_env(), self.address.rsplit(":", 1)[1]
        env["BENCH_TRACE"] = str(TRACE_FILE)  # the workers trace the runs they do
        log = open(OUT / "dask.log", "a")
        dask = [sys.executable, "-m", "distributed.cli.dask_scheduler"]
        self.processes.append(subprocess.Popen(
            [*PRIORITY, *dask, "--host", "127.0.0.1", "--port", port, "--dashboard-address", ":0"],
            env=env, cwd=OUT, stdout=log, stderr=log))
        self.processes.append(subprocess.Popen(
            [*PRIORITY, sys.executable, "-m", "distributed.cli.dask_worker", self.address, "--nworkers",
             str(self.workers), "--nthreads", "1", "--dashboard-address", ":0"],
            env=env, cwd=OUT, stdout=log, stderr=log))
        wait = ("from distributed import Client;c=Client(%r,timeout='30s');"
                "c.wait_for_workers(%d,timeout=60);c.close()" % (self.address, self.workers))
        subprocess.run([sys.executable, "-c", wait], env=env, cwd=OUT, check=True, timeout=90)
        return self.address

    def __exit__(self, *exc) -> None:
        for process in reversed(self.processes):
            process.terminate()
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def compare_parallel(table: list, costs: list[float], seconds: float) -> None:
    for model, mode in [(m, w) for m in ("busy", "sleeper") for w in ("local", "scheduler")]:
        for cost in costs:
            throughput = {}
            for workers in (1, 2):
                runs = int(round(seconds / cost)) * workers
                path = write_study(f"parallel-{mode}-{workers}", {
                    "seed": 1, "model": {"type": "python", "function": f"benchmodels:{model}",
                                         "constants": {"cost": cost}},
                    "parameters": {"x": {"distribution": "uniform", "low": 0, "high": 1}},
                    "quantities": {"y": "value"},
                    "analysis": {"type": "montecarlo", "samples": runs, "sampling": "random"}})
                if mode == "local":
                    done = traced_run(path, "--workers", str(workers))
                else:
                    with DaskScheduler(workers) as address:
                        done = traced_run(path, "--scheduler", address)
                throughput[workers] = done["throughput"]
                efficiency = done["throughput"] * cost / workers
                entry = row(table, f"{model} {mode} {cost * 1e3:g} ms/run {workers} worker(s): "
                            "throughput", done["throughput"], "runs/s", model=model, mode=mode,
                            cost_ms=cost * 1e3,
                            workers=workers, runs=runs, efficiency=round(efficiency, 3),
                            startup_s=round(done["startup"], 2), wall_s=round(done["wall"], 2),
                            processes=done["processes"])
                if cost == 0.02 and workers == 2:
                    target(entry, "parallel efficiency >= 90% at 20 ms/run", efficiency >= 0.9)
            row(table, f"{model} {mode} {cost * 1e3:g} ms/run: speed-up 2 workers / 1",
                throughput[2] / throughput[1], "x", model=model, mode=mode, cost_ms=cost * 1e3)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="peers,command,pysd,scaling,parallel")
    parser.add_argument("--source", help="head (default), a commit, or tree (the work tree)")
    parser.add_argument("--quick", action="store_true", help="small sizes: a smoke test")
    parser.add_argument("--repeats", type=int, default=5,
                        help="peers: passes at each size, in turns across the tools (default 5)")
    parser.add_argument("--scratch", type=Path, default=OUT,
                        help="where `command` makes its run folders (default benchmarks/out; "
                        "/dev/shm leaves the disk out)")
    args = parser.parse_args()
    print("studyrun measured:", use_source(args.source))
    parts = args.only.split(",")
    load = os.getloadavg()[0]
    if "peers" in parts or "pysd" in parts:
        table: list = []
        if "peers" in parts:
            compare_peers(table, repeats=1 if args.quick else args.repeats)
        if "pysd" in parts:
            compare_pysd(table)
        if not args.quick:
            write_rows("peers", table)
    if "command" in parts:
        table = []
        compare_command(table, repeats=1 if args.quick else 3, scratch=args.scratch,
                        **({"small": 16, "large": 64, "blocks": 6} if args.quick else {}))
        if not args.quick:
            write_rows("command" if args.scratch == OUT else "command-scratch", table)
    if "scaling" in parts:
        table = []
        compare_scaling(table, [1000, 10_000] if args.quick else [1000, 10_000, 100_000, 1_000_000])
        if not args.quick:
            write_rows("scaling", table)
    if "parallel" in parts:
        table = []
        compare_parallel(table, [0.02] if args.quick else [0.001, 0.02, 0.2], 4.5)
        if not args.quick:
            write_rows("parallel", table)
    print(f"load average at start {load:.1f}, at end {os.getloadavg()[0]:.1f} (2 cores)")


if __name__ == "__main__":
    sys.path.insert(0, str(HERE))
    main()
