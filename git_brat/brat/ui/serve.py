"""Running the board: bind, announce the address (with its token), serve, stop; one per clone."""

from __future__ import annotations

import os
import secrets
import signal
import socket
import sys
import time
from typing import Callable

import msgspec

from git_brat import process
from git_brat.brat import layout
from git_brat.errors import Conflict, NotFound, UsageError
from git_brat.git.store import Store

LOOPBACK = ("127.0.0.1", "::1", "localhost")


class Running(msgspec.Struct):
    """A board this clone runs, as its state file records it (mode 0600: it holds the token)."""
    url: str
    port: int
    pid: int
    start: int = 0
    host: str = ""
    started_at: int = 0


class Shown(msgspec.Struct):
    url: str
    port: int
    pid: int


def state_file(store: Store) -> str:
    return os.path.join(layout.root(store), "ui.json")


def log_file(store: Store) -> str:
    return os.path.join(layout.root(store), "ui.log")


def running(store: Store) -> Running | None:
    """The board running for this clone, if its process is still that process."""
    try:
        with open(state_file(store), "rb") as f:
            r = msgspec.json.decode(f.read(), type=Running)
    except (OSError, msgspec.DecodeError, msgspec.ValidationError):
        return None
    if r.host == process.hostname() and process.same_process(process.Proc(r.pid, r.start, r.host)):
        return r
    return None


def warn_host(host: str) -> str | None:
    if host not in LOOPBACK:
        return (f"serving on {host}: anyone who can reach this address and learns the token can "
                f"steer your agents; the board binds 127.0.0.1 unless told otherwise")
    return None


def bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise UsageError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    sock.listen(128)
    sock.set_inheritable(True)
    return sock


def url_of(host: str, port: int, token: str) -> str:
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}/?token={token}"


def serve(store: Store, host: str, port: int, announce: Callable[[Shown], None]) -> None:
    """Serve the board for this clone until SIGTERM or Ctrl-C (imports the web stack)."""
    import uvicorn
    from git_brat.brat.ui import server
    if running(store) is not None:
        raise Conflict(f"a board already runs for this repository ({running(store).url.split('?')[0]}); "
                       f"`git brat ui stop` stops it")
    sock = bind(host, port)
    port = sock.getsockname()[1]
    token = secrets.token_urlsafe(24)
    path = store.toplevel() or store.common_dir
    me = process.this_process()
    url = url_of(host, port, token)
    layout.ensure_root(store)
    _write_private(state_file(store), msgspec.json.encode(
        Running(url, port, me.pid, me.start, me.host, process.now_ms())))
    try:
        config = uvicorn.Config(server.app(path, token, host, port), log_level="warning",
                                access_log=False, timeout_graceful_shutdown=1, lifespan="off")
        srv = uvicorn.Server(config)
        announce(Shown(url, port, me.pid))
        # uvicorn shuts down on SIGTERM, then raises it again for the handler it found: a
        # stopped board (`git brat ui stop`) then exits 0 instead of dying of the signal.
        signal.signal(signal.SIGTERM, lambda *_a: None)
        srv.run(sockets=[sock])
    finally:
        sock.close()
        r = running(store)
        if r is None or r.pid == os.getpid():
            for path in (state_file(store), opener_file(store)):
                try:
                    os.unlink(path)
                except OSError:
                    pass


def _write_private(path: str, body: bytes) -> None:
    """Write path readable by its owner only, from the first byte (it holds the token)."""
    tmp = f"{path}.{os.getpid()}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, body)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)


def private_log(path: str) -> None:
    """Make the log readable by its owner only, before anything is written to it (an older
    board's log may be readable by all: its lines named the token)."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, 0o600)
    except OSError as exc:   # a symlink, or not ours
        raise Conflict(f"cannot open the board's log {path}: {exc.strerror or exc}") from None
    try:
        os.fchmod(fd, 0o600)
    finally:
        os.close(fd)


def without_token(url: str) -> str:
    """The board's address as others may read it (a log): without its token."""
    return url.split("?", 1)[0]


def detach(store: Store, args: list[str], timeout: float = 30.0) -> Shown:
    """Start `git brat ui ARGS --no-open` in the background; its address once it listens."""
    if running(store) is not None:
        raise Conflict("a board already runs for this repository; `git brat ui stop` stops it")
    cwd = store.toplevel() or store.common_dir
    layout.ensure_root(store)
    private_log(log_file(store))
    # The child prints its address without the token (the log is no place for it); this
    # process reads the address from the state file, which only its owner can read.
    child = process.detach([*process.launcher("brat"), "ui", *args, "--no-open", "--in-background"],
                           role="ui", cwd=cwd, env=dict(os.environ), log=log_file(store))
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        r = running(store)
        if r is not None and r.pid == child.pid:
            return Shown(r.url, r.port, r.pid)
        if not process.same_process(child.proc):
            break
        time.sleep(0.05)
    raise Conflict(f"the board did not start (see {log_file(store)})")


def stop(store: Store, timeout: float = 10.0) -> Running:
    r = running(store)
    if r is None:
        raise NotFound("no board runs for this repository")
    os.kill(r.pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    proc = process.Proc(r.pid, r.start, r.host)
    while time.monotonic() < deadline and process.same_process(proc):
        time.sleep(0.05)
    if process.same_process(proc):
        raise Conflict(f"the board (pid {r.pid}) did not stop within {timeout:.0f}s")
    try:
        os.unlink(state_file(store))
    except OSError:
        pass
    return r


def opener_file(store: Store) -> str:
    return os.path.join(layout.root(store), "ui-open.html")


def open_browser(store: Store, url: str) -> bool:
    """Open the address in a browser when there is one to open (never fails the command).

    The browser is handed a file only its owner reads, which sends it on to the address: the
    address holds the token, and a browser's arguments are in /proc for every local user."""
    if sys.platform.startswith("linux") and not (os.environ.get("DISPLAY")
                                                 or os.environ.get("WAYLAND_DISPLAY")):
        return False
    try:
        import html
        import webbrowser
        path = opener_file(store)
        _write_private(path, (
            f'<!doctype html><meta charset=utf-8><meta http-equiv="refresh" '
            f'content="0;url={html.escape(url, quote=True)}"><title>git brat ui</title>'
            f'<a href="{html.escape(url, quote=True)}">open the board</a>').encode())
        return webbrowser.open("file://" + path)
    except Exception:   # noqa: BLE001 - no browser is not an error
        return False


__all__ = ["serve", "detach", "without_token", "stop", "running", "warn_host", "open_browser", "Shown", "Running"]
