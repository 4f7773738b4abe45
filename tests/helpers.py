"""Test helpers: run the real git-grite / git-brat (from this checkout's bin/) and git."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BIN = ROOT / "bin"


def run(args: list[str], cwd, check: bool = True, input: str | bytes | None = None,
        env: dict | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    """Run a command; on unexpected failure, raise with its stderr in the message."""
    full_env = dict(os.environ)
    if env:
        full_env.update(env)
    if isinstance(input, str):
        input = input.encode()
    proc = subprocess.run(args, cwd=str(cwd), input=input, env=full_env, timeout=timeout,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.out = proc.stdout.decode("utf-8", "replace")
    proc.err = proc.stderr.decode("utf-8", "replace")
    if check and proc.returncode != 0:
        raise AssertionError(f"{' '.join(map(str, args))} exited {proc.returncode}\n"
                             f"stdout: {proc.out}\nstderr: {proc.err}")
    return proc


def git(cwd, *args, **kw) -> str:
    return run(["git", *args], cwd, **kw).out.strip()


def grite(cwd, *args, **kw) -> subprocess.CompletedProcess:
    return run(["git", "grite", *args], cwd, **kw)


def issues(cwd, *titles) -> list[str]:
    """Create one issue per title; their ids."""
    return [grite(cwd, "issue", "create", t).out.strip() for t in titles]


def grite_json(cwd, *args, **kw):
    proc = grite(cwd, *args, "--json", **kw)
    return json.loads(proc.out)


def brat(cwd, *args, **kw) -> subprocess.CompletedProcess:
    return run(["git", "brat", *args], cwd, **kw)


def brat_json(cwd, *args, **kw):
    return json.loads(brat(cwd, *args, "--json", **kw).out)


def wal_tip(cwd) -> str | None:
    proc = run(["git", "rev-parse", "-q", "--verify", "refs/grite/wal"], cwd, check=False)
    return proc.out.strip() or None


def status(cwd) -> str:
    return git(cwd, "status", "--porcelain", "--untracked-files=all")


def make_repo(path: Path, commit: bool = True) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    git(path, "init", "-q", "-b", "main")
    if commit:
        (path / "README").write_text("hello\n")
        git(path, "add", "README")
        git(path, "commit", "-q", "-m", "initial")
    return path


def incremental(batches: list[list]):
    """What the cache does: apply batch by batch, full replay when a fence moves backwards."""
    from git_brat.grite.model.state import State, replay
    state, seen = State(), []
    for batch in batches:
        seen += batch
        for e in batch:
            if not state.apply(e):
                state = replay(seen)
                break
    return state
