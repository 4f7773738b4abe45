"""Whose word this clone takes as its own: an actor is vouched for when this clone made it, or
a key this clone trusts signs for it (its own key, `git grite trust add`,
grite.allowedSignersFile).

Replay believes every well-formed batch from any replica (a key nobody named still signs its
own records), so what a record says is shown to everyone. A reader that lets a record *act* on
this machine (hold an engine, say) asks here first: anyone who can push writes records."""

from __future__ import annotations

from typing import Callable

from git_brat.git.store import Store
from git_brat.grite.log import identity, sign, verify
from git_brat.grite.log.refs import grite_dir

TRUST_HINT = "`git grite trust add` that replica to believe it"


def judge(store: Store) -> Callable[[str], str]:
    """actor id -> "" when this clone vouches for it, else why not (files read once, and only
    when an actor is asked about)."""
    where = grite_dir(store)
    memo: dict[str, str] = {}
    read: dict[str, object] = {}

    def once(name: str, load):
        if name not in read:
            read[name] = load()
        return read[name]

    def why(actor: str) -> str:
        if actor not in memo:
            memo[actor] = _why(actor)
        return memo[actor]

    def _why(actor: str) -> str:
        if actor in once("own", lambda: {a.id for a in identity.list_actors(where)}):
            return ""
        keys = once("keys", lambda: verify.trusted_keys(store))
        if sign.is_key_bound(actor):
            if any(sign.binds(k, actor) for k in keys):
                return ""
            return f"written by actor {actor[:12]}, whose key this clone does not trust ({TRUST_HINT})"
        replica = once("replicas", lambda: verify.actor_replicas(store)).get(actor, "")
        key = once("pins", lambda: sign.load_trust(where).pinned).get(replica) if replica else None
        if key is not None and key in keys:
            return ""
        who = f"replica {replica}" if replica else "a replica this clone cannot name"
        return f"written by actor {actor[:12]} of {who}, whose key this clone does not trust ({TRUST_HINT})"
    return why


def anyone(_actor: str) -> str:
    """A judge that vouches for every actor (a reader without a store: tests, pure cores)."""
    return ""


__all__ = ["judge", "anyone", "TRUST_HINT"]
