"""Small helpers for git-brat tests: ids, moves through the state machine, log counts."""

from __future__ import annotations

import json

from helpers import brat, brat_json, git, make_repo, run

# A path through the state machine to reach each status (from queued, without --force).
PATH_TO = {
    "queued": [],
    "running": ["running"],
    "needs-review": ["running", "needs-review"],
    "merging": ["running", "needs-review", "merging"],
    "merged": ["running", "needs-review", "merging", "merged"],
    "blocked": ["blocked"],
    "failed": ["running", "failed"],
    "dropped": ["dropped"],
}


def convoy(repo, title="Convoy", *args) -> str:
    return brat(repo, "convoy", "create", title, *args).out.strip()


def task(repo, convoy_id, title="Task", *args) -> str:
    return brat(repo, "task", "create", "--convoy", convoy_id, title, *args).out.strip()


def move(repo, tid, *statuses) -> None:
    for s in statuses:
        brat(repo, "task", "update", tid, "--status", s)


def status_of(repo, tid) -> str:
    return brat_json(repo, "task", "show", tid)["status"]


def log_commits(repo) -> int:
    out = run(["git", "rev-list", "--count", "refs/grite/wal"], repo, check=False).out.strip()
    return int(out or 0)


def events_of(repo, entity) -> list[dict]:
    return json.loads(run(["git", "grite", "log", entity, "--json"], repo).out)


def fail(repo, *args) -> tuple[int, str]:
    """Run a git-brat command expected to fail: (exit code, its one stderr line)."""
    proc = brat(repo, *args, check=False)
    assert proc.returncode != 0, f"`git brat {' '.join(args)}` should have failed: {proc.out}"
    lines = proc.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("git-brat: error: "), proc.err
    assert "Traceback" not in proc.err
    return proc.returncode, lines[0][len("git-brat: error: "):]


__all__ = ["PATH_TO", "convoy", "task", "move", "status_of", "log_commits", "events_of", "fail"]


def demo_project(path, **config: str):
    """The demo's textstats project as a repository (one commit), after `git brat init`; with
    config, those keys are set and the configuration committed."""
    from git_brat.brat.demo import project as demo_project_files
    make_repo(path, commit=False)
    for rel, text in demo_project_files.FILES.items():
        (path / rel).parent.mkdir(parents=True, exist_ok=True)
        (path / rel).write_text(text)
    git(path, "add", "-A")
    git(path, "commit", "-qm", "textstats")
    brat(path, "init")
    for key, value in config.items():
        brat(path, "config", "set", key.replace("__", "."), value)
    return path
