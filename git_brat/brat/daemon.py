"""Background roles (witness, refinery, deacon): start detached with a pid file, tell whether
one runs, stop it cleanly. The pid file itself is git_brat.process's."""

from __future__ import annotations

import os
import signal
import sys
import time

from git_brat import process
from git_brat.brat import layout
from git_brat.errors import Conflict, NotFound
from git_brat.git.store import Store
from git_brat.process import PidFile


def read(store: Store, role: str) -> PidFile | None:
    """The role's pid file if the process it names is still that process; stale ones are removed."""
    return process.read_pid_file(layout.pid_file(store, role))


def detach(store: Store, role: str, args: list[str], cwd: str) -> PidFile:
    """Start `git brat ARGS` in the background, in its own session, logging to <role>.log."""
    running = read(store, role)
    if running is not None:
        raise Conflict(f"a detached {role} already runs here (pid {running.pid}); "
                       f"`git brat {role} stop` stops it")
    return process.detach([*process.launcher("brat"), *args], role=role, cwd=cwd,
                          env={**os.environ, "BRAT_DETACHED": role},
                          log=layout.role_log(store, role),
                          pid_file=layout.pid_file(store, role), shown=["git", "brat", *args])


def write_own(store: Store, role: str, argv: list[str] | None = None, log: str = "") -> None:
    """Record this process as the running <role> (the pid file names it by pid and start time,
    so a reused pid is never taken for it)."""
    layout.ensure_root(store)
    process.write_pid_file(layout.pid_file(store, role), role, process.this_process(),
                           argv if argv is not None else ["git", "brat", *sys.argv[1:]],
                           log or layout.role_log(store, role))


def running_pid(store: Store, role: str) -> int | None:
    pf = read(store, role)
    return pf.pid if pf is not None else None


def forget(store: Store, role: str) -> None:
    """Remove our own pid file (a detached role calls this as it exits)."""
    process.forget_pid_file(layout.pid_file(store, role), os.getpid())


def stop(store: Store, role: str, timeout: float = 60.0) -> PidFile:
    """SIGTERM the running role and wait for it to finish stopping its work."""
    pf = read(store, role)
    if pf is None:
        raise NotFound(f"no {role} runs here")
    os.kill(pf.pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not process.same_process(pf.proc):
            break
        time.sleep(0.1)
    else:
        raise Conflict(f"the {role} (pid {pf.pid}) did not stop within {timeout:.0f}s")
    process.forget_pid_file(layout.pid_file(store, role), pf.pid)
    return pf


__all__ = ["PidFile", "detach", "read", "stop", "forget", "write_own", "running_pid"]
