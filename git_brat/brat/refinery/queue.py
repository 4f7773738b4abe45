"""Merge requests: which tasks are waiting for the refinery, in what order, and the events it writes."""

from __future__ import annotations

import math
import os
import re
from typing import Any, Callable

import msgspec

from git_brat import process
from git_brat.brat import board as model
from git_brat.brat import review
from git_brat.brat import tasks
from git_brat.brat.config import Config
from git_brat.brat.board import MERGE, Board, status_of
from git_brat.grite.model import events as ev
from git_brat.grite import locks
from git_brat.git.store import Store
from git_brat.grite.log.wal import Draft
from git_brat.grite.repo import Grite
from git_brat.grite.model.state import Entity

# A merge entity's status: open ones are still the refinery's business.
OPEN = ("queued", "merging", "checking", "waiting", "error", "held")   # held: for a red target
DONE = tuple(s for s in model.MERGE_DONE if s != "superseded")   # settled, but not a result
BRANCH_PREFIX = "brat/"


class Request(msgspec.Struct):
    """One merge request as the refinery works on it."""
    task: str
    title: str
    merge: str                 # the merge entity ("" until one is recorded)
    branch: str
    ref: str                   # the ref the branch was found at (local or a remote's)
    head: str
    base: str
    priority: int
    effective: int             # priority after aging (lower is sooner)
    since: int                 # ms: when it joined the queue
    attempts: int
    status: str


def task_branch(tid: str) -> str:
    return BRANCH_PREFIX + tid


def lease_name(store: Store, remote: str) -> str:
    """`refinery:<repo>`: the same name on a hub and on every clone of it."""
    url = store.config_get(f"remote.{remote}.url") if not store.bare else None
    if url:
        base = url.rstrip("/").rsplit("/", 1)[-1].rsplit(":", 1)[-1]
    else:
        root = store.common_dir if store.bare else os.path.dirname(store.common_dir)
        base = os.path.basename(root.rstrip("/"))
    if base.endswith(".git"):
        base = base[:-4]
    base = re.sub(r"[^A-Za-z0-9_.-]+|\.{2,}", "-", base).removesuffix(".lock").strip(".-")
    return f"refinery:{base or 'repo'}"


FULL_SHA = review.FULL_SHA
find_branch = review.find_branch   # the one rule for which copy of a task's branch lands


def open_merges(state) -> dict[str, Entity]:
    """task -> its newest open merge entity."""
    out: dict[str, Entity] = {}
    for e in state.of_kind(MERGE, model.MERGE_DONE, model.NOT_SETTLED):
        tid = e.get("task")
        if tid and e.get("status", "queued") in OPEN:
            cur = out.get(tid)
            if cur is None or model.age_key(e) > model.age_key(cur):
                out[tid] = e
    return out


def effective(priority: int, since: int, now: int, aging: float) -> int:
    if aging <= 0:
        return priority
    return priority - int(math.floor(max(0, now - since) / 1000 / aging))


def requests(g: Grite, cfg: Config, board: Board | None = None, now: int | None = None,
             target_tip: str | None = None) -> list[Request]:
    """Every task in needs-review with a branch, approved to land (see review), in the order
    the refinery takes them."""
    board = board or model.board(g)
    now = now if now is not None else process.now_ms()
    merges = open_merges(board.state)
    target = cfg.refinery.target_branch
    tip = target_tip or g.store.objects.rev(f"refs/heads/{target}")
    out, order = [], {}
    for t in board.tasks.values():
        if status_of(t) != "needs-review":
            continue
        m = merges.get(t.id)
        branch = (m.get("branch") if m else None) or task_branch(t.id)
        found = find_branch(g.store, branch, (m.get("head") if m else "") or "")
        if found is None:
            continue
        ref, head = found
        if not review.approved(t, head, cfg):
            continue   # waits for a human's decision (review.waiting): not the queue's yet
        base = (m.get("base") if m else None) or (g.store.objects.merge_base(tip, head)
                                                if tip else "") or ""
        since = int(m.get("queued_at", m.created_at)) if m else t.updated_at
        prio = model.priority_of(t)
        out.append(Request(t.id, t.get("title", ""), m.id if m else "", branch, ref, head, base,
                           prio, effective(prio, since, now, cfg.refinery.aging), since,
                           int(m.get("attempts", 0)) if m else 0,
                           m.get("status", "queued") if m else "queued"))
        order[t.id] = model.age_key(t)
    out.sort(key=lambda r: (r.effective, r.since, order[r.task]))
    return out


def queue_order(g: Grite, cfg: Config, board: Board | None = None,
                now: int | None = None) -> list[str]:
    """Task ids of the merge queue in the refinery's real order: what it is merging now (in
    the order it started them), then the requests as it will take them (see requests), then
    the needs-review tasks it cannot reach from this clone (see unreachable)."""
    board = board or model.board(g)
    merges = open_merges(board.state)
    merging = [t for t in board.tasks.values() if status_of(t) == "merging"]
    merging.sort(key=lambda t: (model.whole((merges.get(t.id) or t).get("started_at", 0)),
                                model.age_key(t)))
    out = [t.id for t in merging]
    out += [r.task for r in requests(g, cfg, board, now)]
    out += sorted(unreachable(g, board), key=lambda tid: model.age_key(board.tasks[tid]))
    return out


def unreachable(g: Grite, board: Board | None = None) -> dict[str, str]:
    """task id -> why: the tasks in needs-review whose branch no ref of this clone holds (not
    the local branch, no remote's copy), so no refinery here can merge them."""
    board = board or model.board(g)
    merges = open_merges(board.state)
    out = {}
    for t in board.tasks.values():
        if status_of(t) != "needs-review":
            continue
        m = merges.get(t.id)
        branch = (m.get("branch") if m else None) or task_branch(t.id)
        head = (m.get("head") if m else "") or ""
        if find_branch(g.store, branch, head) is None:
            held = f" at {head[:12]}, the head it was finished at," if head else ""
            out[t.id] = (f"its branch {branch}{held} is neither here nor on a remote this clone "
                         f"fetched: the clone whose witness finished it must push it (`git push "
                         f"<remote> {branch}`) or run `git brat refinery run` itself")
    return out


# -- writing: tasks and merge entities move together, validated at the tip --------------

def merge_drafts(req: Request, target: str, session: str = "") -> list[Draft]:
    return [Draft(req.merge, ev.Create(MERGE, {
        "task": req.task, "branch": req.branch, "head": req.head, "base": req.base,
        "session": session, "target": target, "status": "queued", "attempts": 0,
        "queued_at": req.since}))]


class Move(msgspec.Struct):
    """A task's move (with fields set in the same event) and its merge entity's fields."""
    task: str
    to: str | None
    merge: str = ""
    task_fields: dict[str, Any] = {}
    merge_fields: dict[str, Any] = {}
    reason: str = ""
    force: bool = False
    skip_if_not: tuple[str, ...] = ()   # leave the task alone unless it is in one of these


def write(g: Grite, moves: list[Move], what: str, resource: str | None = None,
          holder: str | None = None, extra: list[Draft] = (),
          fields_at_tip: Callable[[Board, Move], dict] | None = None) -> bool:
    """Apply every move in one atomic batch, each validated against the state at the tip.

    With a lease resource the events are fenced: if the lease was lost, replay rejects them.
    Returns False when nothing was left to write.
    """
    def build() -> list[Draft]:
        board = model.board(g)
        out = list(extra)
        for m in moves:
            t = board.tasks.get(m.task)
            if t is None:
                continue
            old = status_of(t)
            if m.skip_if_not and old not in m.skip_if_not:
                continue
            fields = dict(m.task_fields)
            if fields_at_tip:
                fields.update(fields_at_tip(board, m))
            if m.to is not None and m.to != old:
                fields = tasks.move_fields(board, m.task, m.to, m.reason, force=m.force, **fields)
            if fields:
                out.append(Draft(m.task, ev.SetFields(fields)))
            if m.merge and m.merge_fields:
                out.append(Draft(m.merge, ev.SetFields(dict(m.merge_fields))))
        if not out:
            raise _Nothing()
        return out

    summary = f"brat: refinery.{what} " + ",".join(m.task[:7] for m in moves[:8])
    try:
        if resource:
            locks.append_fenced(g, resource, build, summary, holder_id=holder)
        else:
            g.append(build, summary)
    except _Nothing:
        return False
    return True


class _Nothing(Exception):
    pass


def failures_plus_one(board: Board, m: Move) -> dict:
    """`failures` (the witness's attempt count, which it resets when an agent hands work in)
    and `merge_failures` (the refinery's own, capped by refinery.max_attempts), both + 1."""
    t = board.tasks[m.task]
    return {"failures": int(t.get("failures", 0) or 0) + 1,
            "merge_failures": int(t.get("merge_failures", 0) or 0) + 1}


__all__ = ["Request", "requests", "queue_order", "unreachable", "write", "Move", "lease_name",
           "task_branch", "OPEN", "DONE"]
