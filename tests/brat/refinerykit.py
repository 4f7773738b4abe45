"""Helpers for the refinery tests: task branches made with plumbing (the user's checkout untouched)."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from bratkit import convoy, move, task
from helpers import brat, brat_json, git, run


def commit_on(repo, branch: str, files: dict[str, str | None], message: str,
              start: str = "main") -> str:
    """Commit files (None deletes) onto branch (created from start) without a checkout."""
    old = git(repo, "rev-parse", "-q", "--verify", f"refs/heads/{branch}", check=False)
    parent = old or git(repo, "rev-parse", start)
    with tempfile.TemporaryDirectory() as d:
        env = dict(os.environ, GIT_INDEX_FILE=os.path.join(d, "index"))
        run(["git", "read-tree", parent], repo, env=env)
        for path, text in files.items():
            if text is None:
                run(["git", "update-index", "--remove", "--force-remove", path], repo, env=env)
                continue
            sha = run(["git", "hash-object", "-w", "--stdin"], repo, input=text).out.strip()
            run(["git", "update-index", "--add", "--cacheinfo", f"100644,{sha},{path}"], repo,
                env=env)
        tree = run(["git", "write-tree"], repo, env=env).out.strip()
    new = run(["git", "commit-tree", tree, "-p", parent, "-m", message], repo).out.strip()
    git(repo, "update-ref", f"refs/heads/{branch}", new, old or "0" * 40)
    return new


def request(repo, cid: str, title: str, files: dict[str, str | None],
            priority: int | None = None, start: str = "main") -> str:
    """A hand-made merge request: a task, commits on brat/<id>, moved to needs-review."""
    args = ["--priority", str(priority)] if priority is not None else []
    tid = task(repo, cid, title, *args)
    commit_on(repo, f"brat/{tid}", files, title, start)
    move(repo, tid, "running", "needs-review")
    brat(repo, "task", "approve", tid)   # the human's review (refinery.review = "human")
    return tid


def configure(repo, **keys) -> None:
    for key, value in keys.items():
        # Whether hooks start the refinery is the clone's own setting, never the committed file.
        local = ["--local"] if key == "trigger" else []
        brat(repo, "config", "set", f"refinery.{key}", str(value), *local)


def refine(repo, *args, **kw) -> dict:
    return brat_json(repo, "refinery", "run", "--once", *args, **kw)


def outcomes(report: dict) -> dict[str, str]:
    return {o["task"]: o["result"] for p in report["passes"] for o in p["outcomes"]}


def check_runs(report: dict) -> int:
    return sum(p["check_runs"] for p in report["passes"])


def task_json(repo, tid) -> dict:
    return brat_json(repo, "task", "show", tid)


def field(repo, tid, name):
    """A raw field of a task entity (fields the task views do not show)."""
    out = run(["git", "grite", "log", tid, "--json"], repo).out
    value = None
    for e in json.loads(out):
        fields = (e.get("detail") or {}).get("fields") or {}
        if name in fields:
            value = fields[name]
    return value


def tree_bytes(path: Path) -> dict[str, bytes]:
    """Every file under a checkout except .git, by content."""
    out = {}
    for p in sorted(path.rglob("*")):
        if ".git" in p.relative_to(path).parts:
            continue
        if p.is_file():
            out[str(p.relative_to(path))] = p.read_bytes()
    return out


def log_subjects(repo, rev: str = "main") -> list[str]:
    return git(repo, "log", "--format=%s", rev).splitlines()


__all__ = ["commit_on", "request", "configure", "refine", "outcomes", "check_runs",
           "task_json", "field", "tree_bytes", "log_subjects", "convoy", "move", "task"]


def quick_requests(repo, cid: str, specs: list[tuple[str, dict, int]]) -> list[str]:
    """Many hand-made requests through the library (one process): [(title, files, priority)]."""
    from git_brat.brat import board as model, review, tasks
    g = model.open_grite(str(repo))
    out = []
    for title, files, prio in specs:
        tid = tasks.create_task(g, cid, title, priority=prio)
        commit_on(repo, f"brat/{tid}", files, title)
        tasks.update_task(g, tid, "running")
        tasks.update_task(g, tid, "needs-review")
        review.approve(g, tid)
        out.append(tid)
    return out


def processed(report: dict) -> list[str]:
    return [o["task"] for p in report["passes"] for o in p["outcomes"]]


def alive(pid: int) -> bool:
    """A running process (a zombie nobody reaped does not count)."""
    from git_brat.process import alive
    return alive(pid)


def two_clones(tmp_path) -> tuple[Path, Path, Path]:
    """A hub and two clones of it, each after `git brat init`: two refineries, one queue."""
    from sync_helpers import clone, seeded_hub
    hub = seeded_hub(tmp_path)
    a = clone(str(hub), tmp_path / "a", init=False)
    b = clone(str(hub), tmp_path / "b", init=False)
    brat(a, "init")
    brat(b, "init")
    return hub, a, b
