"""The status view: convoys, ready tasks, sessions, merge queue, leases, interventions, recovery."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

import msgspec

from git_brat import process
from git_brat.brat import board as model
from git_brat.brat import holds
from git_brat.brat.holds import HoldView
from git_brat.brat import spend
from git_brat.brat.config import Config
from git_brat.brat.tasks import by_hand
from git_brat.brat.board import Board, ConvoyView, MergeQueueEntry, SessionView, TaskView, status_of
from git_brat.grite import locks
from git_brat.grite.locks import LeaseView
from git_brat.process import hostname
from git_brat.grite.log.wal import Problem
from git_brat.grite.repo import Grite
from git_brat.grite.model.state import Entity, iso

INTERVENTION_KINDS = ("needs-human", "failed", "stuck", "blocked", "stalled", "by-hand")


class Intervention(msgspec.Struct):
    kind: str                  # needs-human, failed, stuck, blocked, stalled, by-hand
    task: str
    convoy: str
    title: str
    detail: str
    command: str               # what resolves it, ready to paste
    since: datetime
    by: str = ""               # the agent whose move it was: "claude (session ab12cd3) via Eve"
    via: str = ""              # that agent's session ("" when a person moved it)


class CrashedSession(msgspec.Struct):
    session: str
    task: str
    branch: str
    branch_exists: bool        # its commits survive on the branch
    worktree: str
    crashed_at: datetime
    commits: int = 0           # commits on the branch not on the target (what survived)
    salvaged: str = ""         # commit of the work it had left uncommitted
    conversation: str = ""     # the engine's conversation id: the next session resumes it
    log: str = ""              # its output, if it ran on this machine
    reason: str = ""
    lost: list[str] = []       # what is gone, said plainly
    merged: bool = False       # its task has been merged since
    spent: spend.Spent | None = None   # what it had spent (None: nothing recorded)


class SurvivedBranch(msgspec.Struct):
    branch: str
    task: str
    commit: str


class RecoveryReport(msgspec.Struct):
    """What replay and the roles recovered, and what a human should look at."""
    rebuilt_from_log: bool     # this command rebuilt the state from the logs (no usable cache)
    events: int                # events in the projected state
    snapshot: str | None       # the snapshot commit that rebuild started from, if any
    replayed: int              # events the rebuild replayed from the logs (0 if none was needed)
    skipped_records: list[Problem]   # unreadable log records replay had to skip
    unreadable_leases: list[str]     # lease refs whose record cannot be read
    rejected_events: int       # events replay refused (stale lease, illegal move, bounds)
    crashed_sessions: list[CrashedSession]
    survived_branches: list[SurvivedBranch]
    needs_review: list[str]    # tasks whose crashed work survives and needs a human look


class NotStarted(msgspec.Struct):
    """A ready task the witness would pass over now, and why (its pick rule's words)."""
    task: str
    reason: str


class DeadSession(msgspec.Struct):
    """A session the log still calls live whose witness is known to be gone: it crashed, and
    the next `witness run` or `deacon run` on this host recovers it."""
    session: str
    task: str
    witness_pid: int
    reason: str


class ReviewWait(msgspec.Struct):
    """A finished task that waits for a human's decision before it may land."""
    task: str
    convoy: str
    title: str
    head: str                  # the commit an approval would land ("" if not here)
    branch: str
    target: str                # the branch it would land on (for `git diff target...branch`)
    since: datetime


class Status(msgspec.Struct):
    generated_at: datetime
    convoy: str | None         # the --convoy filter, if any
    convoys: list[ConvoyView]
    ready: list[TaskView]
    sessions: list[SessionView]
    merge_queue: list[MergeQueueEntry]
    leases: list[LeaseView]
    interventions: list[Intervention]
    recovery: RecoveryReport
    deacon: Any = None         # what the deacon last did (deacon.LastRun), None if it never ran
    warnings: list[str] = []   # e.g. grite's hooks not live: pushes would not publish
    not_started: list[NotStarted] = []    # ready tasks the witness passes over, and why
    dead_sessions: list[DeadSession] = []  # live in the log, their witness gone on this host
    no_branch: list[str] = []  # merge-queue tasks whose branch is not in this clone
    sandbox: str = ""          # where new sessions run here: bwrap or none (witness.sandbox)
    confinement: str = ""      # what a new session's sandbox confines here, in a few words
    review: list[ReviewWait] = []   # finished tasks waiting for approve / reply
    review_mode: str = ""      # what lets a task land: human (an approval) or auto (the check)
    tasks: list[TaskView] = []  # every task (of the --convoy), asked for with --tasks
    spent: dict[str, spend.Spent] = {}   # convoy -> what its sessions spent (unlanded ones)
    red_target: Any = None     # the target failing its own check (refinery.red.RedTarget)
    # engines held on a usage limit, and pauses not honoured here (untrusted writer): holds.py
    engine_holds: list[HoldView] = []


def leases(g: Grite) -> tuple[list[LeaseView], list[str]]:
    """Live and expired leases (released ones are history), and unreadable lease records.

    Local records only: status never touches the network. Released leases are not read
    again: a year of finished claims costs nothing (see locks.status).
    """
    st = locks.status(g, locks.settings(g.store, local=True), refresh=False, released=False)
    return [l for l in st.leases if l.state != "released"], list(st.problems)


def _lease_on(lease: LeaseView, tid: str) -> bool:
    """Whether a lease is the claim on task tid (`task:<id>`, the id possibly abbreviated)."""
    ns, _, name = lease.resource.partition(":")
    return ns == "task" and len(name) >= 7 and tid.startswith(name)


def _lease_live(lease_list: list[LeaseView], tid: str) -> bool:
    return any(l.state == "held" and _lease_on(l, tid) for l in lease_list)


# A command to paste is built here, from the intervention's kind and the task's id (checked to
# be an entity id), never taken from the log: any replica writes the log, and a plain
# `git brat config set witness.setup ./x` is as harmful as a shell one. A role that flags a
# task for a human names one of these in the task's `resolve` field.
RESOLVE = {"refinery-retry": "git brat refinery retry {short}",
           "refinery-run": "git brat refinery run --once"}
_TASK_ID = re.compile(r"[0-9a-f]{32}")


def _resolve_command(t: Entity, default: str) -> str:
    short = t.id[:7]
    kind = t.get("resolve")
    if isinstance(kind, str) and kind in RESOLVE:
        return RESOLVE[kind].format(short=short)
    # Records of earlier versions carry the command itself: shown only when it is one this
    # code builds for this task.
    old = t.get("resolve_command")
    if isinstance(old, str) and old in {c.format(short=short) for c in RESOLVE.values()}:
        return old
    return default


def interventions(board: Board, cfg: Config, lease_list: list[LeaseView],
                  now_ms: int) -> list[Intervention]:
    out = []
    stuck_ms = cfg.status.stuck_after * 1000

    def _raised_since_last_move(t: Entity) -> bool:
        # A needs-human flag is about the status it was raised in; any later move clears it.
        flag, status = t.fields.get("needs_human"), t.fields.get("status")
        return status is None or tuple(flag[1:]) >= tuple(status[1:])

    def add(kind: str, t: Entity, detail: str, command: str) -> None:
        by, via = _moved_by_agent(board, t)
        out.append(Intervention(kind, t.id, t.get("convoy", ""), t.get("title", ""), detail,
                                command, iso(t.updated_at), by, via))

    for t in sorted(board.tasks.values(), key=model.run_key):
        if not isinstance(t.id, str) or not _TASK_ID.fullmatch(t.id):
            continue   # forged: no command may be built from its id
        st, short, why = status_of(t), t.id[:7], model.reason_of(t)
        if t.get("needs_human") and st not in model.FINISHED and _raised_since_last_move(t):
            add("needs-human", t, str(t.get("needs_human")),
                _resolve_command(t, f"git brat task show {short}"))
        elif st == "failed":   # a reply re-queues it with the answer the next attempt needs
            add("failed", t, why or "the task failed",
                f"git brat task reply {short} -m \"what to do differently\"")
        elif st == "blocked":
            add("blocked", t, why or "blocked (no reason given)",
                f"git brat task reply {short} -m \"your answer\"")
        elif st in ("running", "merging") and now_ms - t.updated_at > stuck_ms \
                and not _lease_live(lease_list, t.id):
            mins = int((now_ms - t.updated_at) / 60000)
            add("stuck", t, ("set running by hand (the witness leaves it to you), "
                             if by_hand(t) else "") + f"{st} for {mins} min with no live lease",
                f"git brat task update {short} --status queued -m \"requeue stuck task\"")
        elif by_hand(t) and not _lease_live(lease_list, t.id):
            add("by-hand", t, f"running by hand: no witness session runs it, so the witness and "
                f"the deacon leave it to you (your work goes on brat/{t.id}; `--status queued` "
                f"hands it to an agent)", f"git brat task update {short} --status needs-review")
        elif st == "queued":
            dead = [p for p in sorted(board.pre.get(t.id, ()))
                    if status_of(board.tasks[p]) == "dropped"]
            if dead:
                add("stalled", t, f"needs dropped task {dead[0][:7]}",
                    f"git brat task dep remove {short} --on {dead[0][:7]}")
    order = {k: i for i, k in enumerate(INTERVENTION_KINDS)}
    return sorted(out, key=lambda i: order[i.kind])


def _moved_by_agent(board: Board, t: Entity) -> tuple[str, str]:
    """(who, session) when an agent's session moved task t to its status, else ("", "")."""
    cell = t.fields.get("status")
    move = t.transitions.get(cell[3]) if cell is not None else None
    if move is None or not move[3].get("via"):
        return "", ""
    who, via, _engine = model.credit(board.state, board.names, move[1], move[3].get("via"))
    return (who, via) if via else ("", "")


def recovery(g: Grite, board: Board, tasks: set[str] | None,
             lease_problems: list[str] = ()) -> RecoveryReport:
    crashed, survived, review = [], [], []
    for e in sorted(board.hot(model.SESSION, model.SESSION_ENDED), key=model.age_key):
        if e.get("status") != "crashed":
            continue
        tid = e.get("task", "")
        if tasks is not None and tid not in tasks:
            continue
        branch = e.get("branch", "")
        sha = g.store.refs.read(b"refs/heads/" + branch.encode()) if branch else None
        crashed.append(_crashed(g, e, tid, branch, sha))
        if sha is not None:
            survived.append(SurvivedBranch(branch, tid, sha.decode()))
            task = board.tasks.get(tid)
            if task is not None and status_of(task) not in model.FINISHED and tid not in review:
                review.append(tid)
    cache = g.cache
    snap = cache.from_snapshot
    replayed = max(0, board.state.event_count - cache.from_snapshot_events) if cache.rebuilt else 0
    return RecoveryReport(cache.rebuilt, board.state.event_count, snap.commit if snap else None,
                          replayed, list(cache.problems), list(lease_problems),
                          len(board.state.rejected), crashed, survived, review)


def _crashed(g: Grite, e: Entity, tid: str, branch: str, sha: bytes | None) -> CrashedSession:
    """One crashed session: what of its work survives, and what a crash took."""
    import os
    from git_brat.brat import sessions
    log = sessions.log_path(g, e.id)
    here = e.get("host", "") == hostname()
    lost = []
    if sha is None and branch:
        lost.append(f"its branch {branch} is not in this clone (it ran on {e.get('host', '?')})")
    if not here and not e.get("salvaged"):
        lost.append(f"anything it left uncommitted on {e.get('host', '?')} was not seen from here")
    conversation = e.get("engine_session", "")
    if not conversation:
        lost.append(f"its conversation: engine {e.get('engine', '?')} gave no id to resume")
    commits = _commits_made(g, e, sha)
    task = g.state().entities.get(tid)
    merged = task is not None and task.get("status") == "merged"
    return CrashedSession(e.id, tid, branch, sha is not None, e.get("worktree", ""),
                          iso(e.get("ended_at") or e.updated_at), commits, e.get("salvaged", ""),
                          conversation, log if log and os.path.exists(log) else "", e.get("reason", ""),
                          [] if merged else lost, merged,
                          spend.view([e]) if spend.of_session(e) is not None else None)


def _commits_made(g: Grite, e: Entity, tip: bytes | None) -> int:
    """The commits a crashed session itself made: from the branch's tip when it started to its
    tip when it was found crashed (recovery records both), never its successors' (the branch
    moves on). A record without them (an older writer's) is counted as before, to the branch."""
    start, head = e.get("start_head"), e.get("head")
    if tip is None:
        return 0
    if isinstance(start, str) and isinstance(head, str) and start and "head" in e.fields:
        return g.store.objects.count(start, head) if head else 0
    return g.store.objects.count(e.get("target", "") or "HEAD", tip.decode())


def _with_prerequisites(board: Board, tasks: set[str]) -> set[str]:
    """tasks and everything they transitively depend on."""
    seen, stack = set(tasks), list(tasks)
    while stack:
        for p in board.pre.get(stack.pop(), ()):
            if p not in seen:
                seen.add(p)
                stack.append(p)
    return seen


def build(g: Grite, cfg: Config, convoy: str | None = None, board: Board | None = None,
          every_task: bool = False) -> Status:
    board = board or model.board(g)
    lease_list, lease_problems = leases(g)
    now_ms = process.now_ms()
    cid = g.resolve(convoy, model.CONVOY).id if convoy else None
    convoys = board.convoy_list()
    tasks: set[str] | None = None
    if cid:
        convoys = [c for c in convoys if c.id == cid]
        tasks = {t.id for t in board.convoy_tasks(cid)}
        lease_list = [l for l in lease_list if any(_lease_on(l, t) for t in tasks)]
    ready_tasks = board.ready(cid)
    ready = [board.task_view(t) for t in ready_tasks]
    from git_brat.brat.witness import pick
    not_started = [NotStarted(t.id, why) for t in ready_tasks
                   if (why := pick.passed_over(t, now_ms, leases=lease_list))]
    sessions, dead = _sessions(g, board, tasks)
    from git_brat.brat import review as rv
    waiting = [ReviewWait(t.id, t.get("convoy", ""), t.get("title", ""),
                          head := rv.head_under_review(board, g.store, t.id),
                          f"brat/{t.id}", cfg.refinery.target_branch, iso(t.updated_at))
               for t in rv.waiting(board, g.store, cfg) if tasks is None or t.id in tasks]
    queue, unreached = merge_queue(g, cfg, board, {w.task for w in waiting})
    queue = [m for m in queue if tasks is None or m.task in tasks]
    # A convoy can be held up by a task in another convoy it depends on: show that one too.
    related = None if tasks is None else _with_prerequisites(board, tasks)
    todo = [i for i in interventions(board, cfg, lease_list, now_ms)
            if related is None or i.task in related]
    from git_brat.brat.deacon import last_run
    from git_brat.brat.refinery import red
    from git_brat.grite.sync.install import hooks_warning
    warnings = [w for w in (hooks_warning(g.store),) if w]
    from git_brat.brat.engines import sandbox
    if (box := sandbox.unconfined_warning(cfg.witness.sandbox)):
        warnings.append(box)
    elif sandbox.effective(cfg.witness.sandbox) == "bwrap" and \
            (net := sandbox.network_warning(cfg.witness.sandbox_network)):
        warnings.append(net)
    if (gate := rv.mode_warning(cfg)):
        warnings.append(gate)
    from git_brat.brat.refinery import hub
    if (unchecked := hub.problem(g, cfg)):
        warnings.append(unchecked)
    if ready and (engine := pick.engine_problem(cfg)):
        warnings.append(f"witness.engine: {engine}: `git brat witness run` cannot work on the "
                        f"ready tasks")
    return Status(iso(now_ms), cid, convoys, ready, sessions, queue, lease_list, todo,
                  recovery(g, board, tasks, lease_problems), last_run(g, board.state),
                  warnings, not_started, dead,
                  [t for t in unreached if tasks is None or t in tasks],
                  sandbox.effective(cfg.witness.sandbox),
                  sandbox.describe_setting(cfg.witness.sandbox, cfg.witness.sandbox_network,
                                           short=True), waiting, rv.mode(cfg),
                  board.task_list(cid) if every_task else [],
                  _spent(board, convoys), red.red_target(board, cfg.refinery.target_branch),
                  holds.views(g, board, now_ms))


def _spent(board: Board, convoys: list[ConvoyView]) -> dict[str, spend.Spent]:
    """What each listed convoy still at work spent (a landed one's spending is in `convoy
    show`: status stays cheap however much history there is)."""
    out = {}
    for c in convoys:
        if c.status != "landed":
            view = spend.view(spend.convoy_sessions(board.state, board.convoy_tasks(c.id)))
            if view.sessions:
                out[c.id] = view
    return out


def _sessions(g: Grite, board: Board, tasks: set[str] | None) -> tuple[list[SessionView], list[DeadSession]]:
    """The live sessions, those whose witness is gone on this host shown as crashed: the same
    question recovery asks (sessions.witness_gone), so status agrees with the next witness run."""
    from git_brat.brat import sessions as ss
    out, dead = [], []
    for v in board.sessions():
        if tasks is not None and v.task not in tasks:
            continue
        e = board.state.entities.get(v.id)
        pid = ss.witness_gone(g.store, e) if e is not None else 0
        if pid:
            dead.append(DeadSession(v.id, v.task, pid, f"its witness (pid {pid}) is gone"))
            v = msgspec.structs.replace(v, status="crashed")
        out.append(v)
    return out, dead


def merge_queue(g: Grite, cfg: Config, board: Board,
                in_review: set[str] = frozenset()) -> tuple[list[MergeQueueEntry], list[str]]:
    """The merge queue as the refinery takes it: what it is merging now (position 0), then its
    requests numbered in its own order (refinery.queue.requests, the one rule), then the tasks
    approved to land whose branch this clone does not have, which it cannot take yet (their
    ids are the second value). Tasks waiting for a human's review (in_review) are not in it."""
    from git_brat.brat.refinery import queue as rq
    tasks = board.tasks
    out = [MergeQueueEntry(0, m.task, m.title, m.convoy, m.status, m.priority, m.merge, m.since)
           for m in board.merge_queue() if m.status == "merging"]
    taken = set()
    for i, r in enumerate(rq.requests(g, cfg, board), 1):
        t = tasks[r.task]
        taken.add(r.task)
        out.append(MergeQueueEntry(i, r.task, r.title, t.get("convoy", ""), status_of(t),
                                   r.priority, r.merge or None, iso(r.since)))
    n, unreached = len(taken), []
    for m in board.merge_queue():
        if m.status == "needs-review" and m.task not in taken and m.task not in in_review:
            n += 1
            out.append(msgspec.structs.replace(m, position=n))
            unreached.append(m.task)
    return out, unreached


__all__ = ["Status", "ReviewWait", "RecoveryReport", "Intervention", "LeaseView", "NotStarted", "DeadSession",
           "build", "merge_queue"]
