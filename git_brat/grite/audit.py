"""The audit trail: every event in every log, with who wrote it, when and from which replica."""

from __future__ import annotations

from datetime import datetime

import msgspec

from git_brat.grite.model import events as ev
from git_brat.grite.cache.projection import actor_names
from git_brat.grite.log.wal import LogReader
from git_brat.grite.repo import Grite
from git_brat.grite.model.state import iso
from git_brat.grite.log.refs import log_tips


class AuditEntry(msgspec.Struct):
    event: str
    entity: str
    kind: str
    op: str
    summary: str
    detail: dict
    actor: str
    actor_name: str
    replica: str
    lamport: int
    at: datetime
    commit: str
    rejected: str | None = None
    # The entity the event says it was caused through (a comment's or a move's `via`: brat's
    # sessions). A claim of the writer's, shown as written: `git brat task show` says whose.
    via: str = ""


def _via(op) -> str:
    via = op.via if isinstance(op, ev.Comment) else \
        op.fields.get("via", "") if isinstance(op, (ev.Create, ev.SetFields)) else ""
    return via if isinstance(via, str) else ""


def _detail(op) -> dict:
    if isinstance(op, ev.UnknownOp):
        return {}
    if isinstance(op, ev.BadOp):
        return {"malformed": op.why}
    return msgspec.structs.asdict(op)


def describe(op) -> str:
    """What an operation did, in a few words, for `git grite log`."""
    def short(v) -> str:
        v = str(v).replace("\n", " ")
        return v if len(v) <= 48 else v[:45] + "..."
    if isinstance(op, ev.Create):
        title = op.fields.get("title") or op.fields.get("name")
        return f'"{short(title)}"' if title else ""
    if isinstance(op, ev.SetFields):
        return " ".join(f"{k}={short(v)!r}" if k != "body" else "body" for k, v in op.fields.items())
    if isinstance(op, ev.AddTo):
        return f"{op.name} +{op.value[:12] if op.name.startswith('dep:') else op.value}"
    if isinstance(op, ev.RemoveFrom):
        return f"{op.name} -{op.value[:12] if op.name.startswith('dep:') else op.value}"
    if isinstance(op, ev.Comment):
        return short(op.body)
    if isinstance(op, ev.LeaseToken):
        return f"{op.resource} token {op.token}"
    if isinstance(op, ev.BadOp):
        return "(an operation whose parts are not of its types; not replayed)"
    return "(operation from a newer grite; not replayed)"


def entries(g: Grite, entity: str | None = None) -> list[AuditEntry]:
    """All events (deduplicated across logs) in replay order, optionally for one entity."""
    state = g.state()
    names = actor_names(state)
    reader = LogReader(g.store)
    commits = reader.new_commits(log_tips(g.store).values(), ())
    seen: set[str] = set()
    out = []
    for sha, batch in reader.batches(commits):
        for e in batch.events:
            if e.id in seen or (entity is not None and e.entity != entity):
                continue
            seen.add(e.id)
            ent = state.entities.get(e.entity)
            rej = state.rejected.get(e.id)
            out.append(AuditEntry(e.id, e.entity, ent.kind if ent else "", ev.op_name(e.op),
                                  describe(e.op), _detail(e.op), e.actor, names.get(e.actor, e.actor),
                                  batch.replica, e.lamport, iso(e.ts), sha,
                                  rej.reason if rej else None, _via(e.op)))
    out.sort(key=lambda a: (a.lamport, a.actor, a.event))
    return out
