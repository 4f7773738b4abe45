"""Fence tokens count only as the lease's own records grant them: a pushed LeaseToken event
cannot make every clone reject the genuine holder's work (s16), and real takeovers still fence."""

from __future__ import annotations

import json
import time

from git_brat.grite import locks
from git_brat.grite.log.wal import Draft
from git_brat.grite.model import events as ev
from git_brat.grite.model.state import canonical
from git_brat.grite.repo import Grite
from helpers import git, grite, grite_json
from sync_helpers import clone, seeded_hub

RES = "task:t1"
LOG_ONLY = "+refs/grite/replicas/*:refs/remotes/origin/grite/replicas/*"


def _g(repo) -> Grite:
    return Grite.open(str(repo))


def _remote(g, ttl=600.0, skew=0.2):
    """Leases decided on the hub (the default with one synced remote)."""
    return locks.settings(g.store, remote="origin", ttl=ttl, skew=skew)


def _issue(repo, title="the task") -> str:
    g = _g(repo)
    eid = ev.new_entity_id()
    g.append([Draft(eid, ev.Create("issue", {"title": title, "state": "open"}))], "create")
    grite(repo, "sync")
    return eid


def _work(repo, eid: str, title: str, holder: str) -> str:
    """A fenced write by the holder of RES (its grant's LeaseToken goes in the same batch)."""
    done = locks.append_fenced(_g(repo), RES, [Draft(eid, ev.SetFields({"title": title}))],
                               title, holder_id=holder)
    return done.events[-1].id


def _forge(repo, token: int, prev_end: int) -> str:
    """What anyone who can push writes: a LeaseToken event in their own replica's log."""
    out = _g(repo).append([Draft(locks.lock_entity(RES), ev.LeaseToken(RES, token, "x", prev_end))],
                          "forged")
    grite(repo, "sync")
    return out.events[0].id


def _forged_findings(repo) -> list[dict]:
    report = grite(repo, "doctor", "--json", check=False)
    return [f for f in json.loads(report.out)["findings"] if f["kind"] == "forged-lease"]


def _alice_leases(tmp_path, *others: str, ttl: float | None = None):
    """Clones of a seeded hub (alice, then `others`), an issue alice made, and alice holding
    the hub's lease on RES (its token event left to her first fenced write)."""
    hub = seeded_hub(tmp_path)
    repos = [clone(str(hub), tmp_path / n) for n in ("alice", *others)]
    eid = _issue(repos[0])
    ga = _g(repos[0])
    remote = _remote(ga) if ttl is None else _remote(ga, ttl=ttl)
    got = locks.acquire(ga, RES, remote, locks.holder_for(ga, "alice"), record=False)
    return repos, eid, ga, got


def test_a_forged_lease_token_does_not_reject_the_genuine_holders_events(tmp_path):
    (alice, mallory, carol), eid, _ga, got = _alice_leases(tmp_path, "mallory", "carol")
    assert (got.mode, got.token) == ("remote", 1)
    first = _work(alice, eid, "started", "alice")
    grite(alice, "sync")

    git(mallory, "fetch", "-q")
    forged = _forge(mallory, 10**9, 1)

    git(alice, "fetch", "-q")
    last = _work(alice, eid, "finished", "alice")   # written after the forged token arrived
    grite(alice, "sync")
    git(carol, "fetch", "-q")
    for repo in (alice, carol, mallory):
        git(repo, "fetch", "-q")
        state = _g(repo).state()
        assert state.entities[eid].get("title") == "finished", repo.name
        assert first not in state.rejected and last not in state.rejected
        assert state.fences[RES] == 1
        why = state.rejected[forged].reason
        assert why.startswith(f"lease token 1000000000 for {RES} is not granted by the lease's "
                              f"records (they reach token 1)")
        found = _forged_findings(repo)
        assert [f["subject"] for f in found] == [RES]
        assert "rejected, not applied" in found[0]["detail"]
        audit = {e["event"]: e for e in grite_json(repo, "log")}
        assert audit[forged]["rejected"] == why and audit[last]["rejected"] is None
        assert canonical(state) == canonical(_g(repo).cache.rebuild(full=True))


def test_a_forged_token_reusing_the_real_number_with_an_earlier_end_stales_nothing(tmp_path):
    (alice, bob, mallory), eid, ga, _got = _alice_leases(tmp_path, "bob", "mallory")
    before = int(time.time() * 1000)
    work = _work(alice, eid, "alice's work", "alice")
    locks.release(ga, RES, _remote(ga), locks.holder_for(ga, "alice"))
    grite(alice, "sync")
    git(bob, "fetch", "-q")
    gb = _g(bob)
    assert locks.acquire(gb, RES, _remote(gb), locks.holder_for(gb, "bob")).token == 2
    grite(bob, "sync")
    # Token 2 again, but "the lease before it ended" before alice wrote anything: believed,
    # it would make alice's work (written while she held the lease) stale everywhere.
    git(mallory, "fetch", "-q")
    forged = _forge(mallory, 2, before - 1000)
    for repo in (alice, bob, mallory):
        git(repo, "fetch", "-q")
        state = _g(repo).state()
        assert work not in state.rejected, repo.name
        assert state.entities[eid].get("title") == "alice's work"
        assert state.fences[RES] == 2
        assert "but the lease's records say" in state.rejected[forged].reason
        assert [f["subject"] for f in _forged_findings(repo)] == [RES]


def test_a_takeover_still_fences_the_late_holder_on_every_clone_whatever_arrives_first(tmp_path):
    hub = seeded_hub(tmp_path)
    alice, bob, carol, dave = (clone(str(hub), tmp_path / n)
                               for n in ("alice", "bob", "carol", "dave"))
    eid = _issue(alice)
    ga = _g(alice)
    first = locks.acquire(ga, RES, _remote(ga, ttl=2.0), locks.holder_for(ga, "alice"),
                          record=False)
    valid = _work(alice, eid, "alice in time", "alice")
    grite(alice, "sync")
    git(dave, "fetch", "-q")   # dave has the lease's records up to token 1
    assert _g(dave).state().entities[eid].get("title") == "alice in time"

    time.sleep(max(0.0, first.expires_at.timestamp() - time.time()) + 0.5)
    git(bob, "fetch", "-q")
    gb = _g(bob)
    took = locks.acquire(gb, RES, _remote(gb, ttl=600), locks.holder_for(gb, "bob"), record=False)
    assert (took.token, took.action) == (2, "takeover")
    bobs = _work(bob, eid, "bob took over", "bob")
    grite(bob, "sync")
    # Alice wakes up after her lease ran out and writes with the fence she had.
    late = ga.append([Draft(eid, ev.SetFields({"title": "alice too late"}), ev.Fence(RES, 1))],
                     "late").events[0].id
    grite(alice, "sync")

    # Dave fetches the logs before the lease's new record: token 2 is not believed yet (a
    # LeaseToken past the records here may be a forgery), so alice's late write still counts.
    git(dave, "fetch", "-q", "origin", LOG_ONLY)
    early = _g(dave).state()
    assert "is not granted by the lease's records (they reach token 1)" in \
        early.rejected[next(e for e, h in early.lease_held.items() if h.token == 2)].reason
    # With the lease ref the grant is believed, and alice's late write is stale.
    for repo in (alice, bob, carol, dave):
        git(repo, "fetch", "-q")
        state = _g(repo).state()
        assert state.rejected[late].reason == f"stale fencing token 1 for {RES}", repo.name
        assert valid not in state.rejected and bobs not in state.rejected
        assert state.entities[eid].get("title") == "bob took over"
        assert not state.lease_held and state.fences[RES] == 2
        assert not _forged_findings(repo)
        assert canonical(state) == canonical(_g(repo).cache.rebuild(full=True))


def test_a_token_believed_for_want_of_records_is_judged_again_when_they_arrive(tmp_path):
    (alice, mallory, carol), eid, ga, _got = _alice_leases(tmp_path, "mallory", "carol")
    work = _work(alice, eid, "alice's work", "alice")
    grite(alice, "sync")
    git(mallory, "fetch", "-q")
    forged = _forge(mallory, 10**9, 1)

    # Carol has the logs and no record of the lease at all: nothing to judge the tokens by.
    git(carol, "fetch", "-q", "origin", LOG_ONLY)
    blind = _g(carol).state()
    assert forged not in blind.rejected and list(blind.lease_basis.keys()) == [RES]
    # Once the lease's records are here, the forged token is judged by them (doctor first:
    # the cache it compares with a full replay is judged again too).
    git(carol, "fetch", "-q")
    findings = json.loads(grite(carol, "doctor", "--json", check=False).out)["findings"]
    assert [f["subject"] for f in findings if f["kind"] == "forged-lease"] == [RES]
    assert not [f for f in findings if f["kind"] == "cache-mismatch"]
    state = _g(carol).state()
    assert state.rejected[forged].reason.startswith(f"lease token 1000000000 for {RES} is not "
                                                    f"granted by the lease's records")
    assert work not in state.rejected
    assert state.entities[eid].get("title") == "alice's work"
    assert canonical(state) == canonical(_g(carol).cache.rebuild(full=True))
