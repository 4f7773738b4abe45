"""`git grite init`: identities, the actor's record in the log, and (via sync) hooks and refspecs."""

from __future__ import annotations

import msgspec

from git_brat.grite.model import events as ev
from git_brat.grite.model import kinds
from git_brat.grite.log import identity
from git_brat.grite.sync import exchange as sync
from git_brat.grite.sync.shims import HookChange
from git_brat.grite.log.wal import Draft
from git_brat.grite.repo import Grite
from git_brat.grite.log.refs import grite_dir


class InitResult(msgspec.Struct):
    replica: str
    actor: str
    actor_name: str
    created: bool
    hooks_dir: str = ""
    hooks: list[HookChange] = []
    remotes: list[str] = []          # remotes whose grite refs sync with plain fetch / push
    warnings: list[str] = []


def record_actor(g: Grite, actor: identity.Actor) -> None:
    """Declare an actor in the log so every replica can show its name."""
    g.append([Draft(actor.id, ev.Create(kinds.ACTOR, {"name": actor.name, "email": actor.email,
                                                         "replica": actor.replica}))],
             f"grite: actor.create {actor.id[:7]} \"{actor.name}\"")


def init(g: Grite) -> InitResult:
    from git_brat.grite.cache import cold
    from git_brat.grite.log import cut
    cut.enabled(g.store)   # bad settings stop here, before anything is written
    cold.when(g.store)
    name, email = g.store.user_identity()
    ident, created = identity.init(grite_dir(g.store), name, email)
    from git_brat.grite.log import sign
    sign.ensure_key(grite_dir(g.store))   # (private, 0600, never synced; its batches carry the public part)
    if created:
        record_actor(g, ident.actor)
    inst = sync.install(g.store)
    warnings = [f"hook {c.hook} {c.action}: {c.detail}" for c in inst.hooks if c.action == "skipped"]
    for remote, error in sync.fetch_new(g, inst.added):
        if error:
            warnings.append(f"could not fetch grite state from {remote}: {error} "
                            f"(working offline; `git grite sync` catches up later)")
    return InitResult(ident.replica.id, ident.actor.id, ident.actor.name, created,
                      inst.hooks_dir, inst.hooks, inst.remotes, warnings)
