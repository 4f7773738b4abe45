"""What sessions, tasks and convoys spent (tokens and cost, from each session's usage record),
and the budgets that stop them (witness.budget_task, witness.budget_convoy).

A task's spending is the sum of its sessions' own: each session records what it spent itself
(a resumed conversation's earlier runs are taken out when it ends: engines/usage.py), so no
run is counted twice. A cost is unknown, never $0, once any session with tokens has none.
"""

from __future__ import annotations

from typing import Iterable

import msgspec

from git_brat.brat.engines import usage
from git_brat.brat.engines.presets import Preset
from git_brat.brat.engines.usage import (Budget, Usage, from_fields, money, parse_budget, price,
                                         reported_of, to_fields)
from git_brat.grite.model.kinds import SESSION
from git_brat.grite.model.state import Entity


class Spent(msgspec.Struct):
    """Tokens and cost as views, --json and the board show them."""
    tokens: int
    input: int
    output: int
    cache_read: int
    cache_write: int
    cost_usd: float | None     # null: unknown
    cost: str                  # "$0.0032", or "unknown"
    sessions: int              # sessions that reported what they spent
    unpriced: int              # of them, those whose cost is unknown


def of_session(sess: Entity) -> Usage | None:
    """What a session recorded it spent; None when it recorded nothing (yet)."""
    value = sess.get("usage")
    return from_fields(value) if isinstance(value, dict) else None


def total(sessions: Iterable[Entity], extra: Usage | None = None) -> tuple[Usage, int, int]:
    """(sum, sessions counted, of them unpriced) over sessions, plus a running one's extra."""
    out, counted, unpriced = Usage(), 0, 0
    for u in [*(of_session(s) for s in sessions), extra]:
        if u is None:
            continue
        out = out.plus(u) if counted else u
        counted += 1
        unpriced += u.cost_micros is None and u.tokens > 0
    return out, counted, unpriced


def counted(sessions: Iterable[Entity], extra: Usage | None = None) -> Usage:
    """The sum a budget counts: every token, and the costs that are known (a money budget
    cannot wait for a price no one has)."""
    parts = [u for u in [*(of_session(s) for s in sessions), extra] if u is not None]
    out = Usage(**{k: sum(getattr(u, k) for u in parts) for k in usage.COUNTS})
    known = [u.cost_micros for u in parts if u.cost_micros is not None]
    return msgspec.structs.replace(out, cost_micros=sum(known) if known else None)


def view(sessions: Iterable[Entity]) -> Spent:
    u, counted, unpriced = total(sessions)
    return Spent(u.tokens, u.input, u.output, u.cache_read, u.cache_write,
                 None if u.cost_micros is None else u.cost_micros / 1_000_000,
                 money(u.cost_micros) if counted else "unknown", counted, unpriced)


def text(s: Spent, short: bool = False) -> str:
    """One line: "1.2k tokens (1k in, 200 out), $0.0032 over 2 session(s)"; short: "1.2k
    tokens, $0.0032"."""
    from git_brat.brat.engines.usage import tokens_text
    if not s.sessions:
        return "nothing recorded"
    cost = s.cost if s.cost_usd is not None else "cost unknown"
    if s.unpriced and s.cost_usd is None and s.unpriced < s.sessions:
        cost += f" ({s.unpriced} of {s.sessions} sessions unpriced)"
    if short:
        return f"{tokens_text(s.tokens)} tokens, {cost}"
    return (f"{tokens_text(s.tokens)} tokens ({tokens_text(s.input)} in, "
            f"{tokens_text(s.output)} out), {cost} over {s.sessions} session(s)")


def task_sessions(state, tid: str) -> list[Entity]:
    return list(state.of_group(SESSION, tid))


def convoy_sessions(state, tasks: Iterable[Entity]) -> list[Entity]:
    return [s for t in tasks for s in state.of_group(SESSION, t.id)]


def own(measured: Usage, preset: Preset, prior: list[Entity], resumed: str,
        prices: dict[str, list[float]]) -> tuple[Usage, Usage | None]:
    """(what this session itself spent, priced; the engine's running totals when they are
    cumulative). A resumed conversation of a cumulative engine (codex, claude, copilot)
    reports the earlier sessions' spending again: what the session it resumes recorded as
    the totals then is taken out."""
    cumulative = preset.usage is not None and preset.usage.cumulative
    mine = measured
    if cumulative and resumed:
        before = next((r for s in reversed(prior) if s.get("engine_session") == resumed
                       and (r := reported_of(s.get("usage"))) is not None), None)
        if before is not None:
            mine = measured.minus(before)
    return price(mine, prices, preset.model, preset.name), measured if cumulative else None


def record(measured: Usage, preset: Preset, prior: list[Entity], resumed: str,
           prices: dict[str, list[float]]) -> dict | None:
    """The session's usage field, or None when its engine reported nothing."""
    if not measured.reported:
        return None
    mine, totals = own(measured, preset, prior, resumed, prices)
    return to_fields(mine, totals)


class Limits(msgspec.Struct, frozen=True):
    task: Budget | None = None
    convoy: Budget | None = None

    @classmethod
    def of(cls, witness) -> "Limits":
        return cls(parse_budget(witness.budget_task), parse_budget(witness.budget_convoy))

    def __bool__(self) -> bool:
        return self.task is not None or self.convoy is not None


def over_budget(board, limits: Limits, tid: str, running: Usage | None = None,
                running_sid: str = "") -> str:
    """Why task tid may spend no more (its budget or its convoy's reached), or "".

    running: what a live session (running_sid) spent so far, counted instead of its record."""
    if not limits:
        return ""
    task = board.tasks.get(tid)
    if task is None:
        return ""
    state = board.state
    mine = [s for s in task_sessions(state, tid) if s.id != running_sid]
    if limits.task is not None:
        u = counted(mine, running)
        if limits.task.reached(u):
            return _said("task", limits.task, u)
    cid = task.get("convoy", "")
    if limits.convoy is not None and cid:
        sessions = [s for s in convoy_sessions(state, board.convoy_tasks(cid))
                    if s.id != running_sid]
        u = counted(sessions, running)
        if limits.convoy.reached(u):
            return _said("convoy", limits.convoy, u)
    return ""


def _said(what: str, budget: Budget, u: Usage) -> str:
    from git_brat.brat.engines.usage import tokens_text
    spent = f"{tokens_text(u.tokens)} tokens" if budget.unit == "tokens" else money(u.cost_micros)
    key = f"witness.budget_{what}"
    return (f"the {what}'s budget is spent: {spent} of {budget.show()} ({key}); raise it "
            f"(`git brat config set {key} ...`) and queue the task again, or drop it")


__all__ = ["Spent", "Limits", "of_session", "total", "view", "text", "over_budget",
           "task_sessions", "convoy_sessions", "own", "record"]
