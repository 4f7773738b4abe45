"""Small helpers for git-brat tests: ids, moves through the state machine, log counts."""

from __future__ import annotations

import json

from helpers import brat, brat_json, run

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
