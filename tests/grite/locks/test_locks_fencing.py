"""Fencing: events written under a lost lease are kept in the log but rejected by replay."""

from __future__ import annotations

import time

import pytest
from hypothesis import given, settings, strategies as st

from git_brat.grite.model import events as ev
from git_brat.grite import locks
from git_brat.errors import Conflict
from git_brat.grite.log.wal import Draft
from git_brat.grite.repo import Grite
from git_brat.grite.model.state import State, canonical, replay
from helpers import grite, grite_json, incremental

RES = "task:t-fence"


def _open(repo) -> Grite:
    return Grite.open(str(repo))


def _settings(g, ttl=2.0, skew=0.2):   # a TTL a loaded machine cannot outrun by accident
    return locks.settings(g.store, local=True, ttl=ttl, skew=skew)


def _create(g, title="fenced work") -> str:
    eid = ev.new_entity_id()
    g.append([Draft(eid, ev.Create("issue", {"title": title, "state": "open"}))], "create")
    return eid


def _wait_until(ms: int) -> None:
    time.sleep(max(0.0, ms / 1000 - time.time()) + 0.01)


def test_zombie_writes_after_takeover_are_rejected_and_kept_in_the_audit_trail(grepo):
    g = _open(grepo)
    eid = _create(g)
    st = _settings(g)
    zombie, heir = locks.holder_for(g, "zombie"), locks.holder_for(g, "heir")
    first = locks.acquire(g, RES, st, zombie)
    legit = locks.append_fenced(g, RES, [Draft(eid, ev.SetFields({"state": "running"}))],
                                "under lease", holder_id="zombie")
    assert legit.events[0].fence == ev.Fence(RES, first.token)
    assert g.state(refresh=True).entities[eid].get("state") == "running"

    _wait_until(locks.current(g, RES).expires_at + 200)   # TTL + skew margin
    took = locks.acquire(g, RES, st, heir)
    assert took.token == first.token + 1 and took.action == "takeover"

    # The zombie wakes up: the library refuses it outright ...
    with pytest.raises(Conflict, match="not held by zombie"):
        locks.append_fenced(g, RES, [Draft(eid, ev.SetFields({"state": "done"}))], "x", holder_id="zombie")
    # ... and if it writes anyway with the fence it had, replay rejects the write.
    stale = g.append([Draft(eid, ev.SetFields({"state": "done"}), ev.Fence(RES, first.token))], "zombie")
    state = g.state(refresh=True)
    assert state.entities[eid].get("state") == "running"
    assert stale.events[0].id in state.rejected
    assert legit.events[0].id not in state.rejected      # work done while holding stays valid
    # The successor's fenced write goes through.
    locks.append_fenced(g, RES, [Draft(eid, ev.SetFields({"state": "review"}))], "heir", holder_id="heir")
    assert g.state(refresh=True).entities[eid].get("state") == "review"

    audit = {e["event"]: e for e in grite_json(grepo, "log")}
    assert audit[stale.events[0].id]["rejected"].startswith(f"stale fencing token 1 for {RES}")
    assert audit[legit.events[0].id]["rejected"] is None
    assert "[REJECTED: stale fencing token 1" in grite(grepo, "log").out
    # Incremental cache and full rebuild agree.
    assert canonical(g.state(refresh=True)) == canonical(g.cache.rebuild())


def test_a_stale_write_that_landed_before_the_new_grant_is_rejected_once_the_grant_arrives(grepo):
    g = _open(grepo)
    eid = _create(g)
    st = _settings(g)
    first = locks.acquire(g, RES, st, locks.holder_for(g, "zombie"))
    _wait_until(first.expires_at.timestamp() * 1000 + 50)   # expired on the zombie's own clock
    late = g.append([Draft(eid, ev.SetFields({"title": "zombie"}), ev.Fence(RES, first.token))], "late")
    assert g.state(refresh=True).entities[eid].get("title") == "zombie"   # nothing newer known yet
    _wait_until(first.expires_at.timestamp() * 1000 + 250)
    locks.acquire(g, RES, st, locks.holder_for(g, "heir"))
    state = g.state(refresh=True)                                # incremental: must replay
    assert late.events[0].id in state.rejected
    assert state.entities[eid].get("title") == "fenced work"
    assert canonical(state) == canonical(g.cache.rebuild())


def test_release_then_new_grant_keeps_earlier_work_valid(grepo):
    g = _open(grepo)
    eid = _create(g)
    st = _settings(g, ttl=60)
    locks.acquire(g, RES, st, locks.holder_for(g, "a"))
    done = locks.append_fenced(g, RES, [Draft(eid, ev.Comment("done by a"))], "a", holder_id="a")
    locks.release(g, RES, st, locks.holder_for(g, "a"))
    assert locks.acquire(g, RES, st, locks.holder_for(g, "b")).token == 2
    state = g.state(refresh=True)
    assert done.events[0].id not in state.rejected
    assert [c[4] for c in state.entities[eid].sorted_comments()] == ["done by a"]


def _lease(token: int, prev_end: int, lamport: int = 1, actor: str = "cc" * 8) -> ev.Event:
    return ev.make_event(locks.lock_entity(RES), actor, lamport, 0,
                         ev.LeaseToken(RES, token, actor, prev_end))


def _fenced(token: int, ts: int, value: str, lamport: int = 1) -> ev.Event:
    return ev.make_event("e1" * 16, "dd" * 8, lamport, ts, ev.SetFields({"v": value}), ev.Fence(RES, token))


def test_replay_rejects_by_when_the_lease_ended_not_by_arrival_order():
    create = ev.make_event("e1" * 16, "dd" * 8, 1, 0, ev.Create("issue", {"v": "0"}))
    before = _fenced(1, 900, "before")          # written while token 1 was held
    after = _fenced(1, 1100, "after")           # written after it ended (at 1000)
    newer = _fenced(2, 1200, "newer", lamport=2)
    grant2 = _lease(2, prev_end=1000)
    state = replay([create, before, after, newer, grant2])
    assert set(state.rejected) == {after.id}
    # An unknown end (older writers) is strict: everything under an older token is stale.
    strict = replay([create, before, after, _lease(2, prev_end=0)])
    assert set(strict.rejected) == {before.id, after.id}
    # Two grants: an event is judged against the end of its own lease (the earliest later grant).
    mid = _fenced(1, 1050, "mid")
    two = replay([create, mid, _lease(3, prev_end=2000), _lease(2, prev_end=1000)])
    assert set(two.rejected) == {mid.id}


def test_incremental_apply_replays_when_a_late_grant_makes_applied_events_stale():
    create = ev.make_event("e1" * 16, "dd" * 8, 1, 0, ev.Create("issue", {"v": "0"}))
    old = _fenced(1, 1500, "old")
    newest = _fenced(3, 1600, "three")
    state = State()
    for e in (create, _lease(1, 0), _lease(3, prev_end=5000), old, newest):
        assert state.apply(e)
    assert not state.rejected                       # token 1's end is not known yet
    assert state.apply(_lease(2, prev_end=1000)) is False   # now it is: 'old' was after it
    full = replay([create, _lease(1, 0), _lease(3, 5000), old, newest, _lease(2, 1000)])
    assert set(full.rejected) == {old.id}


@st.composite
def fenced_histories(draw):
    events = [ev.make_event("e1" * 16, "dd" * 8, 1, 0, ev.Create("issue", {"v": "0"}))]
    for i in range(draw(st.integers(1, 25))):
        tok = draw(st.integers(1, 4))
        if draw(st.booleans()):
            events.append(_lease(tok, draw(st.sampled_from([0, 1000, 2000, 3000])),
                                 lamport=draw(st.integers(1, 9)), actor=draw(st.sampled_from("ab"))))
        else:
            events.append(_fenced(tok, draw(st.integers(500, 3500)), f"v{i}", lamport=draw(st.integers(1, 9))))
    return events


@settings(max_examples=300, deadline=None)
@given(data=st.data(), events=fenced_histories())
def test_fencing_is_order_independent_and_incremental_equals_full(data, events):
    expected = canonical(replay(events))
    shuffled = data.draw(st.permutations(events))
    assert canonical(replay(shuffled)) == expected
    # What the cache does, one event at a time.
    assert canonical(incremental([[e] for e in shuffled])) == expected


def test_a_grant_whose_token_event_was_lost_is_recorded_with_the_successors_first_write(grepo, monkeypatch):
    g = _open(grepo)
    eid = _create(g)
    st = _settings(g)
    zombie, heir = locks.holder_for(g, "zombie"), locks.holder_for(g, "heir")
    first = locks.acquire(g, RES, st, zombie)
    _wait_until(locks.current(g, RES).expires_at + 200)
    # The successor's acquire swaps the lease ref but cannot append its LeaseToken event (the
    # log's ref lock is held by someone else; the acquire reports it in its note).
    lock = grepo / ".git" / "refs" / "grite" / "wal.lock"
    lock.write_text("held\n")
    with monkeypatch.context() as m:
        m.setenv("GRITE_LOCK_TIMEOUT", "0.3")
        # (a long lease: its first write must not find it run out on a busy machine)
        took = locks.acquire(g, RES, _settings(g, ttl=60), heir)
    lock.unlink()
    assert took.token == first.token + 1 and "not recorded" in took.note
    stale = g.append([Draft(eid, ev.SetFields({"title": "zombie overwrite"}),
                            ev.Fence(RES, first.token))], "zombie")
    assert g.state(refresh=True).entities[eid].get("title") == "zombie overwrite"  # nothing fences it yet

    locks.append_fenced(g, RES, [Draft(eid, ev.SetFields({"state": "review"}))], "heir",
                        holder_id="heir")
    state = g.cache.rebuild()
    assert state.fences[RES] == took.token
    assert stale.events[0].id in state.rejected
    assert state.entities[eid].get("title") == "fenced work"
