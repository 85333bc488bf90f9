"""Ending every process a run started: its process group, and on Linux also the descendants that
left the group (setsid, a daemon's double fork), found by a mark in their environment.

Each run's program leads a new process group, with `STUDYRUN_RUN=<mark>` in its environment,
which its descendants inherit. It stays in the driver's session: on Linux a new session per run
(setsid) is also a new scheduling autogroup, which cost each run 0.7-1.7 ms on a busy machine;
so a program that reads the terminal itself (/dev/tty; its stdin is /dev/null) is stopped, as a
background job is, until its timeout or a Ctrl-C of the driver. When the program ends its group
is killed; at a timeout or an interruption also every process of this user still carrying the
mark, and for the other runs of a batch when the batch ends (one look through /proc for the
whole batch). Out of reach: a process that clears or rewrites its environment before exec
(`env -i`), one running as another user, one started after pid numbers went all the way round,
and, without /proc (macOS), anything that left the group.
"""

from __future__ import annotations

import math
import os
import secrets
import select
import signal
import subprocess
import time

MARK = "STUDYRUN_RUN"
_PATIENCE = 2.0  # seconds to wait for killed processes to die (a loaded machine is slow to)


def new_mark(run_id: str) -> str:
    """A mark no other run (of this or another studyrun process) carries."""
    return f"{run_id}-{os.getpid()}-{secrets.token_hex(4)}"


class BatchProcesses:
    """The marks of a batch's runs and its first program's pid: what to look for when the
    batch ends."""

    def __init__(self) -> None:
        self.marks: list[str] = []
        self.first_pid: int | None = None

    def environment(self, env: dict[str, str], run_id: str) -> dict[str, str]:
        """`env` with a new run's mark."""
        self.marks.append(new_mark(run_id))
        return {**env, MARK: self.marks[-1]}

    def started(self, proc: subprocess.Popen) -> None:
        if self.first_pid is None:
            self.first_pid = proc.pid

    def end(self) -> None:
        """Kill whatever the batch's runs left running."""
        if self.first_pid is not None:
            kill_marked(self.marks, self.first_pid)


def end_group(proc: subprocess.Popen) -> None:
    """Kill the program's process group (it leads its own), then reap the program."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError, AttributeError):
        if proc.poll() is None:
            proc.kill()
    proc.wait()


def wait_for(proc: subprocess.Popen, deadline: float | None) -> int | None:
    """The program's exit status, or None if it still runs at `deadline` (time.monotonic()).
    Woken by its exit through a pidfd on Linux: Popen.wait(timeout) polls, with sleeps that
    double up to 50 ms, which a run of a few milliseconds would pay again and again."""
    if deadline is None:
        return proc.wait()
    try:
        pidfd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):  # not Linux 5.3+
        try:
            return proc.wait(timeout=max(deadline - time.monotonic(), 0))
        except subprocess.TimeoutExpired:
            return None
    try:
        waiting = select.poll()
        waiting.register(pidfd, select.POLLIN)
        while True:
            left = max(deadline - time.monotonic(), 0.0)
            if waiting.poll(min(math.ceil(left * 1000), 2**31 - 1)):  # milliseconds, a C int
                return proc.wait()
            if not left:
                return None
    finally:
        os.close(pidfd)


def kill_marked(marks: list[str], since: int) -> None:
    """Kill every process carrying one of the marks, and wait until none is left: SIGKILL takes
    effect only when the process is next scheduled, and descendants may fork meanwhile."""
    deadline = time.monotonic() + _PATIENCE
    pause = 0.001
    while found := marked(marks, since):
        for pid in found:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        if time.monotonic() > deadline:
            return
        time.sleep(pause)
        pause = min(2 * pause, 0.05)


def marked(marks: list[str], since: int) -> list[int]:
    """Live processes carrying one of the marks. Only pids from `since` (the first program's)
    on are read, unless pid numbers wrapped around meanwhile: reading every process's
    environment would cost more than a small program's run."""
    try:
        names = os.listdir("/proc")
        with open("/proc/loadavg") as loadavg:
            last_pid = int(loadavg.read().split()[-1])
    except (OSError, ValueError):
        return []
    first = since if last_pid >= since else 0
    wanted = {mark.encode() for mark in marks}
    key = f"\0{MARK}=".encode()
    found = []
    for name in names:
        if not name.isdigit() or int(name) < first:
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as environ:
                text = b"\0" + environ.read()  # a zombie's is empty
        except OSError:  # gone, or another user's
            continue
        start = text.find(key)
        if start >= 0 and text[start + len(key):].split(b"\0", 1)[0] in wanted:
            found.append(int(name))
    return found
