"""Running the user's check command: its own process group, a timeout, the lease renewed meanwhile."""

from __future__ import annotations

import os
import subprocess
import time
from typing import Callable

from git_brat import process
from git_brat.brat import layout
from git_brat.brat.config import Config
from git_brat.brat.engines import sandbox
from git_brat.errors import UsageError
from git_brat.git.run import environment


def sandbox_mode(cfg: Config, bare: bool) -> str:
    """Where the check runs: "bwrap" or "none" (auto: bwrap on a hub that runs pushers'
    checks, when bwrap is on PATH)."""
    mode = cfg.refinery.sandbox
    if mode == "auto":
        return "bwrap" if bare and cfg.hub.run_checks and sandbox.bwrap_path() else "none"
    if mode == "bwrap" and sandbox.bwrap_path() is None:
        raise UsageError("refinery.sandbox = \"bwrap\" but `bwrap` is not on PATH: install "
                         "bubblewrap (apt-get install bubblewrap), or set refinery.sandbox to "
                         "\"auto\" or \"none\"")
    return mode


def check_plan(store, cfg: Config, cwd: str) -> sandbox.Plan | None:
    """The check's sandbox: it reads the repository and writes only its own tree and a private
    tmp (None: it runs unconfined)."""
    if sandbox_mode(cfg, store.bare) != "bwrap":
        return None
    env = dict(os.environ)
    common = os.path.realpath(store.common_dir)
    network = sandbox.network_mode(cfg.witness.sandbox_network)
    return sandbox.Plan(
        writable=[cwd], protect=[os.path.join(cwd, ".git")],
        hide=sandbox.secrets(cfg.witness.sandbox_hide, env, common, layout.root(store)),
        reachable=[*sandbox.runtime_paths(env), common, store.toplevel() or "", cwd],
        network=network, userns=sandbox.user_namespaces())


def run_check(command: str, cwd: str, timeout: float, log, pid_path: str,
              started: Callable[[subprocess.Popen], None],
              tick: Callable[[], None], plan: sandbox.Plan | None = None) -> int | str:
    """`sh -c command` in cwd, output to log: its exit code, or "timeout" (then it is killed).

    Its process-group id is kept in pid_path while it runs, so a refinery that takes over
    from a killed one can stop a check left behind.
    """
    argv = ["sh", "-c", command]
    if plan is not None:   # its pid namespace dies with bwrap: a kill of the group ends it all
        argv = sandbox.argv(plan, argv, sandbox.bwrap_path() or "bwrap")
    proc = subprocess.Popen(argv, cwd=cwd, stdin=subprocess.DEVNULL,
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


__all__ = ["run_check", "kill", "git_pids", "check_plan", "sandbox_mode"]
