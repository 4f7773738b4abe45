"""The project's context: key/values anyone may set (`git grite context set`), kept as events on
one entity of kind `project`, so they sync, merge (the last set of a key wins) and are audited.

The entity's id is the same in every clone, so two clones that set keys before they ever synced
write to one entity (replay keeps the earliest create, and every set).
"""

from __future__ import annotations

import hashlib

from git_brat.errors import UsageError
from git_brat.grite.log.wal import Draft
from git_brat.grite.model import events as ev
from git_brat.grite.model.kinds import PROJECT
from git_brat.grite.model.schema import PROJECT_KEY, PROJECT_PREFIX, PROJECT_VALUE_MAX
from git_brat.grite.repo import Grite
from git_brat.grite.model.state import State

ENTITY = hashlib.sha256(b"grite project context").hexdigest()[:32]


def check_key(key: str) -> str:
    if PROJECT_KEY.match(key) is None:
        raise UsageError(f"invalid key {key!r}: use 1 to 64 lowercase letters, digits and _")
    return key


def values(state: State) -> dict[str, str]:
    """Every key set (and not unset), sorted by key."""
    ent = state.entities.get(ENTITY)
    if ent is None or not ent.created or ent.kind != PROJECT:
        return {}
    return {name[len(PROJECT_PREFIX):]: ent.get(name) for name in sorted(ent.fields)
            if name.startswith(PROJECT_PREFIX) and ent.get(name)}


def set_value(g: Grite, key: str, value: str) -> bool:
    """Set a key ("" unsets it). False when it already had that value (nothing written)."""
    check_key(key)
    if len(value) > PROJECT_VALUE_MAX:
        raise UsageError(f"the value of {key} is {len(value)} characters: at most "
                         f"{PROJECT_VALUE_MAX}")
    if "\0" in value:
        raise UsageError(f"the value of {key} holds a NUL character")
    field = PROJECT_PREFIX + key

    def build() -> list[Draft]:   # decided at the tip appended to: a no-op writes nothing
        ent = g.state().entities.get(ENTITY)
        created = ent is not None and ent.created
        if (ent.get(field) or "" if created else "") == value:
            return []
        drafts = [] if created else [Draft(ENTITY, ev.Create(PROJECT, {}))]
        return drafts + [Draft(ENTITY, ev.SetFields({field: value}))]
    res = g.append(build, f"grite: context.{'set' if value else 'unset'} {key}")
    return bool(res.commit)
