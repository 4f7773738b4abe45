"""Background roles: start detached with a pid file, tell whether one runs, stop it cleanly."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import msgspec

from git_brat.brat import runner
from git_brat.grite.errors import Conflict, NotFound
from git_brat.grite.files import atomic_write
from git_brat.grite.locks import hostname


class PidFile(msgspec.Struct):
    role: str
    pid: int
    start: int
    host: str
    argv: list[str]
    started_at: int            # ms
    log: str


def pid_path(brat_dir: str, role: str) -> str:
    return os.path.join(brat_dir, f"{role}.pid")


def read(brat_dir: str, role: str) -> PidFile | None:
    """The role's pid file if the process it names is still that process; stale ones are removed."""
    path = pid_path(brat_dir, role)
    try:
        with open(path, "rb") as f:
            pf = msgspec.json.decode(f.read(), type=PidFile)
    except (FileNotFoundError, msgspec.DecodeError, msgspec.ValidationError):
        return None
    if not runner.same_process(runner.Proc(pf.pid, pf.start, pf.host)):
        if pf.host == hostname():
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass
        return None
    return pf


def _launcher() -> list[str]:
    """This installation's git-brat, whatever PATH says."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    return [sys.executable, "-c",
            f"import sys; sys.path.insert(0, {root!r}); from git_brat.brat.cli import main; main()"]


def detach(brat_dir: str, role: str, args: list[str], cwd: str) -> PidFile:
    """Start `git brat ARGS` in the background, in its own session, logging to <role>.log."""
    running = read(brat_dir, role)
    if running is not None:
        raise Conflict(f"a detached {role} already runs here (pid {running.pid}); "
                       f"`git brat {role} stop` stops it")
    os.makedirs(brat_dir, exist_ok=True)
    log = os.path.join(brat_dir, f"{role}.log")
    with open(log, "ab") as out:
        proc = subprocess.Popen([*_launcher(), *args], cwd=cwd, stdin=subprocess.DEVNULL,
                                stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
                                env={**os.environ, "BRAT_DETACHED": role})
    pf = PidFile(role, proc.pid, runner.start_time(proc.pid) or 0, hostname(),
                 ["git", "brat", *args], int(time.time() * 1000), log)
    atomic_write(pid_path(brat_dir, role), msgspec.json.encode(pf))
    return pf


def write_own(brat_dir: str, role: str, argv: list[str] | None = None, log: str = "") -> None:
    """Record this process as the running <role> (the pid file names it by pid and start time,
    so a reused pid is never taken for it)."""
    os.makedirs(brat_dir, exist_ok=True)
    pf = PidFile(role, os.getpid(), runner.start_time(os.getpid()) or 0, hostname(),
                 argv if argv is not None else ["git", "brat", *sys.argv[1:]],
                 int(time.time() * 1000), log or os.path.join(brat_dir, f"{role}.log"))
    atomic_write(pid_path(brat_dir, role), msgspec.json.encode(pf))


def running_pid(brat_dir: str, role: str) -> int | None:
    pf = read(brat_dir, role)
    return pf.pid if pf is not None else None


def forget(brat_dir: str, role: str) -> None:
    """Remove our own pid file (a detached role calls this as it exits)."""
    pf = read(brat_dir, role)
    if pf is not None and pf.pid == os.getpid():
        os.unlink(pid_path(brat_dir, role))


def stop(brat_dir: str, role: str, timeout: float = 60.0) -> PidFile:
    """SIGTERM the running role and wait for it to finish stopping its work."""
    pf = read(brat_dir, role)
    if pf is None:
        raise NotFound(f"no {role} runs here")
    os.kill(pf.pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if runner.start_time(pf.pid) != pf.start:
            break
        time.sleep(0.1)
    else:
        raise Conflict(f"the {role} (pid {pf.pid}) did not stop within {timeout:.0f}s")
    try:
        os.unlink(pid_path(brat_dir, role))
    except FileNotFoundError:
        pass
    return pf


__all__ = ["PidFile", "detach", "read", "stop", "forget", "write_own", "running_pid"]
