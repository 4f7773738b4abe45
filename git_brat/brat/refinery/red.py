"""A red target: the target branch fails the check on its own. It is named once, no task is
blamed for it, and the requests it held are checked again once the target passes.

When a request's check fails, the refinery checks the target alone (once per target commit and
check command: the verdict is kept in .git/brat/target-checks.json). A failing target opens one
red-target record in the log, which every clone's status, board and inbox read (red_target);
the request goes back to the queue "held" on that commit, its attempt not counted. The record
is closed (green) when the target passes: on its own, or because work that makes it pass lands.
"""

from __future__ import annotations

import hashlib
import json
import os
from datetime import datetime

import msgspec

from git_brat.brat import board as model
from git_brat.brat import layout
from git_brat.brat.board import MERGE, Board
from git_brat.files import atomic_write
from git_brat.git.store import Store
from git_brat.grite.log.wal import Draft
from git_brat.grite.model import events as ev
from git_brat.grite.model.kinds import RED_TARGET
from git_brat.grite.model.schema import COMMIT_ID
from git_brat.grite.model.state import Entity, iso

CACHE_SIZE = 256        # target verdicts kept (one per target commit and check command)


class RedTarget(msgspec.Struct):
    """The needs-you item of a red target, as status, the board and the inbox show it."""
    id: str
    target: str                # the branch
    commit: str                # the commit that failed its check on its own
    check: str                 # the check command
    result: str                # one line: the first failing test, or the output's last line
    failing_tests: list[str]
    tail: list[str]            # the output's last lines (redacted)
    since: datetime
    held: list[str]            # tasks whose requests wait for the target to pass
    advice: str                # what to do, in words
    log_command: str           # the whole output (on the machine whose refinery ran it)


def _open(board: Board, target: str | None) -> Entity | None:
    found = [e for e in board.state.of_kind(RED_TARGET) if e.get("status") == "red"
             and (target is None or e.get("target") == target)]
    return max(found, key=model.age_key) if found else None


def held_tasks(board: Board) -> list[str]:
    """Tasks in the queue whose request is held for a red target."""
    tasks = board.tasks
    return sorted({str(m.get("task")) for m in board.state.of_kind(MERGE, model.MERGE_DONE,
                                                                     model.NOT_SETTLED)
                   if m.get("status") == "held" and m.get("task") in tasks
                   and model.status_of(tasks[m.get("task")]) == "needs-review"})


def red_target(board: Board, target: str | None = None) -> RedTarget | None:
    """The target that fails its own check now (of that branch, or any), or None."""
    e = _open(board, target)
    if e is None:
        return None
    branch, commit = str(e.get("target") or "?"), str(e.get("checked_commit") or "")
    held = held_tasks(board)
    tests = e.get("failing_tests")
    advice = (f"{branch} fails its own check at {commit[:12]}, before any task's work: no task "
              f"is blamed or retried for it. Fix {branch} (a commit there, or a task whose work "
              f"makes the check pass: it lands); "
              + (f"the {len(held)} held request(s) are checked again once it passes"
                 if held else "the queue resumes once it passes"))
    return RedTarget(e.id, branch, commit, str(e.get("check") or ""), str(e.get("result") or ""),
                     [str(t) for t in tests] if isinstance(tests, list) else [],
                     str(e.get("output_tail") or "").splitlines()[-20:], iso(e.created_at),
                     held, advice, "git brat refinery log --target")


# -- the verdicts kept here -----------------------------------------------------------------

def _cache_path(store: Store) -> str:
    return os.path.join(layout.root(store), "target-checks.json")


def _key(commit: str, check: str) -> str:
    return f"{commit} {hashlib.sha256(check.encode()).hexdigest()[:16]}"


def _read(store: Store) -> dict:
    try:
        with open(_cache_path(store), encoding="utf-8") as f:
            data = json.load(f)
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def verdict(store: Store, commit: str, check: str) -> bool | None:
    """Whether the target at commit passed this check on its own, when known here."""
    found = _read(store).get(_key(commit, check))
    return found if isinstance(found, bool) else None


def remember(store: Store, commit: str, check: str, passed: bool) -> None:
    data = _read(store)
    data.pop(_key(commit, check), None)
    data[_key(commit, check)] = passed
    layout.ensure_root(store)
    atomic_write(_cache_path(store), json.dumps(dict(list(data.items())[-CACHE_SIZE:]),
                                                indent=0).encode())


def log_path(store: Store, commit: str) -> str:
    """The whole output of the target's own check at commit (local, 0600)."""
    if COMMIT_ID.match(commit) is None or not commit:
        raise ValueError(f"not a commit id: {commit!r}")
    return os.path.join(layout.root(store), "target-checks", f"{commit}.log")


# -- what the refinery records --------------------------------------------------------------

def found_drafts(board: Board, target: str, commit: str, check: str, fields: dict) -> list[Draft]:
    """The record of a red target: opened once, updated when the target moved and is still red
    (the same spell), nothing when it says so already."""
    e = _open(board, target)
    now = {"checked_commit": commit, "check": check, **fields}
    if e is None:
        return [Draft(ev.new_entity_id(), ev.Create(RED_TARGET, {
            "status": "red", "target": target, **now}))]
    if e.get("checked_commit") == commit and e.get("check") == check:
        return []
    return [Draft(e.id, ev.SetFields(now))]


def passed_drafts(board: Board, target: str, commit: str) -> list[Draft]:
    """The red record closed: the target passes its check at commit."""
    e = _open(board, target)
    return [] if e is None else [Draft(e.id, ev.SetFields({"status": "green",
                                                            "passed_commit": commit}))]


__all__ = ["RedTarget", "red_target", "held_tasks", "verdict", "remember", "log_path",
           "found_drafts", "passed_drafts"]
