"""Engine holds: an engine (the account behind it) is held while a session of it is paused on a
usage limit, on every clone whose trust the pause has; and lifting a hold early.

A hold stops every witness of its engine, so it is believed only on this clone's own word or a
key it trusts (grite.log.vouch): anyone who can push writes session records, and a pusher's
"paused for a week" would otherwise stop a whole team's claude. An untrusted one is shown, with
why it is ignored, and acts on nothing."""

from __future__ import annotations

from datetime import datetime
from typing import Callable, NamedTuple

import msgspec

from git_brat import process
from git_brat.brat.board import SESSION, SESSION_ENDED, Board, status_of
from git_brat.brat.config import check_engine_name
from git_brat.errors import NotFound
from git_brat.grite.issues import summary
from git_brat.grite.log import vouch
from git_brat.grite.log.wal import Draft
from git_brat.grite.model import events as ev
from git_brat.grite.model.state import Entity, iso
from git_brat.grite.repo import Grite

LONGEST_MS = 8 * 86_400_000   # no engine's limit lasts longer: a hold past it is misread or forged
# The fields a hold is read from: each must be written by someone this clone vouches for (a
# pusher's SetFields moving a trusted pause to another engine, or a year on, is theirs).
READ_FROM = ("status", "engine", "paused_until", "ended_at")
LIFTED = "hold_lifted_at"     # a session field: when a human lifted its hold (`engine release`)


class Hold(NamedTuple):
    """An engine held on a usage limit: until when (epoch ms), why, and the session that met it."""
    until: int
    why: str
    session: str


class HoldView(msgspec.Struct):
    """A pause that holds (or claims to hold) an engine, as status and the board show it."""
    engine: str
    session: str
    task: str
    until: datetime
    why: str
    paused: str                # "paused until 21:00 (claude usage limit)", as people read it
    believed: bool
    ignored: str = ""          # why this clone does not honour it ("" when it does)


def _writer_problem(sess: Entity, vouched: Callable[[str], str]) -> str:
    for name in READ_FROM:
        cell = sess.fields.get(name)
        if cell is not None and (why := vouched(cell[2])):
            return f"its {name} was {why}"
    return ""


def _lifted(sess: Entity, vouched: Callable[[str], str]) -> bool:
    cell = sess.fields.get(LIFTED)
    return cell is not None and not vouched(cell[2])


def pauses(board: Board, now_ms: int, vouched: Callable[[str], str] = vouch.anyone,
           engine: str | None = None) -> list[tuple[Entity, Hold, str]]:
    """Sessions paused on a limit that has not reset and no trusted hand lifted: (session, its
    hold capped at LONGEST_MS, why it is not believed or "")."""
    out = []
    for sess in board.hot(SESSION, SESSION_ENDED):
        if sess.get("status") != "paused" or (engine is not None and sess.get("engine") != engine):
            continue
        until, ended = sess.get("paused_until", 0), sess.get("ended_at", 0)
        if type(until) is not int or type(ended) is not int or until <= now_ms:
            continue
        until = min(until, ended + LONGEST_MS, now_ms + LONGEST_MS)
        if until <= now_ms or _lifted(sess, vouched):
            continue
        why = str(sess.get("paused_why", "") or "usage limit")
        out.append((sess, Hold(until, why, sess.id), _writer_problem(sess, vouched)))
    return out


def engine_hold(board: Board, engine: str, now_ms: int,
                vouched: Callable[[str], str] = vouch.anyone) -> Hold | None:
    """Whether `engine` is held now: the latest believed pause of a session of it (on any clone
    this one trusts: the pause is in the log)."""
    return latest(pauses(board, now_ms, vouched, engine))


def latest(found: list[tuple[Entity, Hold, str]]) -> Hold | None:
    """The believed hold of these pauses that lasts longest (None: none is believed)."""
    return max((h for _s, h, why in found if not why), default=None, key=lambda h: h.until)


def ignored(board: Board, engine: str, now_ms: int,
            vouched: Callable[[str], str]) -> list[tuple[Hold, str]]:
    """The pauses of `engine` this clone does not honour, and why."""
    return [(h, why) for _s, h, why in pauses(board, now_ms, vouched, engine) if why]


def views(g: Grite, board: Board, now_ms: int) -> list[HoldView]:
    """Every pause holding an engine now, believed or not (status, --json, the board)."""
    from git_brat.brat.engines.resets import clock   # (zoneinfo: only while a hold lasts)
    vouched = vouch.judge(g.store)
    return [HoldView(str(s.get("engine", "")), s.id, str(s.get("task", "")), iso(h.until), h.why,
                     f"paused until {clock(h.until, now_ms)} ({h.why})", not why,
                     f"not honoured here: {why}" if why else "")
            for s, h, why in sorted(pauses(board, now_ms, vouched), key=lambda p: p[1].until)]


class Released(msgspec.Struct):
    engine: str
    sessions: list[str]        # the paused sessions whose hold was lifted
    tasks: list[str]           # their tasks, queued again to run now (no longer paused)
    event: str


def _resumable(board: Board, sess: Entity, now_ms: int) -> str:
    """The task a lifted pause lets run now ("": none: it moved on, or waits for a human)."""
    task = board.tasks.get(str(sess.get("task", "")))
    if task is None or status_of(task) != "queued" or task.get("session") != sess.id:
        return ""
    until = task.get("paused_until", 0)
    return task.id if type(until) is int and until > now_ms else ""


def release(g: Grite, engine: str) -> Released:
    """Lift `engine`'s hold now (a human knows the limit is over: a new plan, a misread reset):
    each believed pause of it is marked lifted, and the tasks they paused run on the witness's
    next pass. Nothing is written when the engine is not held."""
    check_engine_name(engine, "engine release")
    vouched = vouch.judge(g.store)
    done: dict[str, list[str]] = {}

    def build() -> list[Draft]:
        board = Board(g.state(), g.cold_before)
        now = process.now_ms()
        found = pauses(board, now, vouched, engine)
        held = [s for s, _h, why in found if not why]
        if not held:
            note = f" ({len(found)} pause(s) of it are not honoured here: see `git brat status`)" \
                if found else ""
            raise NotFound(f"engine {engine} is not held: nothing to release{note}")
        tasks = sorted({t for s in held if (t := _resumable(board, s, now))})
        done.update(sessions=[s.id for s in held], tasks=tasks)
        return [Draft(s.id, ev.SetFields({LIFTED: now})) for s in held] + \
            [Draft(t, ev.SetFields({"paused_until": 0, "retry_after": 0})) for t in tasks]

    res = g.append(build, lambda _events: summary("engine.release", done["sessions"][0], engine))
    return Released(engine, done["sessions"], done["tasks"], res.events[0].id)


__all__ = ["Hold", "HoldView", "Released", "LONGEST_MS", "LIFTED", "pauses", "engine_hold", "latest",
           "ignored", "views", "release"]
