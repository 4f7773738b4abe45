"""Who may write which lease record, as a table: the records of one ref (oldest first), who signed
each, which keys the reader trusts in; what the ref grants out (model.leases.fold, pure)."""

from __future__ import annotations

import pytest

from git_brat.grite.model.leases import Holder, Lease, Seal, fold

R = "task:t-1"
T0, TTL = 1_000_000, 60_000
NOW = T0 + 10_000                     # alice's lease is live
ALICE, BOB = Holder("alice"), Holder("bob")
A, B, M = "key-alice", "key-bob", "key-mallory"   # (fold compares keys; it never reads them)


def grant(holder=ALICE, token=1, action="acquire") -> Lease:
    return Lease(R, holder, token, "held", T0, T0 + TTL, TTL, T0, action=action)


def renew(year: bool = True) -> Lease:
    return Lease(R, ALICE, 1, "held", T0, T0 + (10**10 if year else TTL), TTL, T0 + 1,
                 action="renew")


def release() -> Lease:
    return Lease(R, ALICE, 1, "released", T0, T0 + TTL, TTL, T0 + 2, released_at=T0 + 2,
                 action="release")


def force(holder=BOB) -> Lease:
    return Lease(R, holder, 2, "held", T0 + 3, T0 + 10**10, TTL, T0 + 3, action="force-takeover",
                 by=holder.id)


CASES = [
    # (story, [(record, signer key or None)], trusted keys, (holder, token, state, expires_at)
    #  the ref grants, records not counted)
    ("a force-takeover nobody signed, after a signed grant", [(grant(), A), (force(), None)],
     {A}, ("alice", 1, "held", T0 + TTL), 1),
    ("a force-takeover signed by a key the reader does not trust", [(grant(), A), (force(), M)],
     {A}, ("alice", 1, "held", T0 + TTL), 1),
    ("a force-takeover signed by a trusted key", [(grant(), A), (force(), B)], {A, B},
     ("bob", 2, "held", T0 + 10**10), 0),
    ("a force-takeover by the reader's own key (its own is trusted)",
     [(grant(), B), (force(), A)], {A}, ("bob", 2, "held", T0 + 10**10), 0),
    ("the holder's renew signed by another key", [(grant(), A), (renew(), M)], set(),
     ("alice", 1, "held", T0 + TTL), 1),
    ("the holder's renew signed by its grant's key", [(grant(), A), (renew(), A)], set(),
     ("alice", 1, "held", T0 + 10**10), 0),
    ("the holder's release signed by another key", [(grant(), A), (release(), M)], set(),
     ("alice", 1, "held", T0 + TTL), 1),
    ("an unsigned release after a signed grant", [(grant(), A), (release(), None)], set(),
     ("alice", 1, "held", T0 + TTL), 1),
    ("a ref no signing writer touched: judged as before signatures",
     [(grant(), None), (force(), None)], set(), ("bob", 2, "held", T0 + 10**10), 0),
]


@pytest.mark.parametrize("story, records, trusted, expected, not_counted", CASES,
                         ids=[c[0] for c in CASES])
def test_who_signed_a_lease_record_decides_whether_it_counts(story, records, trusted, expected,
                                                             not_counted):
    shas = [f"{i:040x}".encode() for i in range(len(records))]
    keys = dict(zip(shas, (k for _r, k in records)))
    lease, forged, _grants = fold(list(zip(shas, (r for r, _k in records))), NOW, True,
                                  lambda sha: Seal(keys[sha]), trusted.__contains__)
    assert (lease.holder.id, lease.token, lease.state, lease.expires_at) == expected
    assert len(forged) == not_counted


def test_a_record_whose_signature_does_not_verify_counts_for_nothing():
    shas = [b"1" * 40, b"2" * 40]
    seals = {shas[0]: Seal(A), shas[1]: Seal(None, "signature does not verify")}
    lease, forged, _ = fold([(shas[0], grant()), (shas[1], renew())], NOW, True,
                            seals.__getitem__, lambda _k: True)
    assert lease.expires_at == T0 + TTL and "does not verify" in forged[0].reason
