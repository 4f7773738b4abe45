"""Event structs (a tagged union of operations), their canonical encoding, and ids.

Wire format rules: every struct is array_like with an explicit short tag; new fields are
only ever appended, with defaults, so older readers ignore them and newer readers fill them.
"""

from __future__ import annotations

import os
from typing import Any, Union

try:   # hashlib would load OpenSSL (~10 ms a process) for a hash CPython has built in
    from _blake2 import blake2b
except ImportError:   # pragma: no cover - another Python
    from hashlib import blake2b

import msgspec

from git_brat.grite.model import schema
from git_brat.grite.model.kinds import ACTOR as ACTOR_KIND

FORMAT_VERSION = 1

# Bounds. Anyone who can push writes events, so every one of these is checked on replay (an
# event past them is rejected, a batch past them skipped as corrupt) and by the writer (which
# refuses to write what replay would reject). Clocks stay below 2^53 so that any arithmetic
# on them (and JSON readers) stays exact; a ts must be a date datetime can show (years to 9999).
LAMPORT_MAX = 1 << 53
TS_MAX = 253_402_300_799_999          # 9999-12-31T23:59:59.999Z in ms
MAX_EVENT_BYTES = 4 << 20             # the text and values one event carries
MAX_DEPTH = 32                        # nesting of a field's value (lists, maps)
MAX_ID = 128                          # characters of an id, an actor, a set or field name
MAX_BATCH_BYTES = 64 << 20            # one events blob, checked before it is decoded
MAX_BATCH_EVENTS = 100_000
MAX_BATCH_ENTITIES = 50_000


class Create(msgspec.Struct, array_like=True, tag="c"):
    """Create an entity of `kind` with initial field values."""
    kind: str
    fields: dict[str, Any] = {}


class SetFields(msgspec.Struct, array_like=True, tag="s"):
    """Set fields; each field is a last-writer-wins register."""
    fields: dict[str, Any]


class AddTo(msgspec.Struct, array_like=True, tag="a"):
    """Add `value` to the observed-remove set `name` (labels, assignees, dep:<type>)."""
    name: str
    value: str


class RemoveFrom(msgspec.Struct, array_like=True, tag="r"):
    """Remove `value` from set `name`: cancels exactly the adds the writer had observed."""
    name: str
    value: str
    observed: list[str] = []


class Comment(msgspec.Struct, array_like=True, tag="m"):
    body: str
    # The session (an entity id) whose agent said it, written by the witness that speaks for
    # it; "" when the actor said it. Readers believe it only of a session the same actor
    # created (see brat/board.credit): anyone may write it, but only about their own sessions.
    via: str = ""


class LeaseToken(msgspec.Struct, array_like=True, tag="k"):
    """A lease on `resource` was granted with fencing `token` (recorded for replay's fencing).

    `prev_end`: when the previous lease of the resource ended (ms, on that holder's own clock:
    its release time or its expiry); 0 = unknown, so every event under an older token is stale.
    """
    resource: str
    token: int
    holder: str = ""
    prev_end: int = 0


Op = Union[Create, SetFields, AddTo, RemoveFrom, Comment, LeaseToken]


class Fence(msgspec.Struct, array_like=True):
    """The lease an event claims to act under; replay rejects it if a newer token exists."""
    resource: str
    token: int


class Event(msgspec.Struct, array_like=True):
    id: str
    entity: str
    actor: str
    lamport: int
    ts: int                      # wall clock, ms since the epoch (display only; never ordering)
    op: Op
    fence: Fence | None = None

    @property
    def stamp(self) -> tuple[int, str, str]:
        """The total order of events: (Lamport, actor, event id)."""
        return (self.lamport, self.actor, self.id)


class UnknownOp(msgspec.Struct, array_like=True):
    """An operation from a newer writer: kept in the log, skipped by replay."""
    raw: bytes


class BadOp(msgspec.Struct, array_like=True):
    """An operation with a tag this version knows, whose parts are not of its types: rejected."""
    raw: bytes
    why: str


class Batch(msgspec.Struct, array_like=True):
    """What one command wrote atomically: the content of one log commit's `events` blob."""
    v: int
    replica: str
    lamport: int                 # highest Lamport clock in this batch
    events: list[Event]


class BatchHead(msgspec.Struct, array_like=True):
    """The first fields of a Batch; decoding stops caring after them."""
    v: int
    replica: str
    lamport: int


class _LooseEvent(msgspec.Struct, array_like=True):
    id: str
    entity: str
    actor: str
    lamport: int
    ts: int
    op: msgspec.Raw
    fence: Fence | None = None


class _LooseBatch(msgspec.Struct, array_like=True):
    v: int
    replica: str
    lamport: int
    events: list[_LooseEvent]


_encoder = msgspec.msgpack.Encoder(order="deterministic")
_batch_decoder = msgspec.msgpack.Decoder(Batch)
_head_decoder = msgspec.msgpack.Decoder(BatchHead)
_loose_decoder = msgspec.msgpack.Decoder(_LooseBatch)
_op_decoder = msgspec.msgpack.Decoder(Op)


def new_entity_id() -> str:
    """A random 128-bit id; shown abbreviated to its shortest unique prefix."""
    return os.urandom(16).hex()


def event_id(entity: str, actor: str, lamport: int, ts: int, op: Any, fence: Fence | None) -> str:
    """Content hash of the event's canonical bytes (everything but the id itself)."""
    canonical = _encoder.encode((entity, actor, lamport, ts, op, fence))
    return blake2b(canonical, digest_size=16).hexdigest()


def make_event(entity: str, actor: str, lamport: int, ts: int, op: Op,
               fence: Fence | None = None) -> Event:
    return Event(event_id(entity, actor, lamport, ts, op, fence), entity, actor, lamport, ts, op, fence)


def encode_batch(batch: Batch) -> bytes:
    return _encoder.encode(batch)


def decode_batch(data: bytes) -> Batch:
    """Decode a batch; operations with tags this version does not know become UnknownOp.

    Raises msgspec.DecodeError/ValidationError for bytes that are not a batch at all, and
    DecodeError for one past the batch bounds (bytes, events, entities, nesting), checked
    before decoding where the bytes tell (size, the events array's length).
    """
    if len(data) > MAX_BATCH_BYTES:
        raise msgspec.DecodeError(f"events blob of {len(data)} bytes, over the "
                                  f"{MAX_BATCH_BYTES} a batch may have")
    count = _events_count(data)
    if count is not None and count > MAX_BATCH_EVENTS:
        raise msgspec.DecodeError(f"batch of {count} events, over the {MAX_BATCH_EVENTS} "
                                  f"a batch may have")
    try:
        batch = _decode(data)
    except RecursionError:   # msgspec has no depth limit of its own: Python's stops it
        raise msgspec.DecodeError("events blob nested too deep to decode") from None
    if len(batch.events) > MAX_BATCH_EVENTS or \
            len({e.entity for e in batch.events}) > MAX_BATCH_ENTITIES:
        raise msgspec.DecodeError(f"batch of {len(batch.events)} events over more than "
                                  f"{MAX_BATCH_ENTITIES} entities")
    return batch


def _decode(data: bytes) -> Batch:
    try:
        return _batch_decoder.decode(data)
    except msgspec.ValidationError:
        loose = _loose_decoder.decode(data)   # still fails for non-batches: that is corruption
    events = []
    for e in loose.events:
        try:
            op = _op_decoder.decode(e.op)
        except msgspec.ValidationError as exc:
            op = UnknownOp(bytes(e.op)) if _tag_of(e.op) not in _TAGS else \
                BadOp(bytes(e.op), str(exc))
        events.append(Event(e.id, e.entity, e.actor, e.lamport, e.ts, op, e.fence))
    return Batch(loose.v, loose.replica, loose.lamport, events)


_TAGS = frozenset(t.__struct_config__.tag for t in (Create, SetFields, AddTo, RemoveFrom, Comment,
                                                    LeaseToken))


def _tag_of(raw: msgspec.Raw) -> object:
    """The tag an operation's bytes start with (None when they are no tagged array)."""
    try:
        first = msgspec.msgpack.decode(raw)
    except (msgspec.DecodeError, RecursionError):
        return None
    return first[0] if isinstance(first, list) and first else None


_TAG_NAMES = {"c": "create", "s": "set", "a": "add", "r": "remove", "m": "comment", "k": "lease"}


def decode_head(data: bytes) -> BatchHead:
    try:
        return _head_decoder.decode(data)
    except RecursionError:
        raise msgspec.DecodeError("events blob nested too deep to decode") from None


def _events_count(data: bytes) -> int | None:
    """The length of a batch's events array, read from its msgpack header without decoding
    the events (None when the bytes do not start like a batch: decoding then says why)."""
    pos = 0
    try:
        if data[0] != 0x94:   # fixarray of 4: [v, replica, lamport, events]
            return None
        pos = 1
        for want in ("int", "str", "int"):
            b = data[pos]
            if want == "int" and (b <= 0x7f or b >= 0xe0):
                pos += 1
            elif want == "int" and 0xcc <= b <= 0xd3:
                pos += 1 + (1 << ((b - 0xcc) & 3))
            elif want == "str" and 0xa0 <= b <= 0xbf:
                pos += 1 + (b & 0x1f)
            elif want == "str" and 0xd9 <= b <= 0xdb:
                n = 1 << (b - 0xd9)
                pos += 1 + n + int.from_bytes(data[pos + 1:pos + 1 + n], "big")
            else:
                return None
        b = data[pos]
        if 0x90 <= b <= 0x9f:
            return b & 0x0f
        if b in (0xdc, 0xdd):
            n = 2 if b == 0xdc else 4
            return int.from_bytes(data[pos + 1:pos + 1 + n], "big")
    except IndexError:
        pass
    return None


def event_problem(e: Event) -> str | None:
    """Why replay must reject this event on its own (past a bound, or not of its kind's
    schema: see schema), or None."""
    if not 0 <= e.lamport <= LAMPORT_MAX:
        return f"Lamport clock {e.lamport} is outside 0..2^53"
    if not 0 <= e.ts <= TS_MAX:
        return f"timestamp {e.ts} is not a date between 1970 and 9999"
    if max(len(e.id), len(e.entity), len(e.actor)) > MAX_ID:
        return f"an id or actor longer than {MAX_ID} characters"
    try:
        size = _op_size(e.op)
    except _TooDeep:
        return f"a value nested deeper than {MAX_DEPTH} levels"
    if size > MAX_EVENT_BYTES:
        return f"{size} bytes of values, over the {MAX_EVENT_BYTES} an event may carry"
    return _schema_problem(e)


def _schema_problem(e: Event) -> str | None:
    why = schema.header_problem(e.id, e.entity, e.actor)
    if why is not None:
        return why
    if e.fence is not None:
        why = schema.lease_problem(e.fence.resource, e.fence.token, "", 0)
        if why is not None:
            return f"its fence: {why}"
    op = e.op
    kind = type(op)
    if kind is SetFields:
        return schema.fields_problem(op.fields)
    if kind is Comment:
        return schema.via_problem(op.via)
    if kind is Create:
        return schema.create_problem(e.entity, op.kind, ACTOR_KIND) or schema.fields_problem(op.fields)
    if kind is AddTo:
        return schema.set_problem(op.name, op.value)
    if kind is RemoveFrom:
        return schema.set_problem(op.name, op.value, op.observed)
    if kind is LeaseToken:
        return schema.lease_problem(op.resource, op.token, op.holder, op.prev_end)
    if kind is BadOp:
        return f"a malformed {_TAG_NAMES.get(_tag_of(msgspec.Raw(op.raw)), 'operation')}: {op.why}"
    return None


class _TooDeep(Exception):
    pass


def _op_size(op: Any) -> int:
    kind = type(op)
    if kind is Comment:
        return len(op.body)
    if kind is Create or kind is SetFields:
        return sum(len(k) + _value_size(v, 1) for k, v in op.fields.items())
    if kind is AddTo:
        return len(op.name) + len(op.value)
    if kind is RemoveFrom:
        return len(op.name) + len(op.value) + sum(len(t) for t in op.observed)
    if kind is UnknownOp or kind is BadOp:
        return len(op.raw)
    return 0


_SCALARS = (int, float, bool, type(None))


def _value_size(v: Any, depth: int) -> int:
    """Roughly the bytes a field value holds (characters for text), checking its nesting."""
    if isinstance(v, (str, bytes)):
        return len(v)
    if isinstance(v, _SCALARS):
        return 8
    if depth >= MAX_DEPTH:
        raise _TooDeep
    if isinstance(v, dict):
        return sum(_value_size(k, depth + 1) + _value_size(x, depth + 1) for k, x in v.items())
    if isinstance(v, (list, tuple)):
        return sum(_value_size(x, depth + 1) for x in v) + 1
    return 8


def op_name(op: Any) -> str:
    """Human name of an operation, for the audit log."""
    return {Create: "create", SetFields: "set", AddTo: "add", RemoveFrom: "remove",
            Comment: "comment", LeaseToken: "lease", UnknownOp: "unknown",
            BadOp: "malformed"}[type(op)]
