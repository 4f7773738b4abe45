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

FORMAT_VERSION = 1


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

    Raises msgspec.DecodeError/ValidationError for bytes that are not a batch at all.
    """
    try:
        return _batch_decoder.decode(data)
    except msgspec.ValidationError:
        loose = _loose_decoder.decode(data)   # still fails for non-batches: that is corruption
    events = []
    for e in loose.events:
        try:
            op = _op_decoder.decode(e.op)
        except msgspec.ValidationError:
            op = UnknownOp(bytes(e.op))
        events.append(Event(e.id, e.entity, e.actor, e.lamport, e.ts, op, e.fence))
    return Batch(loose.v, loose.replica, loose.lamport, events)


def decode_head(data: bytes) -> BatchHead:
    return _head_decoder.decode(data)


def op_name(op: Any) -> str:
    """Human name of an operation, for the audit log."""
    return {Create: "create", SetFields: "set", AddTo: "add", RemoveFrom: "remove",
            Comment: "comment", LeaseToken: "lease", UnknownOp: "unknown"}[type(op)]
