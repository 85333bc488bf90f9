"""Running a batch: one subprocess per run in its own workdir, the next run's made while the
current one runs (params file, logs, timeout, cleanup)."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, NamedTuple

import numpy as np

from studyrun.core.batch import Evaluator, ModelOutput, RunContext
from studyrun.core.seeds import run_seed
from studyrun.models.command.placeholders import PLACEHOLDERS, Parts, fields, render, spec_problem
from studyrun.models.command.processes import MARK, BatchProcesses, end_group, kill_marked, wait_for
from studyrun.models.command.results import RunFailed, assemble, read_results

_STDERR_LINES = 20
LOGS = ("stdout.txt", "stderr.txt")


class Prepared(NamedTuple):
    """A run ready to start: its workdir (params file written) and its argv."""

    workdir: Path
    argv: list[str]


@dataclass(frozen=True)
class CommandEvaluator(Evaluator):
    """Runs a batch of runs one subprocess each (the conventions: studyrun.models.command)."""

    argv: tuple[Parts, ...]
    study_dir: str
    params_name: str
    template: Parts | None
    results_name: str
    timeout: float | None
    env: tuple[tuple[str, str], ...]
    keep: str
    memory_limit: int | None
    memory_text: str | None = None
    max_output: int = 100 * 10**6  # bytes: a larger results file fails its run unread
    max_output_text: str = "100MB"
    whole: frozenset[str] = frozenset()  # inputs written as whole numbers (10, not 10.0)
    columns: tuple[str, ...] | None = None  # a results table's columns, when it has no header

    def __call__(self, inputs: dict[str, np.ndarray], context: RunContext) -> ModelOutput:
        n = len(context.run_ids)
        names = list(inputs)
        # as Python numbers, an int64 column (an integer constant) as ints: exact beyond 2**53
        columns = [np.broadcast_to(np.asarray(inputs[k]), (n,)).tolist() for k in names]
        rows = list(zip(*columns)) if names else [()] * n
        out = ModelOutput(n)
        try:
            base = _make_base(context.workdir)
        except OSError as exc:
            for i in range(n):
                out.fail(i, f"cannot make the working folder {context.workdir}: {exc}")
            return out
        env = {**os.environ, **dict(self.env)}
        batch_error = self._check_fields(names)
        run_ids = [f"{int(r) & 0xFFFFFFFFFFFFFFFF:016x}" for r in context.run_ids]
        workdirs = [base / f"run-{run_id}" for run_id in run_ids]

        spare: list[Path] = []  # empty logs of runs that succeeded, for later runs' folders
        lent: list[int] = []  # the runs whose logs went there

        def prepare(i: int) -> Prepared | Exception | None:
            """Run i's folder and files; why they could not be made (recorded on run i)."""
            if i == n:
                return None
            if batch_error:
                return RunFailed(batch_error)
            try:
                return self._prepare(self._typed(names, rows[i]), workdirs[i],
                                     run_ids[i], spare)
            except Exception as exc:
                return exc

        parsed: list = [None] * n
        processes, upcoming = BatchProcesses(), None
        try:
            for i in range(n):
                run, upcoming = (prepare(i) if upcoming is None else upcoming), None
                try:
                    if isinstance(run, Exception):
                        raise run
                    returncode, upcoming = self._execute(
                        run, processes.environment(env, run_ids[i]), processes,
                        meanwhile=lambda: prepare(i + 1))  # noqa: B023 (called at once)
                    parsed[i] = self._results(run.workdir, returncode)
                    if self.keep != "all" and _lend_empty_logs(run.workdir, spare):
                        lent.append(i)
                except RunFailed as exc:
                    out.fail(i, str(exc))
                except Exception as exc:  # a run never raises: record anything unforeseen on it
                    out.fail(i, f"{type(exc).__name__}: {exc}")
        finally:
            processes.end()
        assemble(out, parsed, self.results_name)
        self._clean_up(out, workdirs, base if context.workdir is None else None, lent)
        return out

    def _check_fields(self, names: list[str]) -> str | None:
        """Why no run of the batch can be prepared: a field naming no input, or a format spec
        that does not fit its value (validation says so first; this guards an evaluator built
        without it)."""
        texts = [(f"the template for {self.params_name}", self.template)] if self.template else []
        texts += [(f"argument {k} of run", parts) for k, parts in enumerate(self.argv)]
        kinds = {**{n: "whole" if n in self.whole else "real" for n in names},
                 **dict.fromkeys(PLACEHOLDERS, "text")}
        for what, parts in texts:
            for field in fields(parts):
                if field.name not in kinds:
                    return (f"{what} has unknown name {{{field.name}}}; known: "
                            f"{', '.join(names + list(PLACEHOLDERS))}")
                if (why := spec_problem(field, kinds[field.name])) is not None:
                    return f"{what}: {why}"
        return None

    def _typed(self, names: list[str], row: tuple) -> dict[str, float | int]:
        """A run's inputs: those the study gives as whole numbers as ints, the others as floats;
        RunFailed for one that is not whole in this run (an analysis moved it off its values)."""
        typed: dict[str, float | int] = {k: float(v) for k, v in zip(names, row)}
        for name, value in zip(names, row):
            if name not in self.whole:
                continue
            if not float(value).is_integer():
                raise RunFailed(
                    f"{name} is a whole number in this study (an integer constant or values: of "
                    f"integers) but this run gives it {value!r}: the analysis moves it between "
                    f"whole numbers, which the program would misread; give {name} real values "
                    f"(1.0, not 1) if the program reads a real, or use an analysis that draws "
                    f"it from its values (montecarlo, sweep, sobol)")
            typed[name] = int(value)
        return typed

    def _prepare(self, row: dict[str, float | int], workdir: Path, run_id: str,
                 spare: list[Path]) -> Prepared:
        """The run's fresh workdir with its params file and empty stdout.txt and stderr.txt,
        renamed from `spare` while it has some: a new file costs more (an inode to allocate;
        0.1-6 ms on an ext4 without a journal, which skips the ones freed in the last minutes)."""
        _make_fresh_dir(workdir)
        where = {"params_file": str(workdir / self.params_name),
                 "results_file": str(workdir / self.results_name),
                 "workdir": str(workdir), "study_dir": self.study_dir, "run_id": run_id,
                 "seed": run_seed(int(run_id, 16))}
        self._write_params(row, workdir / self.params_name, where)
        for name in LOGS:
            try:
                os.replace(spare.pop(), workdir / name)
            except (IndexError, OSError):
                open(workdir / name, "wb").close()
        values = {**row, **where}
        return Prepared(workdir, [render(parts, values) for parts in self.argv])

    def _write_params(self, row: dict[str, float | int], path: Path, where: dict[str, object]) -> None:
        if path.parent != Path(where["workdir"]):
            path.parent.mkdir(parents=True, exist_ok=True)
        if self.template is not None:
            text = render(self.template, {**row, **where})
        elif path.suffix.lower() == ".json":
            text = json.dumps(row)
        else:
            import yaml
            text = yaml.safe_dump(row, sort_keys=False)
        path.write_text(text)

    def _execute(self, run: Prepared, env: dict[str, str], processes: BatchProcesses,
                 meanwhile: Callable[[], object]) -> tuple[int | None, object]:
        """Run the program in its workdir with output to stdout.txt/stderr.txt, calling
        `meanwhile` while it runs; its exit status (None at the timeout) and what `meanwhile`
        returned. When it ends its group is killed, at a timeout everything it started (see
        processes.py)."""
        preexec = None
        if self.memory_limit is not None:
            import functools
            import resource
            limits = (self.memory_limit, self.memory_limit)
            preexec = functools.partial(resource.setrlimit, resource.RLIMIT_AS, limits)
        workdir, argv = run.workdir, run.argv
        with open(workdir / "stdout.txt", "wb") as out, open(workdir / "stderr.txt", "wb") as err:
            try:
                proc = subprocess.Popen(argv, cwd=workdir, env=env, stdin=subprocess.DEVNULL,
                                        stdout=out, stderr=err, process_group=0,
                                        preexec_fn=preexec)
            except FileNotFoundError:
                if os.path.isfile(argv[0]):
                    raise RunFailed(f"cannot start {argv[0]}: the interpreter on its #! line "
                                     "was not found") from None
                raise RunFailed(f"program not found: {argv[0]!r} (not on PATH; a relative "
                                 "path is resolved against the study folder)") from None
            except PermissionError:
                if not _exists_on_path(argv[0], env):  # EACCES came from a folder on the PATH
                    raise RunFailed(f"program not found: {argv[0]!r} (not on PATH; a folder on "
                                     "PATH could not be read)") from None
                raise RunFailed(f"program not executable: {argv[0]!r}") from None
        started = time.monotonic()
        processes.started(proc)
        returncode = None
        try:
            later = meanwhile()
            returncode = wait_for(proc, None if self.timeout is None else started + self.timeout)
        finally:  # also when interrupted (KeyboardInterrupt, cancellation)
            end_group(proc)
            if returncode is None:
                kill_marked([env[MARK]], since=proc.pid)
        return returncode, later

    def _results(self, workdir: Path, returncode: int | None):
        """The run's parsed results file; RunFailed when it timed out, failed or wrote none."""
        stderr_path = workdir / "stderr.txt"
        if returncode is None:
            raise RunFailed(f"timed out after {self.timeout:g} s (it and every process it started "
                             "were killed)" + _tail(stderr_path, "; stderr ends:\n"))
        if returncode != 0:
            raise RunFailed(self._describe_exit(returncode, stderr_path))
        results = workdir / self.results_name
        if not results.is_file():
            raise RunFailed(f"exited with status 0 but wrote no {self.results_name}"
                             + _tail(stderr_path, "; stderr ends:\n"))
        size = results.stat().st_size
        if size > self.max_output:
            raise RunFailed(f"{self.results_name} is {size:,} bytes, more than max_output "
                             f"({self.max_output_text}); write less, or raise the model's "
                             "max_output")
        return read_results(results, self.columns)

    def _describe_exit(self, returncode: int, stderr_path: Path) -> str:
        if returncode < 0:
            try:
                what = f"killed by signal {signal.Signals(-returncode).name}"
            except ValueError:
                what = f"killed by signal {-returncode}"
        else:
            what = f"exited with status {returncode}"
        tail = _tail(stderr_path, "")
        if self.memory_limit is not None and (returncode < 0 or re.search(
                r"MemoryError|bad_alloc|[Cc]annot allocate|[Oo]ut of memory", tail)):
            what += f" (memory_limit is {self.memory_text}: the run may have run out of memory)"
        return what + (f"; stderr ends:\n{tail}" if tail else "")

    def _clean_up(self, out: ModelOutput, workdirs: list[Path], temp_base: Path | None,
                  lent: list[int]) -> None:
        for i in lent:  # failed after all (an output other runs have is missing): logs back
            if out.errors[i] is not None and self.keep == "failed":
                for name in LOGS:
                    open(workdirs[i] / name, "ab").close()
        for i, workdir in enumerate(workdirs):
            failed = out.errors[i] is not None
            if self.keep == "all" or (failed and self.keep == "failed"):
                if failed and workdir.exists():
                    out.errors[i] += f"\n(files kept in {workdir})"
                continue
            shutil.rmtree(workdir, ignore_errors=True)
        if temp_base is not None:
            try:
                temp_base.rmdir()  # only when empty
            except OSError:
                pass


def _make_base(workdir: Path | None) -> Path:
    """The batch's folder of run workdirs: the given one, or a new temporary folder."""
    if workdir is None:
        return Path(tempfile.mkdtemp(prefix="studyrun-"))
    Path(workdir).mkdir(parents=True, exist_ok=True)
    return Path(workdir)


def _make_fresh_dir(path: Path) -> None:
    """Make the run's workdir, emptying a stale one from an earlier attempt."""
    try:
        path.mkdir()
    except FileExistsError:
        shutil.rmtree(path)
        path.mkdir()
    except OSError as exc:
        raise RunFailed(f"cannot make working directory {path}: {exc.strerror}") from None


def _lend_empty_logs(workdir: Path, spare: list[Path]) -> bool:
    """Add the run's stdout.txt and stderr.txt to `spare` when both are empty. (A process that
    left the run's group and outlives it, killed when the batch ends, may write into them after,
    in a later run's folder.)"""
    logs = [workdir / name for name in LOGS]
    try:
        if any(log.stat().st_size for log in logs):
            return False
    except OSError:
        return False
    spare += logs
    return True


def _tail(path: Path, prefix: str) -> str:
    """The last lines of a run's stderr (at most 20 lines of the last 8 kB), after prefix."""
    try:
        with open(path, "rb") as f:
            f.seek(max(0, f.seek(0, os.SEEK_END) - 8192))
            text = f.read().decode("utf-8", errors="replace")
    except OSError:
        return ""
    lines = text.rstrip().splitlines()[-_STDERR_LINES:]
    return prefix + "\n".join(lines) if lines else ""


def _exists_on_path(program: str, env: dict[str, str]) -> bool:
    """Whether `program` is a file: a path as it is, a bare name in a folder of env's PATH (execvp
    reports EACCES for a folder it cannot search, though the program is nowhere)."""
    if os.sep in program:
        return os.path.isfile(program)
    folders = env.get("PATH", os.defpath).split(os.pathsep)
    return any(os.path.isfile(os.path.join(folder or ".", program)) for folder in folders)
