"""Convoy / Task / Session / MergeRequest views, the task state machine, readiness, convoy status."""

from __future__ import annotations

import time
from datetime import datetime

import msgspec

from git_brat.brat import spend
from git_brat.grite.model import kinds
from git_brat.grite.log import identity
from git_brat.grite.cache.projection import actor_names
from git_brat.errors import Conflict, NotARepository, UsageError
from git_brat.git.store import Store
from git_brat.grite.issues import check_text, prerequisites, topo
from git_brat.grite.repo import Grite
from git_brat.grite.model.state import Entity, State, iso
from git_brat.grite.log.refs import grite_dir

CONVOY, TASK, SESSION, MERGE = kinds.CONVOY, kinds.TASK, kinds.SESSION, kinds.MERGE
STATES = ("queued", "running", "needs-review", "merging", "merged", "blocked", "failed", "dropped")
# The state machine: where each state may go without --force (grite's kinds table holds it,
# so that replay re-checks every move a log brings).
TRANSITIONS: dict[str, tuple[str, ...]] = kinds.KINDS[kinds.TASK].transitions or {}
IN_FLIGHT = ("running", "needs-review", "merging")
# Settled statuses of tasks, sessions and merge requests (grite's kinds table): cold once
# older than grite.coldAfterDays.
FINISHED = kinds.settled(TASK)
SESSION_ENDED = kinds.settled(SESSION)
MERGE_DONE = kinds.settled(MERGE)
NOT_SETTLED = 1 << 62   # a cold_before that leaves out every settled entity, however new
CONVOY_STATES = ("active", "landed", "failed", "stalled")
DEFAULT_PRIORITY = 2
PRIORITIES = (0, 1, 2, 3, 4)     # 0 is the most urgent


def board(g: Grite, refresh: bool = False) -> "Board":
    """The hot work of the repository (see Board), at its current state."""
    return Board(g.state(refresh=refresh), g.cold_before)


def open_grite(cwd: str | None = None) -> Grite:
    """The repository, or a clear "run git brat init" when it has not been set up."""
    store = Store.discover(cwd)
    if not identity.is_initialized(grite_dir(store)):
        raise NotARepository("git-brat is not initialised in this repository; run `git brat init`")
    return Grite(store)


# -- views -----------------------------------------------------------------------

class TaskView(msgspec.Struct):
    id: str
    title: str
    status: str
    convoy: str
    priority: int
    step: str                  # the workflow step that made it ("" for hand-made tasks)
    needs: list[str]
    paths: list[str]
    ready: bool
    created_at: datetime
    updated_at: datetime
    author: str
    # On a usage limit (the witness paused it): until when (epoch ms), and as people read it,
    # "paused until 21:00 (claude usage limit)"; 0 and "" when it is not paused.
    paused_until: int = 0
    paused: str = ""


class Transition(msgspec.Struct):
    event: str
    at: datetime
    actor: str                 # who moved it: a person, or "claude (session ab12cd3) via Eve"
    from_status: str
    to_status: str
    forced: bool
    reason: str
    via: str = ""              # the session whose agent caused it ("" for a person's own move)
    engine: str = ""           # that session's engine


class CommentView(msgspec.Struct):
    id: str
    author: str                # as Transition.actor
    created_at: datetime
    body: str
    via: str = ""              # as Transition.via
    engine: str = ""


def paused_of(t: Entity, now_ms: int | None = None) -> dict:
    """A task's pause on a usage limit, while it lasts (TaskView's paused fields)."""
    until = t.get("paused_until", 0)
    now_ms = now_ms if now_ms is not None else int(time.time() * 1000)
    if type(until) is not int or until <= now_ms or status_of(t) not in ("queued", "blocked"):
        return {}
    why = t.get("paused_why") or "usage limit"
    from git_brat.brat.engines.resets import clock   # (zoneinfo: only for a paused task)
    return {"paused_until": until, "paused": f"paused until {clock(until, now_ms)} ({why})"}


class TaskDetail(TaskView):
    body: str = ""
    reason: str = ""           # given with the transition into the current status
    dependents: list[str] = []
    allowed: list[str] = []    # statuses reachable without --force
    comments: list[CommentView] = []
    history: list[Transition] = []
    approved_head: str = ""    # the commit a human approved to land ("" if none)
    spent: spend.Spent | None = None   # tokens and cost over its sessions
    check: dict | None = None  # its last failed check (refinery/report.check_report; `task show`)
    no_resume: bool = False    # after a usage limit it waits for a human (task update --no-resume)


class ConvoyView(msgspec.Struct):
    id: str
    title: str
    status: str                # active / landed / failed / stalled (derived)
    total: int
    counts: dict[str, int]     # every task state, zeros included
    ready: int
    workflow: str
    created_at: datetime
    updated_at: datetime
    author: str


class ConvoyDetail(ConvoyView):
    body: str = ""
    vars: dict[str, str] = {}
    tasks: list[TaskView] = []
    spent: spend.Spent | None = None   # tokens and cost over its tasks' sessions


class SessionView(msgspec.Struct):
    id: str
    task: str
    status: str
    engine: str
    branch: str
    worktree: str
    created_at: datetime
    updated_at: datetime


class MergeQueueEntry(msgspec.Struct):
    position: int
    task: str
    title: str
    convoy: str
    status: str                # needs-review (waiting) or merging
    priority: int
    merge: str | None          # the merge entity the refinery recorded, if any
    since: datetime


# -- the board: one state with the indexes every view needs ---------------------------

def status_of(ent: Entity) -> str:
    return ent.get("status", "queued")


def reason_of(ent: Entity) -> str:
    """The reason given with the transition into the current status (not an older one)."""
    st, rs = ent.fields.get("status"), ent.fields.get("reason")
    return rs[0] if st and rs and rs[3] == st[3] else ""


class Lookup(dict):
    """id -> entity of one kind: the board's, and any other looked up by id (a cold one) on demand."""

    def __init__(self, state: State, kind: str, ents):
        super().__init__((e.id, e) for e in ents)
        self._state, self._kind = state, kind

    def __missing__(self, eid: str) -> Entity:
        ent = self._state.entities.get(eid)
        if ent is None or not ent.created or ent.kind != self._kind:
            raise KeyError(eid)
        self[eid] = ent
        return ent

    def get(self, eid: str, default=None):
        try:
            return self[eid]
        except KeyError:
            return default

    def __contains__(self, eid) -> bool:
        return self.get(eid) is not None

    # Copies: a lookup while iterating may add an entity.
    def values(self):
        return list(dict.values(self))

    def items(self):
        return list(dict.items(self))

    def __iter__(self):
        return iter(list(dict.keys(self)))


class Board:
    """Tasks and convoys of one state, indexed once per command.

    With cold_before (ms), it holds the hot work only: tasks not merged or dropped before then,
    and the convoys they or recent changes name, each with all its tasks. Status, `task ready`
    and the witness then cost what the active work costs, however long the history.
    """

    def __init__(self, state: State, cold_before: int = 0):
        self.state = state
        self.cold_before = cold_before
        if cold_before:
            hot = state.of_kind(TASK, FINISHED, cold_before)
            convoys = {c.id: c for c in state.of_kind(CONVOY, ("",), cold_before)}
            for cid in {t.get("convoy", "") for t in hot} - set(convoys):
                c = state.entities.get(cid)
                if c is not None and c.created and c.kind == CONVOY:
                    convoys[cid] = c
            tasks = {t.id: t for t in hot}
            # ... and the settled ones of those convoys (the rest are in hot already).
            tasks.update((t.id, t) for t in state.of_groups(TASK, list(convoys),
                                                            (FINISHED, cold_before)))
            self.tasks = Lookup(state, TASK, tasks.values())
            self.convoys = Lookup(state, CONVOY, convoys.values())
        else:
            self.tasks = Lookup(state, TASK, state.of_kind(TASK))
            self.convoys = Lookup(state, CONVOY, state.of_kind(CONVOY))
        self._pre: dict[str, set[str]] | None = None      # every task's, once asked for
        self._some_pre: dict[str, set[str]] = {}          # those of the tasks asked about
        self.names = actor_names(state)
        self.by_convoy: dict[str, list[Entity]] = {}
        for t in sorted(self.tasks.values(), key=age_key):
            self.by_convoy.setdefault(t.get("convoy", ""), []).append(t)
        self._moving: dict[str, bool] | None = None

    def convoy_tasks(self, cid: str) -> list[Entity]:
        """A convoy's tasks, oldest first (read on demand for a convoy this board left cold)."""
        if cid not in self.by_convoy and cid:
            found = sorted(self.state.of_group(TASK, cid), key=age_key)
            for t in found:
                self.tasks.setdefault(t.id, t)
            self.by_convoy[cid] = found
        return self.by_convoy.get(cid, [])

    @property
    def pre(self) -> dict[str, set[str]]:
        """Every task's prerequisites (read when first asked: a page of a few cards of a 10k
        board asks about its cards only, through prereqs)."""
        if self._pre is None:
            self._pre = prerequisites(self.state, TASK, list(self.tasks.values()))
        return self._pre

    def prereqs(self, tid: str) -> set[str]:
        if self._pre is not None and tid in self._pre:
            return self._pre[tid]
        if tid not in self._some_pre:
            self.prereqs_of([tid])
        return self._some_pre[tid]

    def prereqs_of(self, tids: list[str]) -> None:
        """Read the prerequisites of many tasks at once (prereqs then answers from memory)."""
        want = [self.tasks[t] for t in tids if t not in self._some_pre]
        if want:
            self._some_pre.update(prerequisites(self.state, TASK, want))

    def is_ready(self, tid: str) -> bool:
        t = self.tasks[tid]
        return status_of(t) == "queued" and all(
            status_of(self.tasks[p]) == "merged" for p in self.prereqs(tid))

    def unmet(self, tid: str) -> list[str]:
        return sorted(p for p in self.prereqs(tid) if status_of(self.tasks[p]) != "merged")

    def ready(self, convoy: str | None = None) -> list[Entity]:
        """Ready tasks in the order they should run: priority, then age."""
        pool = self.convoy_tasks(convoy) if convoy else self.tasks.values()
        return sorted((t for t in pool if self.is_ready(t.id)), key=run_key)

    def can_move(self, tid: str) -> bool:
        """Whether a task can still progress without a human (in flight, or queued on live work)."""
        if self._moving is None:
            # Prerequisites first, so each answer builds on its needs' (no recursion depth limit);
            # tasks on a cycle (possible when replicas add edges concurrently) never move.
            self._moving = {}
            for t in topo(self.state, TASK, ents=list(self.tasks.values())):
                st = status_of(t)
                self._moving[t.id] = st in IN_FLIGHT or st == "queued" and all(
                    status_of(self.tasks[p]) == "merged" or self._moving.get(p, False)
                    for p in self.prereqs(t.id))
        return self._moving.get(tid, False)

    def convoy_status(self, cid: str) -> str:
        """landed: all merged or dropped; failed: a task failed; stalled: nothing can move."""
        tasks = self.convoy_tasks(cid)
        if not tasks:
            return "active"
        states = [status_of(t) for t in tasks]
        if all(s in FINISHED for s in states):
            return "landed"
        if "failed" in states:
            return "failed"
        if any(self.can_move(t.id) for t in tasks if status_of(t) not in FINISHED):
            return "active"
        return "stalled"

    def counts(self, cid: str) -> dict[str, int]:
        out = dict.fromkeys(STATES, 0)
        for t in self.convoy_tasks(cid):
            st = status_of(t)
            out[st] = out.get(st, 0) + 1
        return out

    def task_view(self, t: Entity) -> TaskView:
        return TaskView(t.id, t.get("title", ""), status_of(t), t.get("convoy", ""),
                        priority_of(t), t.get("step", ""),
                        sorted(self.prereqs(t.id)), list(t.get("paths", [])),
                        self.is_ready(t.id), iso(t.created_at), iso(t.updated_at),
                        self.names.get(t.created_by, t.created_by), **paused_of(t))

    def convoy_view(self, c: Entity) -> ConvoyView:
        return ConvoyView(c.id, c.get("title", ""), self.convoy_status(c.id),
                          len(self.convoy_tasks(c.id)), self.counts(c.id),
                          sum(1 for t in self.convoy_tasks(c.id) if self.is_ready(t.id)),
                          c.get("workflow", ""), iso(c.created_at), iso(c.updated_at),
                          self.names.get(c.created_by, c.created_by))

    def convoy_detail(self, c: Entity) -> ConvoyDetail:
        v = self.convoy_view(c)
        return ConvoyDetail(**msgspec.structs.asdict(v), body=c.get("body", ""),
                            vars=dict(c.get("vars", {})),
                            tasks=[self.task_view(t) for t in self.convoy_tasks(c.id)],
                            spent=spend.view(spend.convoy_sessions(
                                self.state, self.convoy_tasks(c.id))))

    def task_detail(self, t: Entity, history: list[Transition] = ()) -> TaskDetail:
        v = self.task_view(t)
        comments = [self._comment_view(t, eid, actor, ts, body)
                    for eid, _l, actor, ts, body in t.sorted_comments()]
        dependents = self.dependents(t.id)
        return TaskDetail(**msgspec.structs.asdict(v), body=t.get("body", ""), reason=reason_of(t),
                          dependents=dependents, allowed=list(TRANSITIONS.get(v.status, ())),
                          comments=comments, history=list(history),
                          approved_head=str(t.get("approved_head", "") or ""),
                          spent=spend.view(spend.task_sessions(self.state, t.id)),
                          no_resume=t.get("no_resume") is True)

    def _comment_view(self, t: Entity, eid: str, actor: str, ts: int, body: str) -> CommentView:
        who, via, engine = credit(self.state, self.names, actor, t.vias.get(eid, ""))
        return CommentView(eid, who, iso(ts), body, via, engine)

    def dependents(self, tid: str) -> list[str]:
        """Tasks that wait for tid (found through the dep_sources index, cold ones included)."""
        t = self.tasks[tid]
        out = {x for x in t.members("dep:blocks") if self.state.kinds.get(x) == TASK}
        for src in self.state.dep_sources.get(tid, ()):
            if self.state.kinds.get(src) == TASK and \
                    tid in self.state.entities[src].members("dep:depends_on"):
                out.add(src)
        return sorted(out)

    def convoy_list(self) -> list[ConvoyView]:
        return [self.convoy_view(c) for c in sorted(self.convoys.values(), key=age_key)]

    def task_list(self, convoy: str | None = None, statuses: list[str] = ()) -> list[TaskView]:
        pool = self.convoy_tasks(convoy) if convoy else sorted(self.tasks.values(), key=age_key)
        return [self.task_view(t) for t in pool if not statuses or status_of(t) in statuses]

    def sessions(self, statuses: tuple[str, ...] | None = ("starting", "running")) -> list[SessionView]:
        out = [SessionView(e.id, e.get("task", ""), e.get("status", ""), e.get("engine", ""),
                           e.get("branch", ""), e.get("worktree", ""), iso(e.created_at),
                           iso(e.updated_at))
               for e in self.hot(SESSION, SESSION_ENDED)
               if statuses is None or e.get("status", "") in statuses]
        return sorted(out, key=lambda s: (s.created_at, s.id))

    def hot(self, kind: str, settled: tuple[str, ...]) -> list[Entity]:
        """Entities of a kind, less the cold ones when this board holds hot work only."""
        return self.state.of_kind(kind, settled, self.cold_before)

    def merge_queue(self) -> list[MergeQueueEntry]:
        """Tasks waiting for or in the refinery: merging first, then priority, then age."""
        merges: dict[str, Entity] = {}
        for e in self.hot(MERGE, MERGE_DONE):
            if e.get("task"):
                cur = merges.get(e.get("task"))
                if cur is None or age_key(e) > age_key(cur):
                    merges[e.get("task")] = e
        waiting = [t for t in self.tasks.values() if status_of(t) in ("needs-review", "merging")]
        waiting.sort(key=lambda t: (status_of(t) != "merging", *run_key(t)))
        out = []
        for i, t in enumerate(waiting, 1):
            m = merges.get(t.id)
            out.append(MergeQueueEntry(i, t.id, t.get("title", ""), t.get("convoy", ""),
                                       status_of(t), priority_of(t),
                                       m.id if m else None, iso(t.updated_at)))
        return out


def age_key(e: Entity) -> tuple:
    return (e.created_at, tuple(e.create_stamp or ()), e.id)


def run_key(e: Entity) -> tuple:
    return (priority_of(e), *age_key(e))


def priority_of(e: Entity) -> int:
    """A task's priority, always one of PRIORITIES: every sort by it is total (replay rejects
    any other value; a cache or snapshot may still hold one written before it did)."""
    p = e.get("priority", DEFAULT_PRIORITY)
    return p if type(p) is int and p in PRIORITIES else DEFAULT_PRIORITY


def whole(value: object, default: int = 0) -> int:
    """A field's value as a whole number to compare or sort by (default when it is not one)."""
    return value if type(value) is int else default


# -- checks every writer makes --------------------------------------------------------

def check_priority(p: int) -> int:
    if p not in PRIORITIES:
        raise UsageError(f"priority {p} is not allowed: use 0 (most urgent) to 4")
    return p


def check_paths(paths: list[str]) -> list[str]:
    out = []
    for p in paths:
        p = check_text(p, "path glob")
        if p not in out:
            out.append(p)
    return out


def check_transition(board: Board, tid: str, old: str, new: str, force: bool) -> None:
    """Refuse a move the state machine does not allow (unless forced), naming what is allowed."""
    short = tid[:7]
    if new not in STATES:
        raise UsageError(f"unknown status {new!r}: use one of {', '.join(STATES)}")
    if old == new:
        raise Conflict(f"refused: task {short} is already {old}")
    if force:
        return
    allowed = TRANSITIONS.get(old, ())
    if new not in allowed:
        where = ", ".join(allowed) if allowed else "nowhere (it is final)"
        raise Conflict(f"refused: task {short} is {old}; from {old} it can go to {where}, "
                       f"not {new} (--force overrides, and is recorded)")
    if old == "queued" and new == "running":
        unmet = board.unmet(tid)
        if unmet:
            shown = ", ".join(f"{u[:7]} ({status_of(board.tasks[u])})" for u in unmet)
            raise Conflict(f"refused: task {short} is not ready: it needs {shown} to be merged "
                           f"first (--force overrides, and is recorded)")


def credit(state, names: dict[str, str], actor: str, via: object) -> tuple[str, str, str]:
    """Whom an event is shown as: (who, session, engine). An agent's words and moves (written
    for it by its witness, with `via` = its session) are the agent's: "claude (session ab12cd3)
    via Eve". `via` is believed only of a session the same actor created (the witness that
    spoke for it started it): anyone who pushes may write a `via`, but only about their own
    sessions, so no one is shown as another's agent, and an agent, whose every word reaches
    the log through its witness, is never shown as the person it works for."""
    name = names.get(actor, actor)
    sess = state.entities.get(via) if isinstance(via, str) and via else None
    if sess is None or sess.kind != SESSION or sess.created_by != actor:
        return name, "", ""
    engine = sess.get("engine", "")
    engine = engine if isinstance(engine, str) and engine.isprintable() and engine else "agent"
    return f"{engine[:40]} (session {sess.id[:7]}) via {name}", sess.id, engine[:40]


def history(g: Grite, tid: str) -> list[Transition]:
    """Every status change of a task, in replay order (kept with the task: no log scan)."""
    state = g.state()
    names = actor_names(state)
    ent = state.entities[tid]
    out = []
    for eid, (lamport, actor, ts, fields) in sorted(ent.transitions.items(),
                                                     key=lambda kv: (kv[1][0], kv[1][1], kv[0])):
        if "status" in fields and eid not in state.rejected:   # (doctor lists rejected moves)
            who, via, engine = credit(state, names, actor, fields.get("via"))
            out.append(Transition(eid, iso(ts), who, fields.get("status_from", ""),
                                  fields["status"], bool(fields.get("forced", False)),
                                  fields.get("reason", ""), via, engine))
    return out


__all__ = ["Board", "STATES", "TRANSITIONS", "open_grite", "check_transition", "credit", "history"]
