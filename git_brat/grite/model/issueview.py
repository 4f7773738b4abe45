"""An issue as `issue list` shows it, and the pre-encoded form the cache keeps beside its row."""

from __future__ import annotations

import re
from datetime import datetime

import msgspec

from git_brat.grite.model.state import Entity, iso


class IssueView(msgspec.Struct):
    id: str
    title: str
    state: str
    labels: list[str]
    assignees: list[str]
    created_at: datetime
    updated_at: datetime
    author: str
    comments: int


def issue_view(ent: Entity, actor_names: dict[str, str] | None = None) -> IssueView:
    # (Fields read directly: a snapshot's check builds one per issue, a million events' worth.)
    fields = ent.fields
    title, state = fields.get("title"), fields.get("state")
    return IssueView(ent.id, "" if title is None else title[0],
                     "open" if state is None else state[0],
                     ent.members("labels"), ent.members("assignees"),
                     iso(ent.created_at), iso(ent.updated_at),
                     (actor_names or {}).get(ent.created_by, ent.created_by), len(ent.comments))


def stored(ent: Entity) -> bytes:
    """The view kept in the cache: its author is the actor's id, named when read, so that an
    actor's record arriving or changing rewrites no issue's view."""
    return msgspec.json.encode(issue_view(ent))


def decode_stored(views: list[bytes], actor_names: dict[str, str]) -> list[IssueView]:
    """Stored views, their authors named. (A cache written before views held ids holds names:
    a name is no actor's id, so it stays.)"""
    out = msgspec.json.decode(b"[" + b",".join(views) + b"]", type=list[IssueView])
    for v in out:
        v.author = actor_names.get(v.author, v.author)
    return out


# In a stored view (msgspec's encoding of IssueView) these keys occur once, unescaped; inside a
# string value every quote is escaped, so a title can never match them.
_AUTHOR = re.compile(rb'"author":"([0-9a-f]+)"')
_ACTOR_ID = re.compile(r"[0-9a-f]+")


def join_stored(views: list[bytes], actor_names: dict[str, str], state_filter: str = "all") -> bytes:
    """What msgspec.json.encode of decode_stored(views), less the issues not in state_filter,
    would give, byte for byte, without decoding them: the views joined, their authors named."""
    if state_filter != "all":
        want = b'"state":' + msgspec.json.encode(state_filter)
        views = [v for v in views if want in v]
    out = b"[" + b",".join(views) + b"]"
    named = {k.encode(): b'"author":' + msgspec.json.encode(v) for k, v in actor_names.items()
             if _ACTOR_ID.fullmatch(k)}
    if any(_AUTHOR.fullmatch(v) for v in named.values()):   # a name that is someone's id
        return _AUTHOR.sub(lambda m: named.get(m.group(1), m.group(0)), out)
    # One replace per actor (a few) over the whole list: a callback per issue took 0.1 s at 29k.
    for actor, text in named.items():
        out = out.replace(b'"author":"' + actor + b'"', text)
    return out
