"""Running the user's check command: its own process group, a timeout, the lease renewed meanwhile."""

from __future__ import annotations

import subprocess
import time
from typing import Callable

from git_brat import process
from git_brat.git.run import environment


def run_check(command: str, cwd: str, timeout: float, log, pid_path: str,
              started: Callable[[subprocess.Popen], None],
              tick: Callable[[], None]) -> int | str:
    """`sh -c command` in cwd, output to log: its exit code, or "timeout" (then it is killed).

    Its process-group id is kept in pid_path while it runs, so a refinery that takes over
    from a killed one can stop a check left behind.
    """
    proc = subprocess.Popen(["sh", "-c", command], cwd=cwd, stdin=subprocess.DEVNULL,
                            stdout=log, stderr=subprocess.STDOUT,
                            env=environment("worktree", {"BRAT_REFINERY": "1"}),
                            start_new_session=True)
    started(proc)
    process.write_pid_file(pid_path, "check", process.Proc(proc.pid, process.start_time(proc.pid)
                                                           or 0, process.hostname()),
                           ["sh", "-c", command])
    deadline = time.monotonic() + timeout
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                kill(proc)
                return "timeout"
            try:
                return proc.wait(timeout=min(left, 5.0))
            except subprocess.TimeoutExpired:
                tick()
    finally:
        if proc.poll() is None:
            kill(proc)
        process.forget_pid_file(pid_path, proc.pid)


def kill(proc: subprocess.Popen) -> None:
    """SIGTERM to the check's process group, SIGKILL if it lingers; the check reaped."""
    process.stop_group(proc.pid, process.GRACE, wait_for=proc.poll)
    proc.wait()


def git_pids(text: str | None) -> list[int]:
    """The pids a hook passed in BRAT_GIT_PID ("123 120": the git commands running it)."""
    out = []
    for word in (text or "").split():
        if word.isdigit() and int(word) > 1:
            out.append(int(word))
    return out


__all__ = ["run_check", "kill", "git_pids"]
