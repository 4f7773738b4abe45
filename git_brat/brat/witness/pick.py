"""The witness's pick rule: which ready task it starts next, and why it passes one over."""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterable, Mapping
from typing import NamedTuple

from git_brat import process
from git_brat.brat import engines
from git_brat.brat import holds
from git_brat.brat import sessions as ss
from git_brat.brat.config import Config
from git_brat.brat.witness.verdict import when
from git_brat.errors import GriteError, NotFound
from git_brat.grite import locks
from git_brat.grite.locks import LeaseView
from git_brat.grite.log import vouch
from git_brat.grite.model.state import Entity
from git_brat.grite.repo import Grite


def passed_over(task: Entity, now_ms: int, *, running_here: Iterable[str] = (),
                held_elsewhere: Mapping[str, str] | None = None,
                leases: Iterable[LeaseView] = ()) -> str:
    """Why the witness will not start this ready task now ("" when it will).

    The witness passes what it learnt from its own attempts (`held_elsewhere`: task -> the
    holder that refused it); `status` passes the lease records it has; one rule for both.
    """
    if task.id in running_here:
        return "this witness is starting it"
    res = ss.resource(task.id)
    held = next((lease for lease in leases if lease.resource == res and lease.state == "held"),
                None)
    if held is not None or (held_elsewhere and task.id in held_elsewhere):
        holder = held.holder if held is not None else held_elsewhere[task.id]
        left = f" for {held.remaining:.0f}s more" if held is not None else ""
        return (f"its lease is held by {holder or 'another session'}{left}: another clone runs "
                f"it, or a witness stopped before recording its session (then the task starts "
                f"once the lease runs out)")
    retry = task.get("retry_after", 0)
    if isinstance(retry, (int, float)) and retry > now_ms and task.get("paused_until") == retry:
        return (f"paused until {when(retry, now_ms)} ({task.get('paused_why') or 'usage limit'})"
                f": it resumes then")
    if isinstance(retry, (int, float)) and retry > now_ms:
        return (f"it failed and waits {max(1, round((retry - now_ms) / 1000))}s more before "
                f"the next try (witness.backoff)")
    return ""


def engine_held(g: Grite, board, engine: str, now_ms: int, say, said: set[str]) -> bool:
    """Whether this witness's engine is held on a usage limit now (other engines' witnesses
    keep working). Each hold is said once (`said`: the paused sessions said), and so is each
    pause this clone does not honour (written by a key it does not trust): that one holds
    nothing."""
    found = holds.pauses(board, now_ms, vouch.judge(g.store), engine)
    for _sess, hold, why in found:
        if why and hold.session not in said:
            said.add(hold.session)
            say(f"warning: engine {engine} is said to be paused until {when(hold.until, now_ms)} "
                f"by session {hold.session[:7]}, not honoured: {why}")
    held = holds.latest(found)
    if held is not None and held.session not in said:
        said.add(held.session)
        say(f"engine {engine} paused until {when(held.until, now_ms)} ({held.why}): no "
            f"session starts before then")
    return held is not None


def engine_problem(cfg: Config, engine: str | None = None) -> str:
    """Why the witness could not start any session with this engine ("" when it could)."""
    name = engine or cfg.witness.engine
    try:
        p = engines.resolve(name, cfg.engines)
        if not p.argv:
            engines.invocation(p, "", "", "")   # raises the "set engines.X.command" message
    except GriteError as exc:
        return exc.message
    if p.binary and shutil.which(p.binary) is None:
        how = f" (install it: {p.package})" if p.package else ""
        return f"engine {p.name}: {p.binary!r} is not on PATH{how}"
    return ""


def require_engine(preset, cfg: Config, engine: str | None = None) -> None:
    """Refuse, once at the witness's start, an engine that cannot start (naming the fix):
    started anyway, every ready task would spend its attempts one by one on it."""
    if not preset.argv:
        engines.invocation(preset, "", "", "")   # raises the clear "no command" error
    if problem := engine_problem(cfg, engine):
        raise NotFound(f"{problem}; no session started (or choose --engine, witness.engine)")


class Previous(NamedTuple):
    """The session that worked under a task's lease before this grant, and how it let go."""
    session: str
    released: bool     # it released the lease (its log went out first); else it expired
    ended_ms: int      # when that grant ended, on its holder's clock


def previous_session(g: Grite, res: str) -> Previous | None:
    """The session that worked under `res` before this grant (None when none did).

    One that released cleanly published its log before that release, which says what it did
    to the task. One whose lease expired had its witness die: perhaps before recording
    anything, perhaps after finishing while its clone could not publish yet. Grants given
    back unused (a witness that waited for a log, as this one may) are passed over: taken for
    work, they would send every later witness waiting for a log that never comes."""
    try:
        records = locks.history(g, res, limit=64)
    except GriteError:
        return None
    withdrawn = {r.token for r in records if r.action == "withdraw"}
    token = records[0].token if records else 0
    # newest first: the first record of an earlier token is how that grant ended
    last = next((r for r in records if r.token < token and r.token not in withdrawn), None)
    if last is None or not last.holder.id.startswith("session:"):
        return None
    sid = last.holder.session or last.holder.id[len("session:"):]
    released = last.action == "release"
    return Previous(sid, released, last.released_at or last.expires_at)


def log_wait(before: Previous, grace: float, answering_since: float) -> float | None:
    """How long to wait for the log of `before`, a session this clone has no record of: for as
    long as it takes (None) when it released its lease, as its log went out first; else what is
    left of `grace` (witness.expired_wait), counted from its lease's expiry and from the lock
    remote answering again (`answering_since`, monotonic), since its clone may have finished
    the task and been cut off or killed before it could publish. 0: run the task."""
    if before.released:
        return None
    # The record's time is its writer's word (a fetched ref): one dated ahead waits no longer
    # than one that ended now.
    since_end = max(0.0, (process.now_ms() - before.ended_ms) / 1000)
    return max(0.0, grace - min(since_end, time.monotonic() - answering_since))


__all__ = ["passed_over", "engine_held", "engine_problem", "require_engine", "previous_session", "Previous", "log_wait"]
