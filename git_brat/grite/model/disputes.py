"""Disputed actors: an actor made before actors were keys that more than one replica speaks as.

Nothing can tell which of them is its owner (the Lamport clock of a declaration is its writer's
choice), so no log is dropped for it: each claimant's events are shown as that replica's words,
under an id of their own (`attributed`), never as the actor's. A claimant this clone trusts
(its own replica, or a key named as trusted) settles it: that one's events keep the actor.

Pure: the log layer decides which actors are disputed (log/verify.py); replay and readers only
apply and show the result.
"""

from __future__ import annotations

import hashlib
import re

from git_brat.grite.model import events as ev

# The id an attributed event is shown under: 16 digits of the actor, 16 of the replica that
# wrote it, 16 of a digest of both. 48 digits: neither a key-bound actor (32) nor one made
# before keys (16); no writer may speak as an id of this shape (verify rejects it).
_PART = 16
_SHAPE = re.compile(r"[0-9a-f]{48}\Z")


def _part(text: str) -> str:
    return text if len(text) == _PART else hashlib.blake2b(
        text.encode(), digest_size=_PART // 2, person=b"grite-dispute-p").hexdigest()


def _tag(actor: str, replica: str) -> str:
    return hashlib.blake2b(f"{actor} {replica}".encode(), digest_size=_PART // 2,
                           person=b"grite-dispute").hexdigest()


def attributed_id(actor: str, replica: str) -> str:
    """The id the words of `replica` speaking as the disputed `actor` are shown under."""
    a, r = _part(actor), _part(replica)
    return a + r + _tag(a, r)


def is_attributed(actor: str) -> bool:
    """Whether an id has the shape of attributed_id (only replay makes these)."""
    return bool(_SHAPE.match(actor)) and actor[2 * _PART:] == _tag(actor[:_PART],
                                                                    actor[_PART:2 * _PART])


def describe(actor: str) -> str:
    """How an attributed id is shown: which actor it claimed, which replica wrote it."""
    return f"actor {actor[:8]} as replica {actor[_PART:_PART + 8]} wrote it (disputed)"


def attributed(batch: ev.Batch, disputes: dict[str, str]) -> ev.Batch:
    """The batch with every event that speaks as (or about) a disputed actor its writer does not
    hold moved to that writer's attributed id. disputes: actor -> its holder ("" for none)."""
    who = batch.replica
    moved = []
    changed = False
    for e in batch.events:
        actor = attributed_id(e.actor, who) if disputes.get(e.actor, who) != who else e.actor
        entity = attributed_id(e.entity, who) if disputes.get(e.entity, who) != who else e.entity
        if actor is not e.actor or entity is not e.entity:
            e = ev.Event(e.id, entity, actor, e.lamport, e.ts, e.op, e.fence)
            changed = True
        moved.append(e)
    return ev.Batch(batch.v, who, batch.lamport, moved) if changed else batch
