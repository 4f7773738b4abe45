"""Property: hostile batches mixed into honest logs never crash replay, never change what the
honest events say, and every hostile event or batch is reported."""

from __future__ import annotations

import msgspec
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from git_brat.grite.model import events as ev
from git_brat.grite.model.kinds import KINDS, TASK
from git_brat.grite.model.leases import Grants, verdict
from git_brat.grite.model.state import canonical, replay, status_of

from gritekit import ENTITIES, histories

TASKS = ["1" * 32, "2" * 32]
TABLE = KINDS[TASK].transitions
STATUSES = sorted(TABLE)
SKIPS = [s for s in STATUSES if s != "queued"]
HOSTILE_ACTOR = "ba" * 8
BIG = "A" * (ev.MAX_EVENT_BYTES + 1)


@st.composite
def honest_tasks(draw):
    """Tasks moved only along the table, at rising clocks, by honest writers."""
    out = []
    for tid in TASKS:
        lam = draw(st.integers(1, 5))
        out.append(ev.make_event(tid, "a1" * 8, lam, 1000, ev.Create("task", {"title": tid,
                                                                              "status": "queued"})))
        cur = "queued"
        for _ in range(draw(st.integers(0, 5))):
            onward = TABLE[cur]
            if not onward:
                break
            new = draw(st.sampled_from(onward))
            lam += draw(st.integers(1, 3))
            out.append(ev.make_event(tid, draw(st.sampled_from(["a1" * 8, "b0" * 8])), lam, 1000 + lam,
                                     ev.SetFields({"status": new, "status_from": cur})))
            cur = new
    return out


def _nested(depth: int):
    v: object = "x"
    for _ in range(depth):
        v = [v]
    return v


@st.composite
def hostile_event(draw):
    """One event replay must reject, whatever else arrives."""
    what = draw(st.sampled_from(["clock", "ts", "deep", "big", "move", "create", "lease"]))
    ent = draw(st.sampled_from(TASKS + ENTITIES[:2]))
    lam = draw(st.integers(1, 60))
    ts = 1000
    if what == "clock":
        lam = draw(st.integers(ev.LAMPORT_MAX + 1, (1 << 64) - 1))
        op = ev.SetFields({"title": "pwned"})
    elif what == "ts":
        ts = draw(st.one_of(st.integers(ev.TS_MAX + 1, (1 << 63) - 1), st.integers(-(1 << 63), -1)))
        op = ev.Comment("from the future")
    elif what == "deep":
        op = ev.SetFields({"title": _nested(draw(st.integers(ev.MAX_DEPTH, ev.MAX_DEPTH + 50)))})
    elif what == "big":
        op = draw(st.sampled_from([ev.Comment(BIG), ev.SetFields({"body": BIG})]))
    elif what == "move":   # a move the table never allows, whatever the status before it
        ent = draw(st.sampled_from(TASKS))
        op = ev.SetFields({"status": "bogus", "status_from": draw(st.sampled_from(STATUSES))})
    elif what == "lease":  # a fence token no lease record grants: far ahead, or another end
        ent = "10c0" * 8
        token, prev_end = draw(st.one_of(
            st.tuples(st.integers(RECORDED + 1, 10**12), st.integers(-5, 10**6)),
            st.tuples(st.integers(1, RECORDED), st.integers(1, 10**6))))
        op = ev.LeaseToken(LEASED, token, HOSTILE_ACTOR, prev_end)
    else:                  # a second create of a task that skips the queue, stamped first
        ent, lam = draw(st.sampled_from(TASKS)), 0
        op = ev.Create("task", {"title": "x", "status": draw(st.sampled_from(SKIPS))})
    return ev.make_event(ent, HOSTILE_ACTOR, lam, ts, op)


# The lease the honest histories fence by (gritekit.histories): its records grant tokens 1-4,
# each with no end of an earlier lease (prev_end 0), as the honest LeaseTokens say.
LEASED, RECORDED = "task:1", 4
RECORDS = [Grants(RECORDED, {t: 0 for t in range(1, RECORDED + 1)}, 0)]


def judge(resource: str, token: int, prev_end: int):
    return verdict(resource, token, prev_end, RECORDS), None


def _view(state) -> dict:
    """What the honest events say: every entity's kind, status, fields, sets and comments."""
    out = {}
    for eid, ent in state.entities.items():
        if not ent.created:
            continue
        out[eid] = (ent.kind, status_of(ent),
                    sorted((k, repr(v[0])) for k, v in ent.fields.items()),
                    sorted((k, tuple(ent.members(k))) for k in ent.sets),
                    sorted(ent.comments))
    return out


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(honest=st.tuples(histories(), honest_tasks()).map(lambda t: t[0] + t[1]),
       hostile=st.lists(hostile_event(), min_size=1, max_size=6), seed=st.randoms())
def test_hostile_events_are_rejected_and_change_nothing_honest(honest, hostile, seed):
    mixed = honest + hostile
    seed.shuffle(mixed)
    state = replay(mixed, judge)
    assert _view(state) == _view(replay(honest, judge))
    assert {e.id for e in hostile} <= set(state.rejected)
    assert state.max_lamport <= ev.LAMPORT_MAX
    # Still a CRDT with them in: any order, the same state.
    seed.shuffle(mixed)
    assert canonical(replay(mixed, judge)) == canonical(state)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(honest=honest_tasks(), seed=st.randoms())
def test_honest_task_logs_replay_to_the_same_state_in_any_order_with_nothing_rejected(honest, seed):
    first = replay(honest)
    assert not first.rejected
    for _ in range(3):
        seed.shuffle(honest)
        assert canonical(replay(honest)) == canonical(first)


@settings(max_examples=100, deadline=None)
@given(data=st.one_of(st.binary(max_size=400),
                      st.builds(lambda head, tail: head + tail,
                                st.sampled_from([b"\x94\x01\xb0" + b"0" * 16 + b"\x05",
                                                 b"\x94\x01\xa1x\xcf" + b"\xff" * 8]),
                                st.binary(max_size=200)),
                      st.integers(1000, 5000).map(lambda d: b"\x94\x01\xa1x\x01\x91" + b"\x91" * d)))
def test_garbage_bytes_are_a_decode_error_or_a_batch_never_a_crash(data):
    try:
        batch = ev.decode_batch(data)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return
    state = replay(batch.events)   # whatever decodes replays, rejecting what is out of bounds
    assert state.max_lamport <= ev.LAMPORT_MAX
