"""Identity is a key: an actor belongs to the replica key that made it. A pusher who declares
another's actor in its own validly signed log, at the lowest clock there is, takes nothing."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from helpers import git, grite, grite_json, run
from sync_helpers import clone, replica_id, seeded_hub

# The pusher's tool (as in the t08 repro): in its OWN log, signed with its OWN key, declare the
# victim's actor at Lamport 0, then write an issue "by" that actor. Library calls only.
CLAIM = """
import sys, time
from git_brat.git.store import Store
from git_brat.grite.log import identity, sign
from git_brat.grite.log.refs import write_log_commit, grite_dir
from git_brat.grite.log.wal import seen_tips
from git_brat.grite.model import events as ev
actor, title = sys.argv[1:3]
s = Store.discover("."); gd = grite_dir(s); me = identity.load_replica(gd)
tip = s.refs.read(b"refs/grite/wal"); now = int(time.time() * 1000)
e1 = ev.make_event(actor, actor, 0, now, ev.Create("actor", {"email": "v@example.com",
                                                            "name": "Victim", "replica": me.id}))
e2 = ev.make_event(ev.new_entity_id(), actor, 1, now, ev.Create("issue", {
    "body": "", "state": "open", "title": title}))
payload = ev.encode_batch(ev.Batch(ev.FORMAT_VERSION, me.id, 1, [e1, e2]))
c = write_log_commit(s, payload, tip, "grite: actor.create", b"Mallory <m@example.com>",
                     now // 1000, sign.trailers(gd, payload, seen_tips(s, me.id)))
assert s.refs.cas(b"refs/grite/wal", tip, c)
"""
LIE = "Victim: both reports were false alarms"


def _claim(repo: Path, actor: str) -> None:
    run([sys.executable, "-c", CLAIM, actor, LIE], repo,
        env={"PYTHONPATH": str(Path(__file__).parents[3])})


def _current_actor(repo: Path) -> str:
    return [a for a in grite_json(repo, "actor", "list") if a["current"]][0]["id"]


def _titles(repo: Path) -> list[str]:
    return sorted(i["title"] for i in grite_json(repo, "issue", "list", "--state", "all"))


def _rejected(repo: Path) -> list[dict]:
    report = grite(repo, "doctor", "--json", check=False)
    return [f for f in json.loads(report.out)["findings"] if f["kind"] == "rejected-batch"]


def _captured_hub(tmp_path: Path):
    """A hub where the victim published two issues, then a pusher claimed the victim's actor."""
    hub = seeded_hub(tmp_path)
    victim = clone(str(hub), tmp_path / "victim")
    for title in ("CVE-2026-1234: auth bypass", "Rotate the leaked deploy key"):
        grite(victim, "issue", "create", title)
    grite(victim, "sync")
    mallory = clone(str(hub), tmp_path / "mallory")
    _claim(mallory, _current_actor(victim))
    grite(mallory, "sync")
    return hub, victim, mallory


def _strict_clone(tmp_path: Path, hub: Path, victim: Path) -> Path:
    """A fresh clone that believes only the victim's key (requireSigned + allowed signers)."""
    key = (victim / ".git" / "grite" / "keys" / "replica.ed25519.pub").read_text().strip()
    (tmp_path / "allowed_signers").write_text(f"{key} victim\n")
    strict = clone(str(hub), tmp_path / "strict", init=False)
    git(strict, "config", "grite.requireSigned", "true")
    git(strict, "config", "grite.allowedSignersFile", str(tmp_path / "allowed_signers"))
    grite(strict, "init")
    grite(strict, "rebuild")
    return strict


WANTED = ["CVE-2026-1234: auth bypass", "Rotate the leaked deploy key"]


def test_an_actor_declared_again_at_lamport_zero_by_a_pusher_stays_the_victims_on_a_fresh_clone(
        tmp_path):
    hub, victim, mallory = _captured_hub(tmp_path)
    fresh = clone(str(hub), tmp_path / "fresh")
    assert _titles(fresh) == WANTED
    authors = {grite_json(fresh, "issue", "show", i["id"])["author"]
               for i in grite_json(fresh, "issue", "list", "--state", "all")}
    assert authors == {"Test User"}   # the victim's name (the claim says "Victim")
    # doctor blames the pusher's log, and only it
    rejected = _rejected(fresh)
    assert rejected and {f["detail"].split("(replica ")[1][:16] for f in rejected} == {
        replica_id(mallory)}
    assert "binds it to another key" in rejected[0]["detail"]
    git(victim, "fetch", "-q")
    assert _titles(victim) == WANTED


def test_with_require_signed_and_only_the_victims_key_trusted_the_victims_history_stays(tmp_path):
    hub, victim, _mallory = _captured_hub(tmp_path)
    strict = _strict_clone(tmp_path, hub, victim)
    assert _titles(strict) == WANTED
    assert _rejected(strict)


def test_a_new_actor_is_bound_to_its_replicas_key_and_speaks_on_every_clone(tmp_path):
    from git_brat.grite.log import sign
    hub = seeded_hub(tmp_path)
    alice = clone(str(hub), tmp_path / "alice")
    made = grite_json(alice, "actor", "new", "agent-1", "--use")
    key = (alice / ".git" / "grite" / "keys" / "replica.ed25519.pub").read_text().strip()
    assert sign.is_key_bound(made["id"]) and sign.binds(key, made["id"])
    grite(alice, "issue", "create", "by the agent")
    grite(alice, "sync")
    bob = clone(str(hub), tmp_path / "bob")
    assert _titles(bob) == ["by the agent"] and not _rejected(bob)


# An actor made before actors were keys: a 16-digit id the victim's clone declared in its log.
LEGACY = """
import os, msgspec
from git_brat.grite.init import record_actor
from git_brat.grite.log import identity
from git_brat.grite.log.refs import grite_dir
from git_brat.grite.repo import Grite
g = Grite.open(".")
where = grite_dir(g.store)
a = identity.Actor(os.urandom(8).hex(), "Old Victim", "v@example.com", 1, g.identity.replica.id)
with open(os.path.join(where, "actors", a.id + ".json"), "wb") as f:
    f.write(msgspec.json.encode(a))
identity.use_actor(where, a.id)
record_actor(Grite.open("."), a)
print(a.id)
"""


def _legacy_victim(tmp_path: Path):
    """A hub where the victim, acting as an actor made before keys, published two issues."""
    hub = seeded_hub(tmp_path)
    victim = clone(str(hub), tmp_path / "victim")
    old = run([sys.executable, "-c", LEGACY], victim,
              env={"PYTHONPATH": str(Path(__file__).parents[3])}).out.strip()
    for title in WANTED:
        grite(victim, "issue", "create", title)
    grite(victim, "sync")
    return hub, victim, old


def test_an_actor_made_before_keys_is_not_taken_by_an_untrusted_key_under_require_signed(
        tmp_path):
    hub, victim, old = _legacy_victim(tmp_path)
    assert len(old) == 16
    mallory = clone(str(hub), tmp_path / "mallory")
    _claim(mallory, old)
    grite(mallory, "sync")
    strict = _strict_clone(tmp_path, hub, victim)
    assert _titles(strict) == WANTED
    # the victim's own clone keeps the actor (its own key settles the dispute there)
    grite(victim, "sync")
    authors = _authors(victim)
    assert [authors[t] for t in WANTED] == ["Old Victim", "Old Victim"]
    assert authors[LIE] != "Old Victim"


def _legacy_victim_and_claim(tmp_path: Path):
    """_legacy_victim's hub, where a pusher then declared the victim's actor in its own signed
    log at Lamport 0 and spoke as it."""
    hub, victim, old = _legacy_victim(tmp_path)
    mallory = clone(str(hub), tmp_path / "mallory")
    _claim(mallory, old)
    grite(mallory, "sync")
    return hub, victim, mallory, old


def _authors(repo: Path) -> dict[str, str]:
    return {i["title"]: grite_json(repo, "issue", "show", i["id"])["author"]
            for i in grite_json(repo, "issue", "list", "--state", "all")}


def _findings(repo: Path, kind: str) -> list[dict]:
    report = json.loads(grite(repo, "doctor", "--json", check=False).out)
    return [f for f in report["findings"] if f["kind"] == kind]


def test_an_actor_made_before_keys_that_a_pusher_claims_is_disputed_and_no_history_is_lost(
        tmp_path):
    hub, victim, mallory, old = _legacy_victim_and_claim(tmp_path)
    fresh = clone(str(hub), tmp_path / "fresh")
    authors = _authors(fresh)
    assert sorted(authors) == sorted(WANTED + [LIE])   # the victim's history survives
    # each side's words are shown as its own replica's, never under the actor's name
    assert f"replica {replica_id(mallory)[:8]}" in authors[LIE]
    for title in WANTED:
        assert f"replica {replica_id(victim)[:8]}" in authors[title]
    assert not {"Victim", "Old Victim"} & set(authors.values())
    # neither log is dropped; doctor names the dispute, both parties, and how it ends
    assert not _rejected(fresh)
    [dispute] = _findings(fresh, "disputed-actor")
    assert dispute["subject"] == old
    assert replica_id(victim) in dispute["detail"] and replica_id(mallory) in dispute["detail"]
    assert "git grite actor new NAME --use" in dispute["detail"]
    assert not json.loads(grite(fresh, "doctor", "--json", check=False).out)["ok"]
    # the victim learns it too, though its own clone settles it (its key): others do not
    git(victim, "fetch", "-q")
    assert [x["id"] for x in grite_json(victim, "actor", "list") if x["disputed"]] == [old]
    [settled] = _findings(victim, "settled-actor")
    assert "git grite actor new NAME --use" in settled["detail"]


def test_a_disputed_actor_is_settled_on_a_clone_by_the_one_claimant_whose_key_it_trusts(
        tmp_path):
    hub, victim, mallory, old = _legacy_victim_and_claim(tmp_path)
    # the victim's own clone trusts its own key: its words keep the actor, the pusher's do not
    git(victim, "fetch", "-q")
    authors = _authors(victim)
    assert [authors[t] for t in WANTED] == ["Old Victim", "Old Victim"]
    assert f"replica {replica_id(mallory)[:8]}" in authors[LIE]
    # a fresh clone that trusts the victim's replica's key settles it the same way
    fresh = clone(str(hub), tmp_path / "fresh")
    grite(fresh, "trust", "add", replica_id(victim))
    authors = _authors(fresh)
    assert [authors[t] for t in WANTED] == ["Old Victim", "Old Victim"]
    assert f"replica {replica_id(mallory)[:8]}" in authors[LIE]
    assert not _findings(fresh, "disputed-actor")
    [settled] = _findings(fresh, "settled-actor")
    assert settled["subject"] == old and replica_id(victim) in settled["detail"]


def test_no_writer_speaks_under_the_id_that_shows_a_disputed_actors_words(tmp_path):
    from git_brat.grite.model.disputes import attributed_id
    hub, victim, mallory, old = _legacy_victim_and_claim(tmp_path)
    # the pusher writes as the id that would show the VICTIM's replica speaking
    _claim(mallory, attributed_id(old, replica_id(victim)))
    grite(mallory, "sync")
    fresh = clone(str(hub), tmp_path / "fresh")
    assert sorted(_authors(fresh)) == sorted(WANTED + [LIE])   # (its second claim: rejected)
    assert any("no writer speaks as it" in f["detail"] for f in _rejected(fresh))


def test_a_clone_that_showed_an_actor_as_the_victims_shows_it_disputed_once_a_claim_arrives(
        tmp_path):
    hub, victim, old = _legacy_victim(tmp_path)
    early = clone(str(hub), tmp_path / "early")   # its cache holds the victim's words as the actor's
    assert set(_authors(early).values()) == {"Old Victim"}
    mallory = clone(str(hub), tmp_path / "mallory")
    _claim(mallory, old)
    grite(mallory, "sync")
    synced = grite(early, "sync")
    told = synced.out + synced.err
    assert f"actor {old} is disputed" in told and replica_id(mallory) in told
    authors = _authors(early)
    assert sorted(authors) == sorted(WANTED + [LIE])
    assert "Old Victim" not in authors.values()   # the words it had applied moved as well
    assert not _findings(early, "cache-mismatch") and _findings(early, "disputed-actor")


def test_a_clone_that_sees_a_dispute_writes_no_snapshot_another_clone_could_adopt(tmp_path):
    """Replay on a clone with a dispute shows the actor's words as their writers'; a clone
    that sees none (its requireSigned refuses the claimant) would take that reading from a
    snapshot made there. So no snapshot is made under a dispute, asked for or due."""
    hub, victim, mallory, old = _legacy_victim_and_claim(tmp_path)
    fresh = clone(str(hub), tmp_path / "fresh")
    assert _findings(fresh, "disputed-actor")
    asked = grite(fresh, "snapshot", check=False)
    assert asked.returncode != 0 and "disputed" in asked.err and "doctor" in asked.err
    # due by grite.snapshotEvery, written by the import's replay and published by a push: none
    git(fresh, "config", "grite.snapshotEvery", "1000")
    items = [{"title": f"bulk {i}"} for i in range(1100)]
    (tmp_path / "bulk.json").write_text(json.dumps(items))
    grite(fresh, "import", str(tmp_path / "bulk.json"))
    grite(fresh, "rebuild")
    git(fresh, "push", "-q", "origin", "main")
    assert git(fresh, "for-each-ref", "refs/grite/snapshots/") == ""
    assert "refs/grite/snapshots/" not in git(fresh, "ls-remote", str(hub))
    # The clone whose own key settles the dispute is one with a dispute too (settled its way).
    git(victim, "fetch", "-q")
    assert grite(victim, "snapshot", check=False).returncode != 0
