"""Shared bench helpers: timing commands, building big logs fast, and the import floor."""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

FLOOR_CMD = [sys.executable, "-c", "import dulwich.repo, msgspec, click"]


def env() -> dict:
    e = dict(os.environ)
    # Installed packages ship bytecode; measure our package the same way (see compile_package).
    e.pop("PYTHONDONTWRITEBYTECODE", None)
    e["PATH"] = f"{ROOT / 'bin'}{os.pathsep}{e.get('PATH', '')}"
    e.setdefault("GIT_AUTHOR_NAME", "Bench")
    e.setdefault("GIT_AUTHOR_EMAIL", "bench@example.com")
    e.setdefault("GIT_COMMITTER_NAME", "Bench")
    e.setdefault("GIT_COMMITTER_EMAIL", "bench@example.com")
    return e


def compile_package() -> None:
    """Write .pyc files for git_brat, as `pip install` does, so timings match an installation."""
    import compileall
    compileall.compile_dir(str(ROOT / "git_brat"), quiet=1)


compile_package()


def time_cmd(cmd: list[str], cwd, runs: int, before=None) -> float:
    """Median wall time in seconds of `runs` executions (before() runs untimed each time)."""
    times = []
    for _ in range(runs):
        if before:
            before()
        t0 = time.perf_counter()
        subprocess.run(cmd, cwd=cwd, env=env(), check=True, stdout=subprocess.DEVNULL)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def floor(runs: int = 15) -> float:
    return time_cmd(FLOOR_CMD, ROOT, runs)


def git(cwd, *args, input: bytes | None = None) -> str:
    return subprocess.run(["git", *args], cwd=cwd, env=env(), input=input, check=True,
                          stdout=subprocess.PIPE).stdout.decode().strip()


def new_repo(name: str) -> Path:
    path = Path(tempfile.mkdtemp(prefix=f"grite-bench-{name}-"))
    git(path, "init", "-q", "-b", "main")
    git(path, "commit", "-q", "--allow-empty", "-m", "initial")
    subprocess.run(["git", "grite", "init"], cwd=path, env=env(), check=True,
                   stdout=subprocess.DEVNULL)
    return path


def write_log_fast(repo: Path, batches: list[list]) -> None:
    """Append many batches to refs/grite/wal with one `git fast-import` (bench setup only)."""
    from git_brat.grite.model import events as ev
    from git_brat.grite.repo import Grite
    g = Grite.open(str(repo))
    ident = g.identity
    parent = g.store.refs.read(b"refs/grite/wal").decode()
    lines = []
    lamport = 1000
    for i, drafts in enumerate(batches):
        events = []
        for entity, op in drafts:
            lamport += 1
            events.append(ev.make_event(entity, ident.actor.id, lamport, 1_700_000_000_000 + i, op))
        blob = ev.encode_batch(ev.Batch(ev.FORMAT_VERSION, ident.replica.id, lamport, events))
        lines.append(fast_import_commit("refs/grite/wal", blob, f"grite: bench batch {i}",
                                        1_700_000_000 + i, parent if i == 0 else None))
    fast_import(repo, lines)


def report(name: str, value: float, unit: str = "ms", note: str = "") -> None:
    shown = f"{value * 1000:.1f} ms" if unit == "ms" else f"{value:.2f}{unit}"
    print(f"{name:<58} {shown:>12}  {note}")


def fast_import(repo, chunks) -> None:
    """Stream `git fast-import` commands (an iterable of bytes) into repo (bench setup only).

    Streamed, not joined: a million-event history is a few hundred MB of stream.
    """
    proc = subprocess.Popen(["git", "fast-import", "--quiet", "--force"], cwd=repo, env=env(),
                            stdin=subprocess.PIPE)
    buf, size = [], 0
    for chunk in chunks:
        buf.append(chunk)
        size += len(chunk)
        if size >= 1 << 20:
            proc.stdin.write(b"".join(buf))
            buf, size = [], 0
    proc.stdin.write(b"".join(buf))
    proc.stdin.close()
    if proc.wait() != 0:
        raise RuntimeError("git fast-import failed")


def fast_import_commit(ref: str, blob: bytes, message: str, when: int,
                       parent: str | None = None, entry: str = "events") -> bytes:
    """One record commit (tree: `entry` = blob; a log's is `events`) on ref, as fast-import
    commands.

    `parent`: the commit to chain to, for the first commit on a ref in a stream that already
    exists in the repository (fast-import chains later ones itself).
    """
    msg = message.encode()
    return b"".join([
        b"commit %s\n" % ref.encode(),
        b"committer Bench <bench@example.com> %d +0000\n" % when,
        b"data %d\n%s\n" % (len(msg), msg),
        b"from %s\n" % parent.encode() if parent else b"",
        b"M 100644 inline %s\n" % entry.encode(),
        b"data %d\n" % len(blob), blob, b"\n",
    ])
