"""A Lamport clock far above everything its writer had seen is not believed, in any clone."""

from __future__ import annotations

import json

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from git_brat.grite.model import events as ev
from helpers import git, grite, grite_json
from sync_helpers import clone, seeded_hub
from test_signed_batches import _doctor, _forge

MALLORY = "ab" * 8


def _jumped(findings) -> list[dict]:
    return [f for f in findings if f["kind"] == "rejected-batch" and "jumps more than "
            "grite.maxClockJump=1000000000" in f["detail"]]


def test_a_batch_at_clock_2_52_after_one_at_10_is_not_believed_and_writes_go_on_with_small_clocks(tmp_path):
    hub = seeded_hub(tmp_path)
    victim = clone(str(hub), tmp_path / "victim")
    attacker = clone(str(hub), tmp_path / "attacker", init=False)
    key = Ed25519PrivateKey.generate()
    issue = "1" * 32
    first = _forge(attacker, "refs/heads/m", MALLORY, [ev.make_event(
        issue, "ba" * 8, 10, 1, ev.Create("issue", {"title": "honest so far", "state": "open"}))],
        key=key)
    honest = _forge(attacker, "refs/heads/m", MALLORY, [ev.make_event(
        issue, "ba" * 8, 12, 2, ev.Comment("a small step"))], parent=first, key=key)
    jump = _forge(attacker, "refs/heads/m", MALLORY, [ev.make_event(
        issue, "ba" * 8, 1 << 52, 3, ev.Comment("from far ahead"))], parent=honest, key=key)
    git(attacker, "push", "-q", "origin", f"refs/heads/m:refs/grite/replicas/{MALLORY}")

    grite(victim, "sync")
    shown = grite_json(victim, "issue", "show", issue)
    assert [c["body"] for c in shown["comments"]] == ["a small step"]
    rc, findings = _doctor(victim)
    assert rc == 6 and [f["subject"] for f in _jumped(findings)] == [jump]
    assert "12" in _jumped(findings)[0]["detail"]   # the highest clock its writer had seen

    # The victim's clock never took the jump: its next write is a small step on.
    grite(victim, "issue", "comment", issue, "-m", "still here")
    logged = json.loads(grite(victim, "log", "--json").out)
    assert max(e["lamport"] for e in logged if not e.get("rejected")) < 1000

    # A fresh clone decides the same.
    fresh = clone(str(hub), tmp_path / "fresh")
    grite(fresh, "sync")
    assert [f["subject"] for f in _jumped(_doctor(fresh)[1])] == [jump]


def test_a_clock_lifted_by_a_seen_tip_of_a_rejected_log_is_not_believed(tmp_path):
    hub = seeded_hub(tmp_path)
    victim = clone(str(hub), tmp_path / "victim")
    attacker = clone(str(hub), tmp_path / "attacker", init=False)
    k1, k2 = Ed25519PrivateKey.generate(), Ed25519PrivateKey.generate()
    r1, r2 = "c1" * 8, "c2" * 8
    high = _forge(attacker, "refs/heads/a", r1, [ev.make_event(
        "2" * 32, "e1" * 8, 1 << 52, 1, ev.Create("issue", {"title": "t", "state": "open"}))], key=k1)
    # A second forged replica claims to have seen the first: it lifts nothing.
    cites = _forge(attacker, "refs/heads/b", r2, [ev.make_event(
        "3" * 32, "e2" * 8, (1 << 52) + 1, 1, ev.Create("issue", {"title": "u", "state": "open"}))],
        key=k2, seen={r1: high})
    git(attacker, "push", "-q", "origin", f"refs/heads/a:refs/grite/replicas/{r1}",
        f"refs/heads/b:refs/grite/replicas/{r2}")
    grite(victim, "sync")
    assert sorted(f["subject"] for f in _jumped(_doctor(victim)[1])) == sorted([high, cites])
    assert grite_json(victim, "issue", "list") == []


def test_a_clock_the_tips_its_writer_saw_allow_is_believed_under_a_small_max_clock_jump(tmp_path):
    hub = seeded_hub(tmp_path)
    victim = clone(str(hub), tmp_path / "victim")
    git(victim, "config", "grite.maxClockJump", "100")
    attacker = clone(str(hub), tmp_path / "attacker", init=False)
    keys = [Ed25519PrivateKey.generate() for _ in range(3)]
    r1, r2, r3 = "d1" * 8, "d2" * 8, "d3" * 8

    def create(n: int, lamport: int) -> ev.Event:
        return ev.make_event(f"{n}" * 32, f"a{n}" * 8, lamport, 1,
                             ev.Create("issue", {"title": f"t{n}", "state": "open"}))
    low = _forge(attacker, "refs/heads/a", r1, [create(4, 90)], key=keys[0])
    lifted = _forge(attacker, "refs/heads/b", r2, [create(5, 150)], key=keys[1], seen={r1: low})
    alone = _forge(attacker, "refs/heads/c", r3, [create(6, 150)], key=keys[2])
    git(attacker, "push", "-q", "origin", *(f"refs/heads/{b}:refs/grite/replicas/{r}"
                                            for b, r in (("a", r1), ("b", r2), ("c", r3))))
    grite(victim, "sync")
    findings = _doctor(victim)[1]
    jumped = [f["subject"] for f in findings if f["kind"] == "rejected-batch"]
    assert jumped == [alone] and lifted not in jumped
    assert "grite.maxClockJump=100" in findings[[f["subject"] for f in findings].index(alone)]["detail"]
    assert sorted(i["title"] for i in grite_json(victim, "issue", "list")) == ["t4", "t5"]

    git(victim, "config", "grite.maxClockJump", "soon")
    proc = grite(victim, "doctor", check=False)   # (as does any read once a log moved)
    assert proc.returncode == 2 and "grite.maxClockJump is 'soon'" in proc.err
