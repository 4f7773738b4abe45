"""The pure lease decisions as a table: the previous record and the time in, the next record out.

Each decision is what `git grite lock acquire/renew/release/gc` asks before writing a record;
the compare-and-swap engine around them only retries them against the newest record.
"""

from __future__ import annotations

import pytest

from git_brat.errors import Conflict, NotFound
from git_brat.grite.locks.lease import (Holder, Lease, LeaseHeld, decide_acquire, decide_expire,
                                        decide_release, decide_renew)

R = "task:t-1"
TTL, SKEW = 60_000, 5_000           # ms
T0 = 1_000_000                      # when alice's lease was granted
EXPIRES = T0 + TTL
ALICE, BOB = Holder("alice", host="a"), Holder("bob", host="b")


def held(holder: Holder = ALICE, token: int = 3) -> Lease:
    return Lease(R, holder, token, "held", T0, EXPIRES, TTL, T0, action="acquire")


def released(token: int = 3, at: int = T0 + 1_000) -> Lease:
    return Lease(R, ALICE, token, "released", T0, EXPIRES, TTL, at, released_at=at,
                 action="release")


acquire = {"alice": decide_acquire(R, ALICE, TTL, SKEW, force=False),
           "bob": decide_acquire(R, BOB, TTL, SKEW, force=False),
           "bob --force": decide_acquire(R, BOB, TTL, SKEW, force=True)}
renew = {"alice": decide_renew(R, ALICE, None, force=False),
         "alice --ttl 10": decide_renew(R, ALICE, 10_000, force=False),
         "bob": decide_renew(R, BOB, None, force=False),
         "bob --force": decide_renew(R, BOB, None, force=True)}
release = {"alice": decide_release(R, ALICE, force=False),
           "bob": decide_release(R, BOB, force=False),
           "bob --force": decide_release(R, BOB, force=True)}
expire = decide_expire("gc-runner", SKEW)

WITHIN_SKEW = EXPIRES + SKEW         # past the holder's expiry, inside the margin: still held
PAST_SKEW = EXPIRES + SKEW + 1

# (what happens, decision, previous record, now, the next record's fields (+ grant, prev_end),
#  or the error, or None for "nothing to write")
TABLE = [
    # acquire
    ("acquire a free resource: token 1", acquire["bob"], None, T0,
     dict(token=1, state="held", holder="bob", action="acquire", acquired_at=T0,
          expires_at=T0 + TTL, by="", grant=True, prev_end=0)),
    ("acquire after a release: the next token, fenced from the release", acquire["bob"],
     released(), T0 + 2_000,
     dict(token=4, state="held", holder="bob", action="acquire", acquired_at=T0 + 2_000,
          grant=True, prev_end=T0 + 1_000)),
    ("acquire a lease someone holds: refused", acquire["bob"], held(), T0 + 1_000, LeaseHeld),
    ("acquire a lease expired within the skew margin: still refused", acquire["bob"], held(),
     WITHIN_SKEW, LeaseHeld),
    ("acquire a lease expired past the margin: taken over, fenced from its expiry",
     acquire["bob"], held(), PAST_SKEW,
     dict(token=4, holder="bob", action="takeover", by="", grant=True, prev_end=EXPIRES)),
    ("acquire a live lease with --force: taken, recorded, fenced from now", acquire["bob --force"],
     held(), T0 + 1_000,
     dict(token=4, holder="bob", action="force-takeover", by="bob", grant=True,
          prev_end=T0 + 1_000)),
    ("acquire a lease this holder has: extended, same token, no grant", acquire["alice"], held(),
     T0 + 1_000,
     dict(token=3, holder="alice", action="extend", acquired_at=T0, expires_at=T0 + 1_000 + TTL,
          grant=False, prev_end=0)),
    ("acquire a lapsed lease this holder still has (nobody took it): extended", acquire["alice"],
     held(), PAST_SKEW,
     dict(token=3, action="extend", expires_at=PAST_SKEW + TTL, grant=False)),
    # renew
    ("renew by the holder: same token, expiry pushed out", renew["alice"], held(), T0 + 1_000,
     dict(token=3, holder="alice", action="renew", expires_at=T0 + 1_000 + TTL, by="",
          grant=False)),
    ("renew by the holder with a new ttl", renew["alice --ttl 10"], held(), T0 + 1_000,
     dict(token=3, ttl_ms=10_000, expires_at=T0 + 11_000, action="renew")),
    ("renew by the holder after its expiry (nobody took it): renewed", renew["alice"], held(),
     PAST_SKEW, dict(token=3, holder="alice", action="renew", expires_at=PAST_SKEW + TTL)),
    ("renew by someone else: refused", renew["bob"], held(), T0 + 1_000, Conflict),
    ("renew by someone else with --force: the holder keeps it, the forcer is recorded",
     renew["bob --force"], held(), T0 + 1_000,
     dict(token=3, holder="alice", action="force-renew", by="bob", grant=False)),
    ("renew a released lease: refused", renew["alice"], released(), T0 + 2_000, Conflict),
    ("renew a lease that never was", renew["alice"], None, T0, NotFound),
    # release
    ("release by the holder: released now, the token kept", release["alice"], held(), T0 + 1_000,
     dict(token=3, state="released", released_at=T0 + 1_000, action="release", by="",
          grant=False)),
    ("release by someone else: refused", release["bob"], held(), T0 + 1_000, Conflict),
    ("release by someone else with --force: released, the forcer recorded",
     release["bob --force"], held(), T0 + 1_000,
     dict(token=3, state="released", holder="alice", action="force-release", by="bob")),
    ("release a released lease: nothing to write", release["alice"], released(), T0 + 2_000,
     None),
    ("release a lease that never was", release["alice"], None, T0, NotFound),
    # expire (gc)
    ("gc of a lease expired past the margin: released at its expiry", expire, held(), PAST_SKEW,
     dict(token=3, state="released", released_at=EXPIRES, action="expire", by="gc-runner",
          holder="alice")),
    ("gc of a lease expired within the margin: nothing to write", expire, held(), WITHIN_SKEW,
     None),
    ("gc of a live lease: nothing to write", expire, held(), T0 + 1_000, None),
    ("gc of a released lease: nothing to write", expire, released(), PAST_SKEW, None),
    ("gc of a lease that never was: nothing to write", expire, None, T0, None),
]


@pytest.mark.parametrize("what,decide,prev,now,expected", TABLE, ids=[row[0] for row in TABLE])
def test_a_lease_decision(what, decide, prev, now, expected):
    if isinstance(expected, type):
        with pytest.raises(expected):
            decide(prev, now, "")
        return
    plan = decide(prev, now, "")
    if expected is None:
        assert plan is None
        return
    lease = plan.lease
    got = {"grant": plan.grant, "prev_end": plan.prev_end, "holder": lease.holder.id,
           **{k: getattr(lease, k) for k in expected if hasattr(lease, k) and k != "holder"}}
    assert {k: got[k] for k in expected} == expected
    assert lease.resource == R and lease.written_at == now and lease.remote == ""


def test_the_remote_that_decided_is_written_in_every_record():
    for decide, prev in [(acquire["bob"], None), (renew["alice"], held()),
                         (release["alice"], held()), (expire, held())]:
        assert decide(prev, PAST_SKEW, "origin").lease.remote == "origin"


def test_a_refusal_says_who_holds_it_and_for_how_long():
    with pytest.raises(LeaseHeld) as exc:
        acquire["bob"](held(), T0 + 30_000, "")
    assert "held by alice (token 3) for 30.0s more, plus a 5s clock-skew margin" in exc.value.message
    assert exc.value.lease == held()


def test_a_decision_does_not_change_the_record_it_was_given():
    prev = held()
    acquire["bob --force"](prev, T0 + 1_000, "origin")
    renew["alice"](prev, T0 + 1_000, "")
    release["alice"](prev, T0 + 1_000, "")
    assert prev == held()
