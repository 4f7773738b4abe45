"""The one writer of a task's status: every move, by any role or command, is checked against the
state machine here (board.TRANSITIONS); creating, editing and linking tasks live here too."""

from __future__ import annotations

from typing import Any

import msgspec

from git_brat.brat.board import (CONVOY, DEFAULT_PRIORITY, TASK, Board, check_paths, check_priority,
                                 check_transition, status_of)
from git_brat.errors import Conflict, NotFound, UsageError
from git_brat.grite.issues import check_text, find_cycle, prerequisites, summary
from git_brat.grite.log.wal import Draft
from git_brat.grite.model import events as ev
from git_brat.grite.repo import Grite


def move_fields(board: Board, tid: str, to: str, reason: str = "", *, force: bool = False,
                **fields: Any) -> dict[str, Any]:
    """The fields of one event moving task tid to `to` (with `fields` set in the same event).

    Refused unless the state machine allows the move from the task's status on this board (the
    state at the tip the event is swapped against); `force` overrides, and is recorded.
    """
    task = board.tasks.get(tid)
    if task is None:
        raise NotFound(f"no task {tid[:7]} on the board")
    old = status_of(task)
    check_transition(board, tid, old, to, force)
    out = dict(fields)
    out.update({"status": to, "status_from": old})
    if old == "running" and to != "running":
        # The run this move ends: replay refuses it once another run is the task's (it was
        # decided on a stale view, e.g. a crash recovered on two clones at once).
        out["ends"] = "" if by_hand(task) else str(task.get("session", ""))
    if force:
        out["forced"] = True
    if reason:
        out["reason"] = reason
    return out


def move(board: Board, tid: str, to: str, reason: str = "", *, force: bool = False,
         **fields: Any) -> Draft:
    """The event moving task tid to `to` (see move_fields): the only way a task changes status."""
    return Draft(tid, ev.SetFields(move_fields(board, tid, to, reason, force=force, **fields)))


def by_hand(task) -> bool:
    """A running task no witness started: moved there by a human (`task update --status
    running`), whose work it is. A witness's start names its session in the very event that
    moves the task (and nothing else moves a task to running), so here the event that set
    the status did not set the session."""
    status, session = task.fields.get("status"), task.fields.get("session")
    return status_of(task) == "running" and (session is None or session[3] != status[3])


class Updated(msgspec.Struct):
    id: str
    from_status: str
    to_status: str
    forced: bool
    event: str


def create_convoy(g: Grite, title: str, body: str = "") -> str:
    title = check_text(title, "convoy title")
    cid = ev.new_entity_id()
    g.append([Draft(cid, ev.Create(CONVOY, {"title": title, "body": body}))],
             summary("convoy.create", cid, title))
    return cid


def task_drafts(tid: str, convoy: str, title: str, body: str, needs: list[str], priority: int,
                paths: list[str], step: str = "") -> list[Draft]:
    """Events creating one task: queued from its first event, so it never lacks a status."""
    fields: dict[str, Any] = {"title": title, "body": body, "status": "queued", "convoy": convoy,
                              "priority": priority, "paths": paths}
    if step:
        fields["step"] = step
    drafts = [Draft(tid, ev.Create(TASK, fields))]
    drafts += [Draft(tid, ev.AddTo("dep:depends_on", n)) for n in sorted(set(needs))]
    return drafts


def create_task(g: Grite, convoy: str, title: str, body: str = "", needs: list[str] = (),
                priority: int = DEFAULT_PRIORITY, paths: list[str] = ()) -> str:
    title = check_text(title, "task title")
    check_priority(priority)
    paths = check_paths(list(paths))
    conv = g.resolve(convoy, CONVOY)
    need_ids = [g.resolve(n, TASK).id for n in needs]
    tid = ev.new_entity_id()
    g.append(task_drafts(tid, conv.id, title, body, need_ids, priority, paths),
             summary("task.create", tid, title))
    return tid


def update_task(g: Grite, ref: str, status: str | None = None, force: bool = False,
                reason: str = "", title: str | None = None, body: str | None = None,
                priority: int | None = None, no_resume: bool | None = None) -> Updated:
    """Change a task in exactly one event; a status change is validated against fresh state.
    no_resume: after a usage limit the task waits for a human instead of resuming."""
    tid = g.resolve(ref, TASK).id
    fields: dict[str, Any] = {}
    if title is not None:
        fields["title"] = check_text(title, "task title")
    if body is not None:
        fields["body"] = body
    if priority is not None:
        fields["priority"] = check_priority(priority)
    if no_resume is not None:
        fields["no_resume"] = no_resume
    if reason:
        check_text(reason, "reason")
    if status is None and not fields:
        raise UsageError("nothing to update: give --status, --title, --body, --priority or "
                         "--no-resume")
    if force and status is None:
        raise UsageError("--force only applies to a --status change")
    seen: dict[str, str] = {}

    def build() -> list[Draft]:
        # g.append runs this against the state at the exact tip it swaps against (and again
        # after a lost compare-and-swap), so two writers can never both make the same move.
        board = Board(g.state(), g.cold_before)
        seen["old"] = status_of(board.tasks[tid])
        out = dict(fields)
        if status is not None:
            task = board.tasks[tid]
            if status == "queued" and (task.get("failures") or task.get("retry_after")
                                       or task.get("merge_failures")):
                # A human's re-queue starts afresh: the witness's and the refinery's counts.
                out.update(failures=0, retry_after=0, merge_failures=0)
            return [move(board, tid, status, reason, force=force, **out)]
        if reason:
            out["reason"] = reason
        return [Draft(tid, ev.SetFields(out))]

    def describe(_events) -> str:
        if status is None:
            return summary("task.update", tid, fields.get("title", ""))
        return summary(f"task.{'force' if force else 'status'}", tid) + f" {seen['old']}->{status}"

    res = g.append(build, describe)
    e = res.events[0]
    return Updated(tid, seen["old"], status or seen["old"],
                   bool(e.op.fields.get("forced", False)), e.id)


def comment(g: Grite, ref: str, text: str) -> str:
    tid = g.resolve(ref, TASK).id
    check_text(text, "comment", one_line=False)
    return g.append([Draft(tid, ev.Comment(text))], summary("task.comment", tid)).events[0].id


def dep_add(g: Grite, ref: str, on: list[str]) -> tuple[str, list[str]]:
    """TASK needs each of ON; refused (nothing written) if any would make a cycle."""
    tid = g.resolve(ref, TASK).id
    targets = [g.resolve(o, TASK).id for o in on]
    if not targets:
        raise UsageError("give the task(s) it needs with --on")
    if tid in targets:
        raise UsageError("a task cannot need itself")

    def build() -> list[Draft]:
        state = g.state()   # at the tip being swapped against (see Grite.append)
        pre = prerequisites(state, TASK)
        pre.setdefault(tid, set()).update(targets)
        cycle = find_cycle(pre, tid)
        if cycle:
            names = [f"{i[:7]} ({state.entities[i].get('title', '')})" for i in cycle]
            raise Conflict("refused: this dependency would make a cycle: " + " -> ".join(names))
        have = set(state.entities[tid].members("dep:depends_on"))
        return [Draft(tid, ev.AddTo("dep:depends_on", t)) for t in sorted(set(targets) - have)
                or sorted(set(targets))]

    if set(targets) <= set(g.resolve(tid, TASK).members("dep:depends_on")):
        return tid, targets   # already there: nothing to write
    g.append(build, summary("task.dep.add", tid))
    return tid, targets


def dep_remove(g: Grite, ref: str, on: list[str]) -> tuple[str, list[str]]:
    tid = g.resolve(ref, TASK).id
    ent = g.resolve(tid, TASK)
    targets = [g.resolve(o, TASK).id for o in on]
    if not targets:
        raise UsageError("give the task(s) to remove with --on")
    drafts = []
    for t in targets:
        tags = ent.live_tags("dep:depends_on", t)
        if not tags:
            raise UsageError(f"task {tid[:7]} does not need {t[:7]}")
        drafts.append(Draft(tid, ev.RemoveFrom("dep:depends_on", t, tags)))
    g.append(drafts, summary("task.dep.remove", tid))
    return tid, targets


__all__ = ["move", "move_fields", "Updated", "create_convoy", "create_task", "task_drafts",
           "update_task", "comment", "dep_add", "dep_remove"]
