"""Run an engine in its own process group: output to a file, a wall-clock timeout, its verdict."""

from __future__ import annotations

import os
import signal
import subprocess
import time

import msgspec

from git_brat.brat import engines
from git_brat.brat.engines import EngineResult, Invocation, Preset
from git_brat.grite.locks import hostname

GRACE = 5.0          # seconds between TERM and KILL


class Proc(msgspec.Struct):
    """A started process as recorded: enough to find it again, and never hit a reused pid."""
    pid: int
    start: int           # kernel start time (clock ticks since boot), 0 if unknown
    host: str


def start_time(pid: int) -> int | None:
    """The process's start time from /proc (None: no such process)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    # The command name (field 2) may hold spaces and parentheses: split after its last ')'.
    rest = data[data.rindex(b")") + 2:].split()
    if rest[0] == b"Z":
        return None   # a zombie has ended; only its parent's wait is missing
    return int(rest[19])


def group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


def same_process(proc: Proc) -> bool:
    """Whether proc.pid on this host is still the process we started (not a reused pid)."""
    if proc.host != hostname():
        return False
    now = start_time(proc.pid)
    return now is not None and (proc.start == 0 or now == proc.start)


def stop_group(pgid: int, grace: float = GRACE, wait_for=None) -> bool:
    """TERM the whole group, then KILL what is left after `grace`; True if anything was there."""
    try:
        os.killpg(pgid, signal.SIGTERM)
    except ProcessLookupError:
        return False
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        if wait_for is not None:
            wait_for()
        if not group_alive(pgid):
            return True
        time.sleep(0.05)
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    return True


def stop_orphan(proc: Proc, grace: float = GRACE) -> bool:
    """Stop a recorded engine's process group on this host, if it is still the same process.

    The group leader may be gone while its children still write: a pid is not reused while a
    group of that id exists, so a live group with our pid as its id is ours.
    """
    if proc.host != hostname() or proc.pid <= 1:
        return False
    now = start_time(proc.pid)
    if now is not None and proc.start and now != proc.start:
        return False   # the pid now belongs to someone else
    if not group_alive(proc.pid):
        return False
    return stop_group(proc.pid, grace)


def spawn(inv: Invocation, cwd: str, log_path: str, env: dict[str, str]) -> tuple[subprocess.Popen, Proc]:
    """Start the engine as a group leader, its stdout and stderr appended to log_path.

    A file, not a pipe: if the witness dies the engine keeps a place to write, and the log
    stays whole for the recovery report.
    """
    os.makedirs(os.path.dirname(log_path), exist_ok=True)
    log = open(log_path, "ab")
    stdin = open(inv.stdin, "rb") if inv.stdin else subprocess.DEVNULL
    try:
        popen = subprocess.Popen(inv.argv, cwd=cwd, env={**env, **inv.env}, stdin=stdin,
                                 stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    finally:
        log.close()
        if inv.stdin:
            stdin.close()
    return popen, Proc(popen.pid, start_time(popen.pid) or 0, hostname())


def read_from(path: str, offset: int, limit: int = 4 << 20) -> str:
    """The text of a log from offset on (its last `limit` bytes)."""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(offset, size - limit))
            return f.read().decode("utf-8", "replace")
    except FileNotFoundError:
        return ""


def tail(path: str, lines: int = 20) -> str:
    text = read_from(path, 0, 64 << 10)
    return "\n".join(text.rstrip("\n").splitlines()[-lines:])


class Run(msgspec.Struct):
    """A finished run of an engine (`run_once`)."""
    exit_code: int | None        # None: killed at the timeout
    timed_out: bool
    output: str
    result: EngineResult
    argv: list[str]


def run_once(p: Preset, inv: Invocation, cwd: str, log_path: str, env: dict[str, str],
             timeout: float) -> Run:
    """Run an engine to the end in the foreground (the mayor's way), with the timeout enforced."""
    start = os.path.getsize(log_path) if os.path.exists(log_path) else 0
    popen, _proc = spawn(inv, cwd, log_path, env)
    timed_out = False
    try:
        popen.wait(timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        stop_group(popen.pid, wait_for=popen.poll)
        popen.wait()
    except BaseException:
        stop_group(popen.pid, wait_for=popen.poll)
        popen.wait()
        raise
    output = read_from(log_path, start)
    return Run(None if timed_out else popen.returncode, timed_out, output,
               engines.read_result(p, output), inv.argv)


__all__ = ["Proc", "spawn", "stop_group", "stop_orphan", "same_process", "start_time",
           "read_from", "tail", "run_once", "Run"]
