"""Helpers for the sync tests: hubs, clones, a git daemon on 127.0.0.1, snapshots of hook dirs."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
from pathlib import Path

from helpers import git, grite, make_repo, run


def bare_hub(path: Path) -> Path:
    git(path.parent, "init", "-q", "--bare", "-b", "main", str(path))
    return path


def seeded_hub(tmp_path: Path, name: str = "hub.git") -> Path:
    """A bare hub with one commit on main (pushed from a throwaway clone)."""
    hub = bare_hub(tmp_path / name)
    seed = make_repo(tmp_path / f"seed-{name}")
    git(seed, "push", "-q", str(hub), "main")
    return hub


def clone(url: str, path: Path, init: bool = True) -> Path:
    git(path.parent, "clone", "-q", url, str(path))
    if init:
        grite(path, "init")
    return path


def replica_id(repo: Path) -> str:
    return json.loads((repo / ".git" / "grite" / "replica.json").read_text())["id"]


def refs(repo: Path, pattern: str = "refs/") -> dict[str, str]:
    out = git(repo, "for-each-ref", "--format=%(refname) %(objectname)", pattern)
    return dict(line.split() for line in out.splitlines())


def snapshot_dir(path: Path) -> dict[str, tuple[int, bytes]]:
    """name -> (mode, bytes) of every file below path (symlinks by their target text)."""
    out = {}
    if not path.exists():
        return out
    for p in sorted(path.rglob("*")):
        rel = str(p.relative_to(path))
        if p.is_symlink():
            out[rel] = (0o120000, os.readlink(p).encode())
        elif p.is_file():
            out[rel] = (p.stat().st_mode, p.read_bytes())
    return out


def write_hook(hooks_dir: Path, name: str, body: str, mode: int = 0o755) -> Path:
    hooks_dir.mkdir(parents=True, exist_ok=True)
    path = hooks_dir / name
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(mode)
    return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Daemon:
    """`git daemon` serving base_dir read-write on 127.0.0.1 at a random free port."""

    def __init__(self, base_dir: Path):
        self.base = base_dir
        self.proc: subprocess.Popen | None = None
        self.port = 0

    def url(self, name: str) -> str:
        return f"git://127.0.0.1:{self.port}/{name}"

    def start(self) -> "Daemon":
        for _attempt in range(5):   # bounded: another process may grab the port first
            self.port = free_port()
            self.proc = subprocess.Popen(
                ["git", "daemon", f"--base-path={self.base}", "--export-all",
                 "--enable=receive-pack", "--reuseaddr", "--listen=127.0.0.1",
                 f"--port={self.port}", str(self.base)],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and self.proc.poll() is None:
                try:
                    with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                        return self
                except OSError:
                    time.sleep(0.05)
            self.stop()
        raise RuntimeError("git daemon did not start")

    def stop(self) -> None:
        if self.proc is None:
            return
        try:   # the daemon and the per-connection children it forked (its own process group)
            os.killpg(self.proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=5)
        self.proc = None


def issue_json(repo: Path) -> tuple[str, list[str]]:
    """`issue list --json` (all states) and `issue show --json` of every issue, as raw text."""
    listing = run(["git", "grite", "issue", "list", "--state", "all", "--json"], repo).out
    shows = [run(["git", "grite", "issue", "show", i["id"], "--json"], repo).out
             for i in json.loads(listing)]
    return listing, shows
