"""Crash recovery: sessions whose witness is gone are marked crashed, their orphaned agents stopped,
what they left committed, and their tasks re-queued to resume on the same branch."""

from __future__ import annotations

import os
from typing import Callable

import msgspec

from git_brat import process, redact
from git_brat.brat import board as model
from git_brat.brat import engines
from git_brat.brat import layout
from git_brat.brat import sessions as ss
from git_brat.brat import spend
from git_brat.brat import tasks
from git_brat.brat.board import Board, status_of
from git_brat.brat.config import Config
from git_brat.brat.engines import Preset, runner, usage
from git_brat.brat.witness import confine
from git_brat.brat.witness.session import TAIL_LINES, agent_env, salvage, stop_strays
from git_brat.errors import GriteError, NotFound
from git_brat.git import worktree as git_worktree
from git_brat.grite import locks
from git_brat.grite.issues import summary
from git_brat.grite.log.wal import Draft
from git_brat.grite.model import events as ev
from git_brat.grite.model.state import Entity
from git_brat.grite.repo import Grite


class Recovered(msgspec.Struct):
    session: str
    task: str
    status: str                # crashed (or stopped)
    reason: str
    killed: bool               # an orphaned agent was still running here and was stopped
    salvaged: str              # commit of work it had left uncommitted
    branch: str
    engine_session: str        # its conversation, for the next session to resume
    spent: str = ""            # what it had spent, as its engine reported it ("": nothing known)


def recover(g: Grite, cfg: Config, st: locks.Settings | None = None, exclude: set[str] = frozenset(),
            say: Callable[[str], None] = lambda _l: None) -> list[Recovered]:
    """Sessions whose witness is gone: mark them crashed, stop their orphaned agents on this
    host, commit what they left, and re-queue their tasks to resume on the same branch.

    What is done on this machine (a signal, a commit, a log read) is decided by this clone's
    own record of a session it started (sessions.read_local), never by the session's record in
    the log, which anyone who can push may have written. A session this clone did not start is
    only ever judged by its lease: one released cleanly ended on its clone (its log is fetched,
    it is never called crashed); one that ran out crashed."""
    board = model.board(g, refresh=True)
    running = [s for s in ss.all_sessions(board, ss.LIVE) if s.id not in exclude]
    stranded = [t for t in board.tasks.values() if status_of(t) == "running"
                and not tasks.by_hand(t)   # a human's: left alone
                and not any(s.get("status") in ss.LIVE for s in ss.of_task(board, t.id))]
    if not running and not stranded:
        return []
    st = st or locks.settings(g.store)
    try:
        held = {l.resource: l for l in locks.status(g, st, refresh=True).leases}
    except GriteError:
        held = {l.resource: l for l in locks.status(g, st, refresh=False).leases}
    for t in stranded:
        lease = held.get(ss.resource(t.id))
        if lease is None or lease.state != "held":
            _requeue_stranded(g, t.id, say)
    host = process.hostname()
    fetched = False
    out = []
    for s in running:
        tid = s.get("task", "")
        local = ss.read_local(g.store, s.id, tid)
        lease = held.get(ss.resource(tid))
        mine = lease is not None and lease.holder == ss.holder_id(s.id)
        dead_here = ss.witness_gone(g.store, s, host)
        if mine and lease.state == "held" and not dead_here:
            continue   # its witness is alive (or may be: its lease has not run out)
        if local is None:
            let_go = _let_go(g, tid, s.id)
            if let_go == "released":
                # Ended cleanly on the clone that ran it: its end is in that clone's log.
                if not fetched:
                    fetched = True
                    _fetch(g, st, say)
                cur = g.state(refresh=True).entities.get(s.id)
                if cur is not None and cur.get("status") in ss.LIVE:
                    say(f"session {s.id[:7]} of task {tid[:7]} ended on another clone (its "
                        f"lease was released); waiting for its log")
                continue
            if let_go != "lapsed":
                continue   # no lease of it is known here: nothing says it crashed
        elif mine and lease.state == "held":
            try:   # its witness died on this very host: no need to wait for the lease to run out
                locks.release(g, ss.resource(tid), st, locks.holder_for(g), force=True)
            except GriteError:
                continue
        why = ("its witness (pid %d) is gone" % dead_here if dead_here else
               "its lease expired: the witness stopped renewing it (crashed, killed, or cut off)")
        out.append(_recover_one(g, board, s, why, local, cfg.witness.prices))
        spent = out[-1].spent if out[-1] is not None else ""
        say(f"recovered session {s.id[:7]} of task {tid[:7]}: crashed ({why})"
            + (f"; it had spent {spent}" if spent else ""))
    return [r for r in out if r is not None]


def _requeue_stranded(g: Grite, tid: str, say: Callable[[str], None]) -> None:
    """A task left running by sessions that all ended without moving it (one lost its lease
    to another clone's, whose own moves replay then refused): no witness will ever end it, so
    it goes back to the queue, its branch kept for the next session."""
    def build() -> list[Draft]:
        b = model.board(g)
        t = b.tasks.get(tid)
        sessions = ss.of_task(b, tid)
        if t is None or status_of(t) != "running" or tasks.by_hand(t) or any(
                s.get("status") in ss.LIVE for s in sessions):
            return []
        last = sessions[-1] if sessions else None
        why = ("no session runs it: " + (f"its last session {last.id[:7]} ended "
                                          f"{last.get('status', '?')} without moving it"
                                          if last else "it has no session")
               + f"; re-queued to resume on {ss.branch_for(tid)}")
        return [tasks.move(b, tid, "queued", why)]
    try:
        g.append(lambda: build() or _nothing(), summary("task.requeue", tid))
        say(f"task {tid[:7]} was left running by sessions that all ended: re-queued")
    except (_Nothing, GriteError):
        pass


def _let_go(g: Grite, tid: str, sid: str) -> str:
    """How session sid's lease on task tid ended, by the lease's own history: "released" (by
    its holder: the session ended), "lapsed" (it ran out, or was taken over or expired by
    someone else), "held", or "unknown" (no record of it here)."""
    try:
        records = locks.history(g, ss.resource(tid), limit=64)
    except GriteError:
        return "unknown"
    hid = ss.holder_id(sid)
    newest = next((r for r in records if r.holder.id == hid), None)
    if newest is None:
        return "unknown"
    if newest.state == "released":
        return "released" if newest.action in ("release", "withdraw") else "lapsed"
    later = records.index(newest) > 0   # another record after it: the lease moved on
    return "lapsed" if later or locks.judge(newest, process.now_ms(), 0) == "expired" \
        else "held"


def _fetch(g: Grite, st: locks.Settings, say: Callable[[str], None]) -> None:
    from git_brat.grite.sync import exchange as sync
    remotes = sync.synced_remotes(g.store)
    for remote in ([st.remote] if st.remote in remotes else remotes):
        try:
            sync.sync(g, remote, push=False)
        except GriteError as exc:
            say(f"warning: could not fetch from {remote}: {exc.message}")


def _spent(g: Grite, board: Board, s: Entity, engine_session: str,
           prices: dict) -> dict | None:
    """What a crashed session had spent, from its log (or its engine's side file): its usage
    field, or None when its engine reported nothing."""
    try:
        preset = engines.resolve(s.get("engine", ""), None)
    except NotFound:
        return None
    tid = s.get("task", "")
    output = runner.read_from(layout.session_log(g.store, s.id), 0)
    measured = usage.measure(preset, output, workdir=layout.worktree(g.store, tid),
                             engine_session=engine_session,
                             since=s.created_at / 1000 if s.created_at else 0.0)
    prior = [x for x in ss.of_task(board, tid) if x.id != s.id]
    return spend.record(measured, preset, prior, str(s.get("resumed", "")), prices)


def _recover_one(g: Grite, board: Board, s: Entity, why: str,
                 local: ss.LocalRecord | None, prices: dict | None = None) -> Recovered | None:
    tid, branch = s.get("task", ""), ss.branch_for(s.get("task", ""))
    killed = False
    spent = None
    prices = prices or {}
    salvaged = ""
    engine_session = s.get("engine_session", "")
    if local is not None:   # this clone started it: its agent, work tree and log are here
        agent = ss.process_of(local, "agent")
        if agent is not None:
            killed = process.stop_recorded_group(agent)
        killed = bool(stop_strays(s.id)) or killed
        # A sandboxed agent committed to its branch's shadow: bring that back first.
        if os.path.isdir(confine.shadow_dir(g.store, s.id)) and \
                os.path.isdir(layout.worktree(g.store, tid)):
            git_worktree.point_head(layout.worktree(g.store, tid), branch)
        try:
            confine.restore_branch(g.store, s.id, tid, branch, str(s.get("start_head", "")))
        except (GriteError, OSError):
            pass   # its shadow is kept: the next recovery tries again
        if os.path.isdir(layout.worktree(g.store, tid)):
            preset_name = s.get("engine", "agent")
            try:
                preset = engines.resolve(preset_name, None)
            except NotFound:
                preset = Preset(name=preset_name, argv=[])
            env = agent_env(g, preset, s.id, tid, layout.worktree(g.store, tid))
            try:   # the session ends here: what its tree holds beyond its branch is its own
                salvaged = salvage(g.store, tid, f"work left by crashed session {s.id[:7]}",
                                   env, preset.scratch) or ""
            except GriteError:
                salvaged = ""
        if not engine_session:
            try:
                preset = engines.resolve(s.get("engine", ""), None)
                engine_session = engines.read_result(
                    preset, runner.read_from(layout.session_log(g.store, s.id), 0)).session_id
            except NotFound:
                pass
        spent = _spent(g, board, s, engine_session, prices)

    def build() -> list[Draft]:
        b = model.board(g)
        cur = b.state.entities.get(s.id)
        if cur is None or cur.get("status") not in ss.LIVE:
            return []
        head = g.store.refs.branch_tip(branch)
        out = [Draft(s.id, ev.SetFields({
            "status": "crashed", "reason": why, "ended_at": process.now_ms(), "salvaged": salvaged,
            "engine_session": engine_session, "head": head or "", "orphan_stopped": killed,
            "output_tail": redact.tail(runner.tail(layout.session_log(g.store, s.id), TAIL_LINES),
                                       4000)
            if local is not None else "", **({"usage": spent} if spent else {})}))]
        task = b.tasks.get(tid)
        if task is not None and status_of(task) == "running" and task.get("session") == s.id:
            out.append(tasks.move(b, tid, "queued",
                                  f"session {s.id[:7]} crashed; the task resumes on {branch}"))
        return out

    try:
        g.append(lambda: build() or _nothing(), summary("session.crashed", s.id))
    except _Nothing:
        return None
    return Recovered(s.id, tid, "crashed", why, killed, salvaged, branch, engine_session,
                     usage.summary(usage.from_fields(spent)) if spent else "")


class _Nothing(GriteError):
    pass


def _nothing():
    raise _Nothing("already recovered")


def stop_session(g: Grite, e: Entity, by: str, config: Callable[[], Config]) -> None:
    """Ask a live session to stop (its witness stops the agent, commits its work, blocks the
    task); when its witness is gone from this host, nobody would: stop the orphan now.
    `git brat session stop` and the board both stop a session through here."""
    ss.request_stop(g, e, by)
    witness = process.Proc(e.get("witness_pid", 0), e.get("witness_start", 0), e.get("host", ""))
    if e.get("host") == process.hostname() and not process.same_process(witness):
        recover(g, config())


__all__ = ["Recovered", "recover", "stop_session"]
