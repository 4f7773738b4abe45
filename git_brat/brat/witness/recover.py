"""Crash recovery: sessions whose witness is gone are marked crashed, their orphaned agents stopped,
what they left committed, and their tasks re-queued to resume on the same branch."""

from __future__ import annotations

import os
from typing import Callable

import msgspec

from git_brat import process
from git_brat.brat import board as model
from git_brat.brat import engines
from git_brat.brat import layout
from git_brat.brat import sessions as ss
from git_brat.brat import tasks
from git_brat.brat.board import Board, status_of
from git_brat.brat.config import Config
from git_brat.brat.engines import Preset, runner
from git_brat.brat.witness.session import TAIL_LINES, agent_env, salvage
from git_brat.errors import GriteError, NotFound
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


def recover(g: Grite, cfg: Config, st: locks.Settings | None = None, exclude: set[str] = frozenset(),
            say: Callable[[str], None] = lambda _l: None) -> list[Recovered]:
    """Sessions whose witness is gone: mark them crashed, stop their orphaned agents on this
    host, commit what they left, and re-queue their tasks to resume on the same branch."""
    board = model.board(g, refresh=True)
    running = [s for s in ss.all_sessions(board, ss.LIVE) if s.id not in exclude]
    if not running:
        return []
    st = st or locks.settings(g.store)
    try:
        held = {l.resource: l for l in locks.status(g, st, refresh=True).leases}
    except GriteError:
        held = {l.resource: l for l in locks.status(g, st, refresh=False).leases}
    host = process.hostname()
    out = []
    for s in running:
        tid = s.get("task", "")
        lease = held.get(ss.resource(tid))
        mine = lease is not None and lease.holder == ss.holder_id(s.id)
        dead_here = ss.witness_gone(s, host)
        if mine and lease.state == "held" and not dead_here:
            continue   # its witness is alive (or may be: its lease has not run out)
        if mine and lease.state == "held":
            try:   # its witness died on this very host: no need to wait for the lease to run out
                locks.release(g, ss.resource(tid), st, locks.holder_for(g), force=True)
            except GriteError:
                continue
        why = ("its witness (pid %d) is gone" % dead_here if dead_here else
               "its lease expired: the witness stopped renewing it (crashed, killed, or cut off)")
        out.append(_recover_one(g, board, s, why, host))
        say(f"recovered session {s.id[:7]} of task {tid[:7]}: crashed ({why})")
    return [r for r in out if r is not None]


def _recover_one(g: Grite, board: Board, s: Entity, why: str, host: str) -> Recovered | None:
    tid, branch, worktree = s.get("task", ""), s.get("branch", ""), s.get("worktree", "")
    killed = False
    salvaged = ""
    engine_session = s.get("engine_session", "")
    if s.get("host") == host:
        pid, start = s.get("pid", 0), s.get("pid_start", 0)
        if not pid:   # it died between starting the engine and recording it
            try:
                with open(layout.session_pid(g.store, s.id)) as f:
                    pid, start = (int(x) for x in f.read().split())
            except (OSError, ValueError):
                pass
        if pid:
            killed = process.stop_recorded_group(process.Proc(pid, start, host))
        if worktree and os.path.isdir(worktree):
            preset_name = s.get("engine", "agent")
            try:
                preset = engines.resolve(preset_name, None)
            except NotFound:
                preset = Preset(name=preset_name, argv=[])
            env = agent_env(g, preset, s.id, tid, worktree)
            try:
                salvaged = salvage(g.store, worktree, f"work left by crashed session {s.id[:7]}",
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

    def build() -> list[Draft]:
        b = model.board(g)
        cur = b.state.entities.get(s.id)
        if cur is None or cur.get("status") not in ss.LIVE:
            return []
        head = g.store.refs.branch_tip(branch) if branch else None
        out = [Draft(s.id, ev.SetFields({
            "status": "crashed", "reason": why, "ended_at": process.now_ms(), "salvaged": salvaged,
            "engine_session": engine_session, "head": head or "", "orphan_stopped": killed,
            "output_tail": runner.tail(layout.session_log(g.store, s.id), TAIL_LINES)[-4000:]
            if s.get("host") == host else ""}))]
        task = b.tasks.get(tid)
        if task is not None and status_of(task) == "running" and task.get("session") == s.id:
            out.append(tasks.move(b, tid, "queued",
                                  f"session {s.id[:7]} crashed; the task resumes on {branch}"))
        return out

    try:
        g.append(lambda: build() or _nothing(), summary("session.crashed", s.id))
    except _Nothing:
        return None
    return Recovered(s.id, tid, "crashed", why, killed, salvaged, branch, engine_session)


class _Nothing(GriteError):
    pass


def _nothing():
    raise _Nothing("already recovered")


__all__ = ["Recovered", "recover"]
