"""One schema per event kind: the type and bounds of every part of an event, checked by replay.

Anyone who can push writes events, and every reader (status, the witness, the board) takes
their values as the types its own writers gave them. An event that does not fit is rejected
at replay with why, like a bad transition (never applied, listed by `git grite doctor` and
`git grite log`), so no value a log brings reaches a reader in a shape it cannot use.

A field's schema is the same whatever its entity's kind: replay must judge an event alone,
not by a create that may arrive later (the same events in any order give the same state).
Fields this table does not name (a newer writer's) are kept within the generic bounds of
events.event_problem; readers that use one must name it here first.
"""

from __future__ import annotations

from typing import Any, Callable

Check = Callable[[Any], "str | None"]   # why a value does not fit, or None

_HEX = "0123456789abcdef"
_LOWER = "abcdefghijklmnopqrstuvwxyz"
_WORD = _LOWER + "0123456789_"


class Form:
    """Strings of some characters and lengths (first of `first`), matched with string methods:
    every process checks events, and compiling regular expressions in each costs more."""

    def __init__(self, chars: str, lengths, first: str = ""):
        self.chars, self.lengths, self.first = chars, frozenset(lengths), first

    def match(self, s: Any) -> bool | None:
        if type(s) is not str or len(s) not in self.lengths:
            return None
        if s and self.first and s[0] not in self.first:
            return None
        return True if not s.strip(self.chars) else None


class _Pair:
    """`name` or `name:suffix` (a set: labels, dep:depends_on; a field: x:<exchange id>)."""

    def __init__(self, head: Form, tail: Form):
        self.head, self.tail = head, tail

    def match(self, s: Any) -> bool | None:
        if type(s) is not str:
            return None
        head, colon, tail = s.partition(":")
        return True if self.head.match(head) and (not colon or self.tail.match(tail)) else None


# Ids are lowercase hex: entities 128 bits (actors' are at least 64), events 128 bits,
# commits git's (SHA-1 or SHA-256).
ENTITY_ID = Form(_HEX, [32])
ACTOR_ID = Form(_HEX, range(16, 65))
EVENT_ID = ENTITY_ID
ANY_ENTITY = ACTOR_ID   # an event's entity: an actor's (16..64 hex) or any other's (32)
COMMIT_ID = Form(_HEX, [0, 40, 64])   # or "" (none)
ENTITY_REF = Form(_HEX, [0, 32])      # or "" (none)
REPLICA_ID = Form(_HEX, range(1, 65))
KIND_NAME = Form(_WORD + "-", range(1, 33), first=_LOWER)
WORD = Form(_WORD, range(1, 65), first=_LOWER)
FIELD_NAME = SET_NAME = _Pair(WORD, Form(_WORD, range(1, 65)))   # labels, dep:<type>, x:<id>
STATUS = Form(_LOWER + "0123456789-", range(0, 33), first=_LOWER)      # or ""

INT_MAX = (1 << 31) - 1
CLOCK_MAX = 1 << 53                 # ms stamps and counters that arithmetic must keep exact
LINE_MAX = 65_536                   # characters of a one-line text (a title)
NAME_MAX = 1_024                    # characters of a name (an engine, a branch, an email)
ITEMS_MAX = 10_000                  # entries of a list or map field


class _Known:
    """Strings already found of a form: replay meets the same actors, entities, field and set
    names again and again, and a set lookup costs a fraction of a check (bounded)."""

    def __init__(self, form: Form | _Pair, limit: int = 1 << 17):
        self.form, self.limit, self.seen = form, limit, set()

    def __call__(self, value: str) -> bool:
        if value in self.seen:
            return True
        if self.form.match(value) is None:
            return False
        if len(self.seen) >= self.limit:
            self.seen.clear()
        self.seen.add(value)
        return True


_entity_ok, _actor_ok = _Known(ANY_ENTITY), _Known(ACTOR_ID)
_field_ok, _set_ok = _Known(FIELD_NAME, 4096), _Known(SET_NAME, 4096)


def _type_name(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def text(limit: int, one_line: bool = False, printable: bool = False) -> Check:
    """Text of at most `limit` characters; one_line: no line break or NUL; printable: no
    control or format character at all (what is shown in lists, or handed to git as a value)."""
    def check(v: Any) -> str | None:
        if type(v) is not str:
            return f"is a {_type_name(v)}, not text"
        if len(v) > limit:
            return f"is {len(v)} characters, over {limit}"
        if printable and not v.isprintable():
            return "holds control characters"
        if one_line and ("\n" in v or "\r" in v or "\0" in v):
            return "is not a single line"
        return None
    return check


def name(limit: int = NAME_MAX) -> Check:
    """One line without control characters."""
    return text(limit, printable=True)


def pattern(form: Form, what: str) -> Check:
    def check(v: Any) -> str | None:
        if type(v) is not str:
            return f"is a {_type_name(v)}, not {what}"
        if len(v) > NAME_MAX or form.match(v) is None:
            return f"{_show(v)} is not {what}"
        return None
    return check


def integer(lo: int, hi: int, null: bool = False) -> Check:
    def check(v: Any) -> str | None:
        if v is None and null:
            return None
        if type(v) is not int:
            return f"is a {_type_name(v)}, not a whole number"
        if not lo <= v <= hi:
            return f"{_show(v)} is outside {lo}..{hi}"
        return None
    return check


def boolean(v: Any) -> str | None:
    return None if type(v) is bool else f"is a {_type_name(v)}, not true or false"


def list_of(item: Check, limit: int = ITEMS_MAX) -> Check:
    def check(v: Any) -> str | None:
        if type(v) is not list:
            return f"is a {_type_name(v)}, not a list"
        if len(v) > limit:
            return f"has {len(v)} entries, over {limit}"
        for x in v:
            why = item(x)
            if why is not None:
                return f"has an entry that {why}"
        return None
    return check


def map_of(key: Check, value: Check, limit: int = ITEMS_MAX) -> Check:
    def check(v: Any) -> str | None:
        if type(v) is not dict:
            return f"is a {_type_name(v)}, not a map"
        if len(v) > limit:
            return f"has {len(v)} entries, over {limit}"
        for k, x in v.items():
            why = key(k) or value(x)
            if why is not None:
                return f"has an entry that {why}"
        return None
    return check


def record(spec: dict[str, Check]) -> Check:
    """A map whose named entries have their types (others are kept as they are)."""
    def check(v: Any) -> str | None:
        if type(v) is not dict:
            return f"is a {_type_name(v)}, not a map"
        for key, entry in spec.items():
            if key in v:
                why = entry(v[key])
                if why is not None:
                    return f"has {key!r} that {why}"
        return None
    return check


def _show(v: Any) -> str:
    r = repr(v)
    return r if len(r) <= 40 else r[:37] + "..."


_stamp = integer(0, CLOCK_MAX)                    # ms since the epoch (0: none)
_count = integer(0, INT_MAX)
_commit = pattern(COMMIT_ID, "a commit id")
_ref = pattern(ENTITY_REF, "an entity id")
_status = pattern(STATUS, "a status (lowercase letters and dashes)")
_long = text(1 << 30)                            # its size is bound by the event's
_line = text(LINE_MAX, one_line=True)
_name = name()

# Every field a reader takes as a type, by name, whatever the kind of entity it is set on.
FIELDS: dict[str, Check] = {
    # a status move's own (its statuses below; the state machine is replay's: State._recheck)
    "forced": boolean, "reason": _long,
    "ends": _ref,   # the session whose run a move out of running ends ("" for a run by hand)
    # what people write
    "title": _line, "body": _long, "name": _name, "email": _name,
    # tasks
    "priority": integer(0, 4), "convoy": _ref, "paths": list_of(name(4096)), "step": _name,
    "failures": _count, "merge_failures": _count, "retry_after": _stamp,
    "last_failure": _long, "last_failure_at": _stamp, "needs_human": _long,
    "done_by": _ref, "done_message": _long,
    # the review gate: the commit a human approved, when, and the one a reply answered
    "approved_head": _commit, "approved_at": _stamp, "reply_head": _commit,
    # convoys
    "workflow": _name, "vars": map_of(_name, _long),
    # sessions
    "task": _ref, "session": _ref, "engine": _name, "engine_version": _name,
    "engine_session": _name, "branch": _name, "worktree": name(4096), "target": _name,
    "host": _name, "holder": _name, "sandbox": _name, "phase": _name, "attempt": _count,
    "attempts": _count, "pid": _count, "witness_pid": _count, "witness_start": _stamp,
    "pid_start": _stamp, "exit_code": integer(-INT_MAX - 1, INT_MAX, null=True),
    "started_at": _stamp, "ended_at": _stamp, "finished_at": _stamp, "queued_at": _stamp,
    "head": _commit, "base": _commit, "start_head": _commit, "salvaged": _commit,
    "merged_commit": _commit, "commits": _count, "argv": list_of(_long, 4096),
    "output_tail": _long, "resumed": _name, "stop_requested": _name,
    # merge requests
    "result": _long, "conflicts": list_of(name(4096)),
    # a merge request's failed check (refinery/report.py): its commit and failing tests' names
    "checked_commit": _commit, "failing_tests": list_of(name(4096)),
    # a red target (refinery/red.py): its check, when it passed again; a request held for it;
    # the tree a task's last failed check ran on (a re-run on the same commits is no attempt)
    "check": _long, "passed_commit": _commit, "held_on": _commit, "failed_tree": _commit,
    # mayor conversations
    "brief": _long, "session_id": _name, "reply": _long, "reply_id": _name,
    # deacon runs
    "duties": map_of(_name, _long), "actions": _count,
    # actors
    "replica": pattern(REPLICA_ID, "a replica id"),
    # attribution: the session whose agent caused a move or a comment ("" for the actor's own)
    "via": _ref,
    # knowledge notes (`git brat kb`): their kind and tags (paths are a task's "paths")
    "note_kind": pattern(WORD, "a note kind (a lowercase word)"),
    "tags": list_of(name(256), 64),
    # usage limits: a paused task and the session that met the limit (its engine is held)
    "paused_until": _stamp, "paused_why": _line, "limit_pauses": _count, "limit": _long,
    "no_resume": boolean,
    # an engine hold lifted early by a human (`git brat engine release`): when, on the session
    "hold_lifted_at": _stamp,
}
# what a session spent (brat/engines/usage.py): token counts, micro-dollars (null: unknown);
# `reported`, a cumulative engine's totals so far, the next resumed session's starting point
_tokens = integer(0, CLOCK_MAX)
_spent = {"input": _tokens, "output": _tokens, "cache_read": _tokens, "cache_write": _tokens,
          "reasoning": _tokens, "cost_micros": integer(0, CLOCK_MAX, null=True)}
FIELDS["usage"] = record({**_spent, "cost_source": _name, "model": _name,
                          "reported": record(_spent)})
FIELDS.update(dict.fromkeys(("status", "state", "status_from"), _status))

# Fields named by a prefix, one per record: a mayor's exchanges (x:<id>), a deacon run's actions.
_any_map = map_of(text(NAME_MAX), lambda v: None)
PREFIXED: dict[str, Check] = {
    "x:": record({"question": _long, "answer": _long, "truncated": boolean, "engine": _name,
                  "session_id": _name, "at": _stamp, "plan": _any_map,
                  "created": record({"convoy": _ref, "title": _line, "workflow": _name,
                                     "tasks": list_of(_ref)})}),
    "action": _any_map,   # action000, action001, ...
}

# The project context (git grite context set): ctx:<key>, a key of PROJECT_KEY's form, its value
# text ("" once unset).
PROJECT_PREFIX = "ctx:"
PROJECT_KEY = Form(_WORD, range(1, 65))
PROJECT_VALUE_MAX = 65_536
PREFIXED[PROJECT_PREFIX] = text(PROJECT_VALUE_MAX)


def _prefixed(key: str) -> Check | None:
    if key.startswith("x:"):
        return PREFIXED["x:"]
    if key.startswith("action") and key[6:].isdigit():
        return PREFIXED["action"]
    if key.startswith(PROJECT_PREFIX):
        return PREFIXED[PROJECT_PREFIX]
    return None


def fields_problem(fields: Any) -> str | None:
    """Why a Create's or SetFields' fields do not fit (the first found), or None."""
    if type(fields) is not dict:
        return f"its fields are a {_type_name(fields)}, not a map"
    for key, value in fields.items():
        if type(key) is not str or not _field_ok(key):
            return f"field name {_show(key)} is not a name (lowercase letters, digits, _, one :)"
        check = FIELDS.get(key)
        if check is None:
            check = _prefixed(key)
        if check is not None:
            why = check(value)
            if why is not None:
                return f"field {key!r} {why}"
    return None


def via_problem(via: Any) -> str | None:
    """A comment's `via`: the session it came through, or "" (the actor's own words)."""
    if via == "":
        return None
    why = _ref(via)
    return None if why is None else f"its via {why}"


def header_problem(eid: str, entity: str, actor: str) -> str | None:
    # (inline first: replay asks this of every event, and nearly every answer is yes)
    if len(eid) != 32 or eid.strip(_HEX):
        return f"event id {_show(eid)} is not 32 hex digits"
    if entity not in _entity_ok.seen and not _entity_ok(entity):
        return f"entity id {_show(entity)} is not an entity id (hex digits)"
    if actor not in _actor_ok.seen and not _actor_ok(actor):
        return f"actor {_show(actor)} is not an actor id (16 to 64 hex digits)"
    return None


def create_problem(entity: str, kind: str, actor_kind: str) -> str | None:
    """An entity of a kind has its kind's id: an actor's own, every other 32 hex digits."""
    if type(kind) is not str or KIND_NAME.match(kind) is None:
        return f"kind {_show(kind)} is not a kind name"
    if kind != actor_kind and ENTITY_ID.match(entity) is None:
        return f"creates a {kind} with id {_show(entity)}, not 32 hex digits"
    return None


def set_problem(name_: str, value: str, observed: list[str] = ()) -> str | None:
    """Adds and removes: a set's name, its value (an entity id for a dependency), add tags."""
    if (name_, value) in _members_ok and not observed:
        return None
    if not _set_ok(name_):
        return f"set name {_show(name_)} is not a name"
    if name_.startswith("dep:"):
        if ENTITY_ID.match(value) is None:
            return f"dependency {_show(value)} is not an entity id"
    else:
        why = _name(value)
        if why is not None:
            return f"{name_} value {why}"
    for tag in observed:
        if EVENT_ID.match(tag) is None:
            return f"removes add tag {_show(tag)}, not an event id"
    if len(_members_ok) >= 1 << 16:
        _members_ok.clear()
    _members_ok.add((name_, value))
    return None


_members_ok: set[tuple[str, str]] = set()   # (set, value) already found to fit (labels recur)


def lease_problem(resource: str, token: int, holder: str, prev_end: int) -> str | None:
    why = _name(resource) or _name(holder)
    if why is not None:
        return f"its resource or holder {why}"
    if not 0 <= token <= CLOCK_MAX or not 0 <= prev_end <= CLOCK_MAX:
        return f"token {token} or end {prev_end} is outside 0..2^53"
    return None
