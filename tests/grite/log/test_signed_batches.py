"""A replica speaks only for itself: batches are signed, a replica's ref holds only its batches
and actors, and a log erased on the hub shows, even on a fresh clone."""

from __future__ import annotations

import base64
import json
import os
import stat
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from git_brat.grite.log import sign
from git_brat.grite.model import events as ev
from helpers import git, grite, grite_json, run
from sync_helpers import clone, refs, replica_id, seeded_hub


def _forge(repo: Path, ref: str, replica: str, events: list[ev.Event], parent: str | None = None,
           key: Ed25519PrivateKey | None = None, seen: dict[str, str] | None = None) -> str:
    """What any pusher can do with git plumbing: a log commit holding any batch, signed by any
    key (or none); `ref` moves to it."""
    payload = ev.encode_batch(ev.Batch(1, replica, max(e.lamport for e in events), events))
    blob = git(repo, "hash-object", "-w", "--stdin", input=payload)
    tree = git(repo, "mktree", input=f"100644 blob {blob}\tevents\n")
    message = "grite: forged\n"
    if key is not None:
        pub = base64.b64encode(key.public_key().public_bytes_raw()).decode()
        seen = seen or {}
        sig = base64.b64encode(key.sign(sign._signed_bytes(payload, pub, seen))).decode()
        message += (f"\nGrite-Key: {pub}\n" + "".join(f"Grite-Seen: {r} {s}\n" for r, s in seen.items())
                    + f"Grite-Sig: {sig}\n")
    commit = git(repo, "commit-tree", tree, *(["-p", parent] if parent else []), "-m", message)
    git(repo, "update-ref", ref, commit)
    return commit


def _actor(repo: Path) -> str:
    return [a for a in grite_json(repo, "actor", "list") if a["current"]][0]["id"]


def _doctor(repo: Path) -> tuple[int, list[dict]]:
    proc = grite(repo, "doctor", "--json", check=False)
    return proc.returncode, json.loads(proc.out)["findings"]


def _victim_and_attacker(tmp_path: Path):
    hub = seeded_hub(tmp_path)
    victim = clone(str(hub), tmp_path / "victim")
    issue = grite_json(victim, "issue", "create", "Rotate the prod DB password")["id"]
    grite(victim, "sync")
    attacker = clone(str(hub), tmp_path / "attacker", init=False)
    git(attacker, "fetch", "-q", "origin", "+refs/grite/*:refs/remotes/origin/grite/*")
    return hub, victim, attacker, issue


def _state(repo: Path, issue: str) -> str:
    return grite_json(repo, "issue", "show", issue)["state"]


def test_a_batch_pushed_in_the_victims_name_is_not_believed_and_doctor_names_its_ref(tmp_path):
    hub, victim, attacker, issue = _victim_and_attacker(tmp_path)
    va, vr = _actor(victim), replica_id(victim)
    close = ev.make_event(issue, va, 1000, 1, ev.SetFields({"state": "closed"}))
    _forge(attacker, "refs/heads/f", vr, [close])
    git(attacker, "push", "-q", "origin", "refs/heads/f:refs/grite/replicas/0000000000000000")

    grite(victim, "sync")
    assert _state(victim, issue) == "open"
    rc, findings = _doctor(victim)
    rejected = [f for f in findings if f["kind"] == "rejected-batch"]
    assert rc != 0 and rejected
    assert "0000000000000000" in rejected[0]["detail"] and vr in rejected[0]["detail"]
    # kept, never deleted: the forged commit is still in the ref it came in
    assert "refs/grite/replicas/0000000000000000" in refs(victim, "refs/grite/replicas/")

    fresh = clone(str(hub), tmp_path / "fresh")
    assert _state(fresh, issue) == "open"


def test_events_naming_another_replicas_actor_are_not_believed(tmp_path):
    hub, victim, attacker, issue = _victim_and_attacker(tmp_path)
    va = _actor(victim)
    name = ev.make_event(va, va, 2000, 1, ev.SetFields({"name": "Mallory"}))
    comment = ev.make_event(issue, va, 2001, 1, ev.Comment("the password is hunter2"))
    # its own replica id, its own key, and still the victim's actor
    _forge(attacker, "refs/heads/f", "0000000000000001", [name, comment],
           key=Ed25519PrivateKey.generate())
    git(attacker, "push", "-q", "origin", "refs/heads/f:refs/grite/replicas/0000000000000001")

    fresh = clone(str(hub), tmp_path / "fresh")
    for repo in (victim, fresh):
        grite(repo, "sync")
        log = grite(repo, "log").out
        assert "Mallory" not in log and "hunter2" not in grite(repo, "issue", "show", issue).out
        _rc, findings = _doctor(repo)
        assert any(f["kind"] == "rejected-batch" and va in f["detail"] for f in findings)


def test_a_batch_appended_to_the_victims_ref_under_another_key_is_not_believed(tmp_path):
    hub, victim, attacker, issue = _victim_and_attacker(tmp_path)
    va, vr = _actor(victim), replica_id(victim)
    tip = refs(attacker, f"refs/remotes/origin/grite/replicas/{vr}")[
        f"refs/remotes/origin/grite/replicas/{vr}"]
    close = ev.make_event(issue, va, 3000, 1, ev.SetFields({"state": "closed"}))
    _forge(attacker, "refs/heads/f", vr, [close], parent=tip, key=Ed25519PrivateKey.generate())
    git(attacker, "push", "-q", "origin", f"refs/heads/f:refs/grite/replicas/{vr}")
    unsigned = ev.make_event(issue, va, 3001, 1, ev.SetFields({"state": "closed"}))
    _forge(attacker, "refs/heads/g", vr, [unsigned], parent=tip)
    git(attacker, "push", "-q", "origin", "refs/heads/g:refs/grite/replicas/ffffffffffffffff")

    early = clone(str(hub), tmp_path / "early")
    fresh = clone(str(hub), tmp_path / "fresh")
    for repo in (early, fresh, victim):
        grite(repo, "sync", "--no-push")
        assert _state(repo, issue) == "open", repo
        _rc, findings = _doctor(repo)
        assert any(f["kind"] == "rejected-batch" for f in findings), repo


def test_a_fresh_clone_says_a_replicas_log_is_shorter_than_others_saw(tmp_path):
    hub, victim, attacker, issue = _victim_and_attacker(tmp_path)
    vr = replica_id(victim)
    grite_json(victim, "issue", "create", "CVE-2024-0001: auth bypass")
    grite(victim, "sync")
    bystander = clone(str(hub), tmp_path / "bystander")   # sees the victim's whole log
    grite(bystander, "issue", "create", "unrelated")
    grite(bystander, "sync")
    early = clone(str(hub), tmp_path / "early")
    # the attacker replaces the victim's published log with a short one of its own
    va = _actor(victim)
    _forge(attacker, "refs/heads/f", vr, [ev.make_event(va, va, 1, 1, ev.Create(
        "actor", {"name": "Victim", "email": "v@example.com", "replica": vr}))])
    git(attacker, "push", "-q", "--force", "origin", f"refs/heads/f:refs/grite/replicas/{vr}")

    fresh = clone(str(hub), tmp_path / "fresh")
    rc, findings = _doctor(fresh)
    erased = [f for f in findings if f["kind"] == "erased-log"]
    assert rc != 0 and erased and erased[0]["subject"] == vr
    assert replica_id(bystander) in erased[0]["detail"]
    # a clone that fetches the erasure is told so by the sync that fetched it
    assert "rewound or erased" in grite(early, "sync", "--no-push").out


def test_require_signed_refuses_unknown_signers_until_trusted(tmp_path):
    hub, victim, attacker, issue = _victim_and_attacker(tmp_path)
    helper = clone(str(hub), tmp_path / "helper")
    other = grite_json(helper, "issue", "create", "from a colleague")["id"]
    grite(helper, "sync")
    grite(victim, "sync")
    assert other in [i["id"] for i in grite_json(victim, "issue", "list", "--state", "all")]
    git(victim, "config", "grite.requireSigned", "true")
    grite(victim, "rebuild")
    grite(victim, "sync")
    ids = [i["id"] for i in grite_json(victim, "issue", "list", "--state", "all")]
    assert other not in ids and issue in ids
    listed = grite_json(victim, "trust", "list")
    assert listed["require_signed"] and listed["rejected"] >= 1

    hr = replica_id(helper)
    added = grite_json(victim, "trust", "add", hr)
    assert added["replica"] == hr
    ids = [i["id"] for i in grite_json(victim, "issue", "list", "--state", "all")]
    assert other in ids
    grite(victim, "trust", "remove", hr)
    ids = [i["id"] for i in grite_json(victim, "issue", "list", "--state", "all")]
    assert other not in ids

    # or named in a file, like git's gpg.ssh.allowedSignersFile
    key = [k for k in grite_json(victim, "trust", "list")["keys"] if k["replica"] == hr][0]["key"]
    allowed = tmp_path / "allowed_signers"
    allowed.write_text(f"# team keys\n{key} {hr}\n")
    git(victim, "config", "grite.allowedSignersFile", str(allowed))
    grite(victim, "rebuild")
    ids = [i["id"] for i in grite_json(victim, "issue", "list", "--state", "all")]
    assert other in ids


def test_unsigned_logs_from_before_signatures_still_replay_and_are_counted(tmp_path):
    hub, victim, attacker, issue = _victim_and_attacker(tmp_path)
    old = ev.make_event("a" * 32, "0123456789abcdef", 5, 1, ev.Create("issue", {"title": "old",
                                                                              "state": "open"}))
    _forge(attacker, "refs/heads/f", "1111111111111111", [old])
    git(attacker, "push", "-q", "origin", "refs/heads/f:refs/grite/replicas/1111111111111111")
    grite(victim, "sync")
    titles = [i["title"] for i in grite_json(victim, "issue", "list")]
    assert "old" in titles
    rc, findings = _doctor(victim)
    assert rc == 0 and any(f["kind"] == "unsigned" for f in findings)


def test_the_replica_key_is_private_to_the_clone(tmp_path):
    hub = seeded_hub(tmp_path)
    repo = clone(str(hub), tmp_path / "r")
    keys = repo / ".git" / "grite" / "keys"
    key = keys / "replica.ed25519"
    assert stat.S_IMODE(os.stat(keys).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(key).st_mode) == 0o600
    grite(repo, "issue", "create", "x")
    grite(repo, "sync")
    raw = key.read_bytes()
    # nothing pushed holds it; every batch carries the public part and a signature
    dump = run(["git", "cat-file", "--batch-all-objects", "--batch"], hub).stdout
    assert dump
    assert raw not in dump
    message = git(hub, "log", "-1", "--format=%B", f"refs/grite/replicas/{replica_id(repo)}")
    assert "Grite-Key: " in message and "Grite-Sig: " in message


def test_a_hub_set_up_by_brat_refuses_to_rewrite_or_delete_a_replicas_log(tmp_path):
    from helpers import brat
    from sync_helpers import bare_hub
    hub = bare_hub(tmp_path / "hub.git")
    brat(hub, "init", "--hub")
    seed = clone(str(hub), tmp_path / "seed", init=False)
    git(seed, "commit", "-q", "--allow-empty", "-m", "init")
    git(seed, "push", "-q", "origin", "main")
    victim = clone(str(hub), tmp_path / "victim")
    grite(victim, "issue", "create", "x")
    grite(victim, "sync")
    ref = f"refs/grite/replicas/{replica_id(victim)}"
    before = refs(hub, ref)[ref]
    attacker = clone(str(hub), tmp_path / "attacker", init=False)
    forged = _forge(attacker, "refs/heads/f", replica_id(victim), [ev.make_event(
        "b" * 32, "0123456789abcdef", 1, 1, ev.Create("issue", {"title": "y"}))])
    push = run(["git", "push", "--force", "origin", f"{forged}:{ref}"], attacker, check=False)
    assert push.returncode != 0 and "append-only" in push.err
    delete = run(["git", "push", "origin", "--delete", ref], attacker, check=False)
    assert delete.returncode != 0 and "append-only" in delete.err
    assert refs(hub, ref)[ref] == before
    # appends still go through, and branches are the hub owner's business
    grite(victim, "issue", "create", "z")
    assert "published" in grite(victim, "sync").out or refs(hub, ref)[ref] != before
    git(attacker, "push", "-q", "--force", "origin", f"{forged}:refs/heads/scratch")
