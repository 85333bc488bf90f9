"""Shared fixtures: study files written on the fly, the CLI in a subprocess, a real Dask cluster."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

# One thread per BLAS (OpenBLAS, MKL, OpenMP) in the test processes and every process they start:
# the suite runs five test processes on two cores, where a second BLAS thread per process only
# spins waiting for a core (the delta example took 26 s of CPU with two threads, 3.5 s with one).
# Set before anything loads numpy; a value given in the environment is kept.
for _threads in ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "OMP_NUM_THREADS"):
    os.environ.setdefault(_threads, "1")

REPO = Path(__file__).resolve().parents[1]
STUDIES = REPO / "studies"
DASK = (sys.executable, "-m", "dask")  # the `dask` command of this interpreter, activated or not

LINEAR_MODEL = '''
import numpy as np

def linear(a, b, c=0.0):
    """y = 2a - 3b + c: moments known exactly for independent inputs."""
    return {"y": 2 * np.asarray(a) - 3 * np.asarray(b) + c, "a_squared": np.asarray(a) ** 2}

def scalar_linear(a, b, c=0.0):
    return {"y": 2 * a - 3 * b + c, "a_squared": a * a}

def flaky(a, b):
    if a > 0.8:
        raise ValueError("a is too large")
    if b > 0.9:
        return float("nan")
    return a + b
'''


def analysis_schema_problems(path: Path) -> list[str]:
    """Where a results folder's analysis.json departs from schemas/analysis.schema.json."""
    import jsonschema

    schema = json.loads((STUDIES.parent / "schemas" / "analysis.schema.json").read_text())
    validator = jsonschema.Draft202012Validator(schema)
    return [f"{'.'.join(map(str, error.absolute_path))}: {error.message[:200]}"
            for error in validator.iter_errors(json.loads(Path(path).read_text()))]


def pytest_configure(config: pytest.Config) -> None:
    """Compile studyrun's modules once, before any test starts a Python process.

    Hundreds of processes import studyrun afresh (`python -m studyrun`, Dask workers, the
    isolated batch runner); where PYTHONDONTWRITEBYTECODE is set (as on CI's machines) none of
    them may write the bytecode it compiles, so each would compile the package again, ~0.2 s of
    CPU apiece. Reading bytecode is still allowed, so one compilation here serves them all."""
    if os.environ.get("STUDYRUN_TEST_TIMES"):  # per-test wall and CPU times (tests/timing.py)
        from timing import Timing

        config.pluginmanager.register(Timing(os.environ["STUDYRUN_TEST_TIMES"]), "timing")
    if hasattr(config, "workerinput"):  # a pytest-xdist worker: the controller did it
        return
    import compileall

    import studyrun

    compileall.compile_dir(Path(studyrun.__file__).parent, quiet=2)
    if sys.dont_write_bytecode:
        rewrite_test_modules(config)


def rewrite_test_modules(config: pytest.Config) -> None:
    """Rewrite the test modules' asserts once, into pytest's cache of them, for every test
    process to read: pytest writes none under PYTHONDONTWRITEBYTECODE, so each test process
    would rewrite all of them again (half of its 8 s of CPU to collect the suite)."""
    import fnmatch

    try:
        from _pytest.assertion import rewrite  # pytest's own steps, as its import hook takes them

        state = config.stash[rewrite.assertstate_key]
    except (ImportError, AttributeError, KeyError):  # another pytest, or --assert=plain
        return
    patterns = [*config.getini("python_files"), "conftest.py"]
    for path in sorted(Path(__file__).parent.rglob("*.py")):
        cache = rewrite.get_cache_dir(path)
        if not any(fnmatch.fnmatch(path.name, p) for p in patterns) or not rewrite.try_makedirs(cache):
            continue
        pyc = cache / (path.name[:-3] + rewrite.PYC_TAIL)
        if rewrite._read_pyc(path, pyc, state.trace) is None:
            source, code = rewrite._rewrite_test(path, config)
            rewrite._write_pyc(state, code, source, pyc)


# Tests that mostly wait (for SLURM jobs, a walltime of a minute): collected first, so that a
# test process starts them at once and the others share out the rest around them, rather than
# one of them waiting at the end of the suite.
WAIT_FIRST = ("tests/cluster/test_slurm.py::test_a_job_that_reaches_its_walltime_is_replaced",
              "tests/cluster/test_slurm.py")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    def rank(item: pytest.Item) -> int:
        return next((i for i, prefix in enumerate(WAIT_FIRST) if item.nodeid.startswith(prefix)),
                    len(WAIT_FIRST))

    items.sort(key=rank)  # a stable sort: the order within each rank is kept
    together_by_example(items, "tests/conformance/test_conformance.py::")


def together_by_example(items: list[pytest.Item], module: str) -> None:
    """The module's checks of one example next to each other, in place: each runs (and caches,
    per test process) its example's studies, and pytest-xdist hands a test process a contiguous
    share of the tests, so that one process, not each, runs an example for its checks."""
    where = [i for i, item in enumerate(items) if item.nodeid.startswith(module)]
    if not where:
        return
    block = [items[i] for i in where]
    first: dict[str, int] = {}
    for i, item in enumerate(block):
        first.setdefault(getattr(getattr(item, "callspec", None), "id", item.nodeid), i)
    block.sort(key=lambda item: first[getattr(getattr(item, "callspec", None), "id", item.nodeid)])
    for i, item in zip(where, block):
        items[i] = item


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """How many test processes `-n auto` (in pyproject's addopts) starts: one per core and one
    more, for the tests that wait for processes, clusters or SLURM jobs they started. Two per
    core and one more (5 on 2 cores) took 13% more CPU and 8% more wall time than 3, their
    processes contending for the cores. PYTEST_XDIST_AUTO_NUM_WORKERS overrides it, as in
    pytest-xdist itself."""
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS", "").isdigit():
        return int(os.environ["PYTEST_XDIST_AUTO_NUM_WORKERS"])
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return (cores or 1) + 1


@pytest.fixture
def study_dir(tmp_path: Path) -> Path:
    """A folder holding a small python model module, `linear.py`."""
    (tmp_path / "linear.py").write_text(LINEAR_MODEL)
    return tmp_path


def write_study(folder: Path, text: str, name: str = "study.yaml") -> Path:
    path = folder / name
    path.write_text(textwrap.dedent(text).lstrip())
    return path


def run_example(folder: Path, name: str, execution: str = "{scheduler: sync}", *,
                report: bool = True, **changes):
    """The example study studies/NAME.yaml, its texts replaced as `changes` says, run in folder
    (beside the studies' model modules and models/) into folder/out with `execution` (when it
    has no execution block of its own), drawing its report unless `report` is false; its
    Results."""
    import studyrun

    text = (STUDIES / f"{name}.yaml").read_text()
    for old, new in changes.items():
        text = text.replace(old, new)
    for module in STUDIES.glob("*.py"):
        (folder / module.name).write_text(module.read_text())
    if not (folder / "models").exists():
        (folder / "models").symlink_to(STUDIES / "models")
    if "execution:" not in text:
        text += f"execution: {execution}\n"
    return studyrun.run(write_study(folder, text, f"{name}.yaml"), folder / "out", report=report)


def context_of(parameters: dict, model=None, folder: Path = Path("."), quantities=None):
    """The StudyContext a study with these parameters gives its analysis (a python model unless
    another is given), for calling an analysis's hooks directly."""
    from studyrun.analyses.base import StudyContext
    from studyrun.blocks.params import varied
    from studyrun.models.python import Python

    model = model or Python(type="python", function="model:f")
    defaults = model.defaults()
    vary = varied(parameters)
    fixed = {n: p.nominal_value(defaults.get(n)) for n, p in parameters.items() if n not in vary}
    return StudyContext(model=model, parameters=dict(parameters), varied=vary, fixed=fixed,
                        defaults=defaults, folder=Path(folder), quantities=quantities)


def run_cli(*args: str, cwd: Path | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    """`studyrun ARGS` as a user runs it: a process of its own (forked from a process that has
    imported studyrun once, tests/cli_server.py), its output and exit status."""
    return CliServer.get().run([str(a) for a in args], Path(cwd or os.getcwd()), timeout)


class CliServer:
    """The tests/cli_server.py process of this test process, started on first use."""

    _running: CliServer | None = None

    @classmethod
    def get(cls) -> CliServer:
        if cls._running is None or cls._running.process.poll() is not None:
            cls._running = cls()
        return cls._running

    def __init__(self) -> None:
        self.process = subprocess.Popen(
            [sys.executable, str(Path(__file__).with_name("cli_server.py"))],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)
        self.buffer = b""
        assert self._answer(None) == {"ready": True}

    def _answer(self, deadline: float | None) -> dict:
        """The server's next answer, waiting until `deadline` (TimeoutError) or for ever (None);
        read from the pipe's descriptor, so that no answer waits in a buffer select cannot see."""
        import select

        fd = self.process.stdout.fileno()
        while b"\n" not in self.buffer:
            if deadline is not None and not select.select(
                    [fd], [], [], max(0.0, deadline - time.monotonic()))[0]:
                raise TimeoutError
            chunk = os.read(fd, 65536)
            if not chunk:
                raise RuntimeError("tests/cli_server.py ended; see the test's stderr")
            self.buffer += chunk
        line, _, self.buffer = self.buffer.partition(b"\n")
        return json.loads(line)

    def run(self, args: list[str], cwd: Path, timeout: float) -> subprocess.CompletedProcess:
        return self.start(args, cwd).wait(timeout)

    def start(self, args: list[str], cwd: Path) -> Started:
        """`studyrun ARGS` started; wait for it (the server starts no other meanwhile)."""
        return Started(self, args, cwd)


class Started:
    """A `studyrun` process of the CLI server's, running: its pid, and wait() for its end."""

    def __init__(self, server: CliServer, args: list[str], cwd: Path) -> None:
        import tempfile

        self.server, self.args = server, ["studyrun", *args]
        self.scratch = tempfile.TemporaryDirectory()
        self.out, self.err = Path(self.scratch.name, "stdout"), Path(self.scratch.name, "stderr")
        request = {"args": args, "cwd": str(cwd), "env": dict(os.environ),
                   "stdout": str(self.out), "stderr": str(self.err)}
        server.process.stdin.write(json.dumps(request) + "\n")
        server.process.stdin.flush()
        self.pid = server._answer(None)["pid"]

    answer: dict | None = None

    def poll(self) -> int | None:
        """Its exit status once it has ended, else None (as Popen.poll)."""
        if self.answer is None:
            try:
                self.answer = self.server._answer(time.monotonic())
            except TimeoutError:
                return None
        return self.answer["status"]

    def wait(self, timeout: float = 120) -> subprocess.CompletedProcess:
        with self.scratch:
            try:
                answer = self.answer or self.server._answer(time.monotonic() + timeout)
            except TimeoutError:
                os.kill(self.pid, 9)
                self.server._answer(None)
                raise subprocess.TimeoutExpired(self.args, timeout) from None
            if "timing" in sys.modules:
                sys.modules["timing"].CLI_CPU[0] += answer["cpu"]
                sys.modules["timing"].CLI_CPU[1] += 1
                sys.modules["timing"].CLI_CALLS.append([answer["cpu"], self.args[1:3]])
            return subprocess.CompletedProcess(self.args, answer["status"],
                                               self.out.read_text(errors="replace"),
                                               self.err.read_text(errors="replace"))


def signals_as(sigint=signal.SIG_DFL):
    """A Popen preexec_fn giving the child SIGINT as said (SIG_DFL: as in a terminal's
    foreground, where Python makes Ctrl-C a KeyboardInterrupt; SIG_IGN: as a background job of a
    script) and SIGTERM at its default, whatever this test process inherited: a suite started in
    the background of a script has SIGINT ignored, and its children would too."""

    def set_dispositions() -> None:
        signal.signal(signal.SIGINT, sigint)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)

    return set_dispositions


@pytest.fixture
def ctrl_c_raises():
    """SIGINT raises KeyboardInterrupt in this test process during the test, as in a terminal's
    foreground, though the suite may have been started with SIGINT ignored."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def count_runs(path: Path) -> int:
    """Run records in a store so far (a failed run made again counts twice), read-only; 0 while
    it does not exist yet."""
    import sqlite3

    try:
        with sqlite3.connect(f"{Path(path).resolve().as_uri()}?mode=ro", uri=True, timeout=1) as db:
            return db.execute("SELECT coalesce(sum(size), 0) FROM batches").fetchone()[0]
    except sqlite3.Error:
        return 0


def stored_runs(folder: Path):
    """The latest record of every run in a results folder's store, in record order, as a frame:
    run.id, run.status, run.error, run.duration, run.worker (as runs.csv names them), then a
    column per parameter and quantity."""
    import numpy as np
    import pandas

    from studyrun.store.run_store import RunStore

    with RunStore.open_readonly(Path(folder) / "runs.sqlite") as store:
        table, names = store.latest_records(), store.parameters + store.quantities
    frame = pandas.DataFrame({"run.id": table.ids, "run.status": np.where(table.ok, "ok", "failed"),
                              "run.error": table.errors, "run.duration": table.duration,
                              "run.worker": table.worker})
    for j, name in enumerate(names):
        frame[name] = np.c_[table.inputs, table.values][:, j]
    return frame


def killed_at(path: Path, out: Path, runs: int) -> int:
    """`studyrun run` SIGKILLed once `runs` runs are stored (or after two minutes): the runs
    stored at the kill."""
    process = CliServer.get().start(["run", str(path), "--out", str(out)], path.parent)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and count_runs(out / "runs.sqlite") < runs:
        time.sleep(0.005)  # a driver forked ready to run stores thousands of quick runs a second
    try:
        os.kill(process.pid, signal.SIGKILL)
    except ProcessLookupError:  # it had ended, and the server had waited for it
        pass
    process.wait()
    return count_runs(out / "runs.sqlite")


def killed_and_resumed(path: Path, out: Path, runs: int) -> tuple[int, dict]:
    """`studyrun run` SIGKILLed once `runs` runs are stored, then run again to the end (drawing
    no report): the runs stored at the kill and the resumed analysis.json."""
    import json

    stored = killed_at(path, out, runs)
    resumed = run_cli("run", "--no-report", str(path), "--out", str(out), cwd=path.parent,
                      timeout=300)
    assert resumed.returncode == 0, resumed.stderr
    return stored, json.loads((out / "analysis.json").read_text())


# A sequential example study -> the one whose results it starts from (`start: {from:
# ../results/NAME}`); it validates only once that one has run.
SEQUENTIAL = {"stock-harvest-sequential": "stock-survey-calibrate",
              "bowl-foldover": "bowl-screen", "bowl-grown-ccd": "bowl-foldover"}


def run_earlier_steps(studies: Path, names: list[str] | None = None) -> None:
    """Run, into studies/../results/, the studies the sequential examples (or the named ones)
    start from, each after the one it starts from in turn, so that a copy of studies/ validates
    whole."""
    import studyrun

    done: set[str] = set()

    def run(name: str) -> None:
        if name not in done:
            if name in SEQUENTIAL:
                run(SEQUENTIAL[name])
            studyrun.run(studies / f"{name}.yaml", studies.parent / "results" / name,
                         scheduler="sync", report=False)  # read as `from:`, not as a report
            done.add(name)

    for earlier in sorted({SEQUENTIAL[n] for n in names or SEQUENTIAL}):
        run(earlier)


def hash_seeds_that_reorder(*names: str, count: int = 2) -> list[int]:
    """`count` PYTHONHASHSEED values under each of which a set of these strings iterates in
    another order: runs under them show whether anything depends on the hash seed."""
    seeds, orders = [], set()
    for seed in range(100):
        done = subprocess.run([sys.executable, "-S", "-c", f"print(list({set(names)!r}))"],
                              env={**os.environ, "PYTHONHASHSEED": str(seed)},
                              capture_output=True, text=True, check=True)
        if done.stdout not in orders:
            orders.add(done.stdout)
            seeds.append(seed)
            if len(seeds) == count:
                return seeds
    raise AssertionError(f"no {count} hash seeds order {names} differently")


def alive(pid: int) -> bool:
    """True while pid runs (a zombie left for an init that does not reap counts as dead)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            return handle.read().rsplit(b")", 1)[1].split()[0] not in (b"Z", b"X")
    except OSError:
        return False


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def dask_scheduler():
    """A real `dask scheduler` with two `dask worker` processes on 127.0.0.1, shared by the
    tests that run one after the other in a test process and stopped after the last of them
    (pytest_runtest_teardown): an idle cluster's heartbeats and monitors cost some 12% of a
    core, more than starting one again for a test that comes much later."""
    if not SCHEDULER:
        SCHEDULER.update(start_dask_scheduler())
    yield SCHEDULER["address"]


SCHEDULER: dict = {}  # the running dask_scheduler's address and processes


def start_dask_scheduler() -> dict:
    port = free_port()
    address = f"tcp://127.0.0.1:{port}"
    # no statistical profiler in the workers: it samples every thread every 10 ms, idle or not
    env = {**os.environ, "PYTHONPATH": str(REPO), "DASK_DISTRIBUTED__WORKER__PROFILE__ENABLED": "False"}
    scheduler = subprocess.Popen([*DASK, "scheduler", "--host", "127.0.0.1", "--port", str(port),
                                  "--no-dashboard"], stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL, env=env)
    workers = [subprocess.Popen([*DASK, "worker", address, "--nthreads", "1", "--no-dashboard",
                                 "--name", f"w{i}"], stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, env=env) for i in range(2)]
    from distributed import Client

    deadline = time.time() + 60
    while True:
        try:
            with Client(address, timeout="2s") as client:
                if len(client.scheduler_info()["workers"]) == 2:
                    break
        except OSError:
            pass
        if time.time() > deadline:
            raise RuntimeError("dask scheduler did not start")
        time.sleep(0.5)
    return {"address": address, "processes": [*workers, scheduler]}


def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    """Stop the dask_scheduler once the next test of this process does not ask for it: its
    workers first; its scheduler once they have ended (a worker whose scheduler ended first
    waits some 8 s for it before it closes)."""
    stop_schedulers_left()
    if SCHEDULER and "dask_scheduler" not in getattr(nextitem, "fixturenames", ()):
        *workers, scheduler = SCHEDULER["processes"]
        for process in workers:
            process.terminate()
        STOPPING.extend(workers)  # they close while the next tests run
        SCHEDULERS_LEFT.append((workers, scheduler))
        SCHEDULER.clear()


def stop_schedulers_left(wait: float = 0.0) -> None:
    """Stop the schedulers whose workers have ended (waiting up to `wait` seconds for them)."""
    for workers, scheduler in list(SCHEDULERS_LEFT):
        for worker in workers:
            with contextlib.suppress(subprocess.TimeoutExpired):
                worker.wait(wait)
        if all(worker.poll() is not None for worker in workers) or wait > 0:
            scheduler.terminate()
            STOPPING.append(scheduler)
            SCHEDULERS_LEFT.remove((workers, scheduler))


STOPPING: list[subprocess.Popen] = []  # processes told to stop, waited for at the session's end
SCHEDULERS_LEFT: list[tuple[list[subprocess.Popen], subprocess.Popen]] = []  # and to stop next


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Wait for the processes fixtures told to stop (a Dask worker's nanny takes up to a second
    to close, which the test process need not spend idle at the end of each module), stopping
    the schedulers left once their workers have ended. The CLI
    server is waited for too, so that its CPU and its children's count in the suite's own (in
    `/usr/bin/time python -m pytest`, which saw none of it before)."""
    stop_schedulers_left(wait=10)
    if CliServer._running is not None:
        CliServer._running.process.stdin.close()
        STOPPING.append(CliServer._running.process)
    for process in STOPPING:
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def can_mount() -> bool:
    return os.geteuid() == 0 and shutil.which("mount") is not None and sys.platform == "linux"


@pytest.fixture
def mount_tmpfs():
    """Mount small tmpfs file systems (root only: the tests that need it are marked system);
    unmounted afterwards."""
    mounted = []

    def mount(where: Path, options: str) -> Path:
        where.mkdir(parents=True, exist_ok=True)
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(where)],
                              capture_output=True, text=True)
        if done.returncode != 0:
            pytest.fail(f"cannot mount a tmpfs here (the system tier runs as root): "
                        f"{done.stderr.strip()}", pytrace=False)
        mounted.append(where)
        return where

    yield mount
    for where in reversed(mounted):
        subprocess.run(["umount", "-l", str(where)], capture_output=True)
