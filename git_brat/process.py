"""Processes of this installation: start git-brat or git-grite as a child, detach one with a
pid file, tell whether a recorded process is still that process, stop a process group.

One pid-file format for every background process (the witness, refinery and deacon daemons, a
refinery's check, the cold-part fetch): JSON naming the pid *with its kernel start time and
host*, so a pid the kernel has since given to another process is never taken for ours.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from typing import Callable

import msgspec

from git_brat.files import atomic_write, open_private

GRACE = 5.0   # seconds between TERM and KILL


def now_ms() -> int:
    """Wall-clock milliseconds: the time stamp of events, leases and records."""
    return int(time.time() * 1000)


def hostname() -> str:
    """This machine's name (what socket.gethostname says, without importing socket: ~2 ms)."""
    if hasattr(os, "uname"):
        return os.uname().nodename
    import socket
    return socket.gethostname()


def source_root() -> str:
    """The directory holding the git_brat package (a checkout's top, or site-packages)."""
    return os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def launcher(program: str) -> list[str]:
    """argv that runs this very installation's `git-<program>` (brat or grite), whatever PATH
    says: an agent's `git brat task done` must reach the brat that supervises it."""
    if program not in ("brat", "grite"):
        raise ValueError(f"no such program: git-{program}")
    return [sys.executable, "-c", f"import sys; sys.path.insert(0, {source_root()!r}); "
                                  f"from git_brat.{program}.cli import main; main()"]


# -- is it still that process? ---------------------------------------------------------------

class Proc(msgspec.Struct):
    """A started process as recorded: enough to find it again, and never hit a reused pid."""
    pid: int
    start: int           # kernel start time (clock ticks since boot), 0 if unknown
    host: str


def on_stop_signals(stop: Callable[[str], None]) -> Callable[[], None]:
    """Call stop("interrupted") on SIGINT, stop("stopped") on SIGTERM, instead of dying there
    (a role winds its work up itself); returns what puts the old handlers back. Only the main
    thread may set handlers: elsewhere it does nothing."""
    import threading
    if threading.current_thread() is not threading.main_thread():
        return lambda: None

    def handler(signum, _frame):
        stop("interrupted" if signum == signal.SIGINT else "stopped")
    old = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}
    return lambda: [signal.signal(s, h) for s, h in old.items()]


def start_time(pid: int) -> int | None:
    """The process's start time from /proc (None: no such process, or a zombie)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    # The command name (field 2) may hold spaces and parentheses: split after its last ')'.
    rest = data[data.rindex(b")") + 2:].split()
    if rest[0] in (b"Z", b"X"):
        return None   # it has ended; only its parent's wait is missing
    return int(rest[19])


def this_process() -> Proc:
    return Proc(os.getpid(), start_time(os.getpid()) or 0, hostname())


def alive(pid: int) -> bool:
    """A running process (a zombie nobody reaped does not count)."""
    if os.path.isdir("/proc/self"):
        return start_time(pid) is not None
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


def command_line(pid: str | int) -> list[str] | None:
    """argv of process pid, or None if it cannot be read."""
    if not str(pid).isdigit():
        return None
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().decode("utf-8", "replace").split("\0")
    except OSError:   # no /proc (macOS, BSD): ps gives the command line, space-separated
        proc = subprocess.run(["ps", "-o", "args=", "-p", str(pid)], stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL)
        return proc.stdout.decode("utf-8", "replace").split() or None


def same_process(proc: Proc) -> bool:
    """Whether proc.pid on this host is still the process recorded (not a reused pid).
    A record without a start time cannot tell a reused pid from its own: it is never taken
    for a live process (so nothing is signalled on its word)."""
    if proc.host != hostname() or proc.pid <= 1 or proc.start <= 0:
        return False
    return start_time(proc.pid) == proc.start


def group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


# -- stopping ---------------------------------------------------------------------------------

def stop_group(pgid: int, grace: float = GRACE, wait_for: Callable[[], object] | None = None
               ) -> bool:
    """TERM the whole group, then KILL what is left after `grace`; True if anything was there.
    wait_for (a child's poll) reaps our own child meanwhile, so it does not linger a zombie."""
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


def stop_recorded_group(proc: Proc, grace: float = GRACE) -> bool:
    """Stop a recorded process's group on this host, if its leader is still that process.

    The leader may be gone while its children still write: a pid is not reused while a group
    of that id exists, so a live group with the recorded pid as its id is still ours.
    """
    if proc.host != hostname() or proc.pid <= 1:
        return False
    now = start_time(proc.pid)
    # A live process at that pid is ours only if it started when recorded; with no start time
    # recorded (its leader was gone before it could be read) nothing tells it from a reuse.
    if now is not None and (proc.start <= 0 or now != proc.start):
        return False   # the pid now belongs to someone else
    if not group_alive(proc.pid):
        return False
    return stop_group(proc.pid, grace)


def wait_for_exit(pids: list[int], timeout: float = 120.0) -> None:
    """Wait (at most timeout seconds) until none of pids runs."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and any(alive(p) for p in pids):
        time.sleep(0.05)


# -- pid files --------------------------------------------------------------------------------

class PidFile(msgspec.Struct):
    """A background process, as its pid file records it."""
    role: str
    pid: int
    start: int
    host: str
    argv: list[str]
    started_at: int            # ms
    log: str

    @property
    def proc(self) -> Proc:
        return Proc(self.pid, self.start, self.host)


def write_pid_file(path: str, role: str, proc: Proc, argv: list[str], log: str = "") -> PidFile:
    pf = PidFile(role, proc.pid, proc.start, proc.host, argv, now_ms(), log)
    atomic_write(path, msgspec.json.encode(pf))
    return pf


def load_pid_file(path: str) -> PidFile | None:
    """What the pid file at path says, whether or not that process still runs."""
    try:
        with open(path, "rb") as f:
            return msgspec.json.decode(f.read(), type=PidFile)
    except (OSError, msgspec.DecodeError, msgspec.ValidationError):
        return None


def read_pid_file(path: str) -> PidFile | None:
    """The pid file at path if the process it names is still that process; a stale one
    (its process gone, here) is removed."""
    pf = load_pid_file(path)
    if pf is None:
        return None
    if not same_process(pf.proc):
        if pf.host == hostname():
            forget_pid_file(path, pf.pid)
        return None
    return pf


def forget_pid_file(path: str, pid: int | None = None) -> None:
    """Remove the pid file (only if it names pid, when given: never a successor's)."""
    try:
        if pid is not None:
            with open(path, "rb") as f:
                if msgspec.json.decode(f.read(), type=PidFile).pid != pid:
                    return
        os.unlink(path)
    except (OSError, msgspec.DecodeError, msgspec.ValidationError):
        pass


def hold_pid_file(path: str) -> None:
    """The pid file naming this process (written by whoever started it) goes when it exits."""
    import atexit
    atexit.register(forget_pid_file, path, os.getpid())


def detach(argv: list[str], *, role: str, cwd: str, env: dict[str, str], log: str,
           pid_file: str | None = None, shown: list[str] | None = None) -> PidFile:
    """Start argv in its own session, detached from this terminal, its output appended to log;
    recorded in pid_file when given (before it can end: it may remove the file itself).
    shown: the argv the pid file shows (`git brat witness run`), when argv is a launcher."""
    os.makedirs(os.path.dirname(log), exist_ok=True)
    # 0600: what a detached witness, refinery or board prints (engine and check errors, the
    # board's address) is the user's alone, as the sessions' and checks' own logs are.
    with open_private(log) as out:
        popen = subprocess.Popen(argv, cwd=cwd, stdin=subprocess.DEVNULL, stdout=out,
                                 stderr=subprocess.STDOUT, start_new_session=True, env=env)
    proc = Proc(popen.pid, start_time(popen.pid) or 0, hostname())
    if pid_file is None:
        return PidFile(role, proc.pid, proc.start, proc.host, shown or argv, now_ms(), log)
    return write_pid_file(pid_file, role, proc, shown or argv, log)
