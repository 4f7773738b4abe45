"""The witness's side of budgets: what a session spent, recorded at its end; a session stopped
once its task (or convoy) reached witness.budget_task (budget_convoy) while it runs; a ready
task whose budget is spent blocked for a human instead of started."""

from __future__ import annotations

from typing import Callable, Protocol

from git_brat.brat import board as model
from git_brat.brat import sessions as ss
from git_brat.brat import spend
from git_brat.brat import tasks
from git_brat.brat.config import Config
from git_brat.brat.engines import Preset, usage
from git_brat.brat.witness import session
from git_brat.brat.witness.session import LiveSession, log_line
from git_brat.errors import GriteError
from git_brat.grite.issues import summary
from git_brat.grite.model.state import Entity
from git_brat.grite.repo import Grite


def _prior(board: model.Board, live: LiveSession) -> list[Entity]:
    return [s for s in ss.of_task(board, live.tid) if s.id != live.sid]


class Witness(Protocol):
    """What of the witness these read: its repository, config, engine and voice."""
    g: Grite
    cfg: Config
    preset: Preset
    say: Callable[[str], None]


def _limits(cfg: Config) -> spend.Limits:
    return spend.Limits.of(cfg.witness)


def at_end(w: Witness, board: model.Board, live: LiveSession,
           measured: usage.Usage) -> tuple[dict, str]:
    """(the session's end fields for what it spent, {} when its engine reported nothing; why
    its task may spend no more, "" while it may)."""
    field = spend.record(measured, w.preset, _prior(board, live), live.resume_id,
                         w.cfg.witness.prices)
    mine = usage.from_fields(field) if field is not None else None
    over = spend.over_budget(board, _limits(w.cfg), live.tid, mine, live.sid)
    return ({"usage": field} if field is not None else {}), live.budget_reason or over


def spent_while_running(w: Witness, board: model.Board, live: LiveSession) -> bool:
    """Whether a running session must stop at its budget (the reason kept on it): judged from
    what its engine reported so far (an engine that reports only at its end is judged then)."""
    limits = _limits(w.cfg)
    if not limits:
        return False
    measured = session.spent_so_far(live, w.preset)
    if not measured.reported:
        return False
    mine, _totals = spend.own(measured, w.preset, _prior(board, live), live.resume_id,
                              w.cfg.witness.prices)
    why = spend.over_budget(board, limits, live.tid, mine, live.sid)
    if why:
        live.budget_reason = why
        log_line(live.log, f"stopped: {why}")
    return bool(why)


def block_if_spent(w: Witness, board: model.Board, task: Entity) -> bool:
    """True when task's budget (or its convoy's) is spent: then it is blocked, not started."""
    why = spend.over_budget(board, _limits(w.cfg), task.id)
    if not why:
        return False
    try:
        w.g.append([tasks.move(board, task.id, "blocked", why, needs_human=why)],
                   summary("task.budget", task.id))
        w.say(f"task {task.id[:7]} blocked: {why}")
    except GriteError as exc:
        w.say(f"warning: task {task.id[:7]}: {why}; could not block it: {exc.message}")
    return True


__all__ = ["at_end", "spent_while_running", "block_if_spent"]
