"""Running the user's check command: its own process group, a timeout, the lease renewed meanwhile."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from typing import Callable

from git_brat.grite import gitstore


def run_check(command: str, cwd: str, timeout: float, log, pid_path: str,
              started: Callable[[subprocess.Popen], None],
              tick: Callable[[], None]) -> int | str:
    """`sh -c command` in cwd, output to log: its exit code, or "timeout" (then it is killed).

    Its process-group id is kept in pid_path while it runs, so a refinery that takes over
    from a killed one can stop a check left behind.
    """
    proc = subprocess.Popen(["sh", "-c", command], cwd=cwd, stdin=subprocess.DEVNULL,
                            stdout=log, stderr=subprocess.STDOUT,
                            env=gitstore.clean_env({"BRAT_REFINERY": "1"}),
                            start_new_session=True)
    started(proc)
    with open(pid_path, "w") as f:
        f.write(f"{proc.pid}\n")
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
        try:
            os.unlink(pid_path)
        except OSError:
            pass


def kill(proc: subprocess.Popen) -> None:
    """SIGTERM to the check's process group, SIGKILL if it lingers."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=5)
            return
        except subprocess.TimeoutExpired:
            continue


def pid_alive(pid: int) -> bool:
    """A running process (a zombie nobody reaped does not count)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (OSError, IndexError):
        try:
            os.kill(pid, 0)
            return True
        except ProcessLookupError:
            return False
        except PermissionError:
            return True


def git_pids(text: str | None) -> list[int]:
    """The pids a hook passed in BRAT_GIT_PID ("123 120": the git commands running it)."""
    out = []
    for word in (text or "").split():
        if word.isdigit() and int(word) > 1:
            out.append(int(word))
    return out


def wait_for_exit(pids: list[int], timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and any(pid_alive(p) for p in pids):
        time.sleep(0.05)


__all__ = ["run_check", "kill", "pid_alive", "git_pids", "wait_for_exit"]
