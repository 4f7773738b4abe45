"""Run an engine in its own process group: output to a file, a wall-clock timeout, its verdict."""

from __future__ import annotations

import os
import subprocess

import msgspec

from git_brat.brat import engines
from git_brat.brat.engines import EngineResult, Invocation, Preset
from git_brat.files import open_private, private_dir
from git_brat.process import Proc, hostname, start_time, stop_group

def spawn(inv: Invocation, cwd: str, log_path: str, env: dict[str, str]) -> tuple[subprocess.Popen, Proc]:
    """Start the engine as a group leader, its stdout and stderr appended to log_path.

    A file, not a pipe: if the witness dies the engine keeps a place to write, and the log
    stays whole for the recovery report.
    """
    private_dir(os.path.dirname(log_path))
    log = open_private(log_path)     # the engine's whole output: it may hold secrets
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


__all__ = ["spawn", "read_from", "tail", "run_once", "Run"]
