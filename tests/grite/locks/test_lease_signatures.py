"""Lease records are signed like batches: an override is believed only from a key the reader
trusts, a holder's own records only from the key that signed its grant. A pusher's records,
however well formed, take no lease."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from helpers import git, grite, grite_json, run
from sync_helpers import clone, replica_id, seeded_hub

REF = "refs/grite/locks/task/t1"
YEAR = 365 * 86400 * 1000

# A record written by hand onto the hub's lease ref (a fast-forward), signed with the writer's
# OWN key when asked: what any pusher can do with the library.
FORGE = """
import json, sys
from git_brat.git.store import Store
from git_brat.grite.log import sign
from git_brat.grite.log.refs import grite_dir
ref, change, signed, parent = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3] == "1", sys.argv[4]
s = Store.discover(".")
payload = json.loads(s.objects.read_record(parent.encode(), b"lease")[0])
payload.update(change)
data = json.dumps(payload, separators=(",", ":")).encode()
body = sign.Signer(grite_dir(s)).lease_trailers(data, parent.encode()) if signed else ""
c = s.objects.write_record_commit(b"lease", data, parent.encode(), "forged", b"M <m@x>", 1, body)
print(c.decode())
"""


def _push_record(repo: Path, signed: bool = False, parent: str | None = None, **change) -> str:
    git(repo, "fetch", "-q", "origin", f"+{REF}:{REF}")
    parent = parent or git(repo, "rev-parse", REF)
    commit = run([sys.executable, "-c", FORGE, REF, json.dumps(change), "1" if signed else "0",
                  parent], repo, env={"PYTHONPATH": str(Path(__file__).parents[3])}).out.strip()
    git(repo, "push", "-q", "--force", "origin", f"{commit}:{REF}")
    return commit


def _takeover(now: int) -> dict:
    return dict(holder={"id": "session:ffffffffffffffffffffffffffffffff", "actor": "m",
                        "session": "ffffffffffffffffffffffffffffffff", "host": "build-7",
                        "pid": 4242},
                token=2, state="held", acquired_at=now, expires_at=now + YEAR, ttl_ms=YEAR,
                written_at=now, action="force-takeover", by="Victim")


def _lock(repo: Path, *args, **kw):
    return grite(repo, "lock", *args, "--remote", "origin", **kw)


def _status(repo: Path) -> list[tuple[str, int]]:
    shown = _lock(repo, "status", "task:t1", "--json")
    return [(s["holder"], s["token"]) for s in json.loads(shown.out)]


def _alice_holds(tmp_path: Path):
    hub = seeded_hub(tmp_path)
    alice, bob, mallory = (clone(str(hub), tmp_path / n) for n in ("alice", "bob", "mallory"))
    _lock(alice, "acquire", "task:t1", "--holder", "alice", "--ttl", "600")
    return hub, alice, bob, mallory


def test_a_forged_force_takeover_changes_nothing_signed_or_not(tmp_path):
    hub, alice, bob, mallory = _alice_holds(tmp_path)
    now = int(time.time() * 1000)
    unsigned = _push_record(mallory, **_takeover(now))
    assert _status(bob) == [("alice", 1)]
    signed = _push_record(mallory, signed=True, **_takeover(now))   # by mallory's own key
    # the running session keeps its lease: its heartbeat renews it, on top of the forged record
    renewed = grite_json(alice, "lock", "renew", "task:t1", "--remote", "origin",
                         "--holder", "alice")
    assert (renewed["holder"], renewed["token"]) == ("alice", 1)
    fresh = clone(str(hub), tmp_path / "fresh")
    for repo in (alice, bob, fresh):
        assert _status(repo) == [("alice", 1)], repo
    refused = _lock(bob, "acquire", "task:t1", "--holder", "bob", check=False)
    assert refused.returncode == 5 and "held by alice" in refused.err
    report = grite(bob, "doctor", "--json", check=False)
    forged = {f["subject"]: f["detail"] for f in json.loads(report.out)["findings"]
              if f["kind"] == "forged-lease"}
    assert "an unsigned force-takeover" in forged[unsigned]
    assert "did not name as one that may override its lease" in forged[signed]


def test_a_holders_renew_or_release_signed_by_another_key_is_not_believed(tmp_path):
    hub, alice, bob, mallory = _alice_holds(tmp_path)
    now = int(time.time() * 1000)
    # "alice" renews for a year, then releases: records only alice's key may write
    _push_record(mallory, signed=True, expires_at=now + YEAR, ttl_ms=YEAR, written_at=now,
                 action="renew")
    release = _push_record(mallory, state="released", released_at=now, written_at=now,
                           action="release")
    refused = _lock(bob, "acquire", "task:t1", "--holder", "bob", check=False)
    assert refused.returncode == 5 and "held by alice" in refused.err
    shown = json.loads(_lock(bob, "status", "task:t1", "--json").out)[0]
    assert shown["remaining"] < 700   # not the year the forged renew says
    # doctor and brat status, which skip released leases unread, still see it held
    for _ in range(2):
        report = grite(bob, "doctor", "--json", check=False)
        forged = [f["subject"] for f in json.loads(report.out)["findings"]
                  if f["kind"] == "forged-lease"]
        assert release in forged


def test_a_genuine_record_of_the_holders_copied_up_the_chain_signs_nothing_there(tmp_path):
    hub, alice, bob, mallory = _alice_holds(tmp_path)
    _lock(alice, "renew", "task:t1", "--holder", "alice", "--ttl", "1")
    git(mallory, "fetch", "-q", "origin", f"+{REF}:{REF}")
    short = git(mallory, "rev-parse", REF)
    _lock(alice, "renew", "task:t1", "--holder", "alice", "--ttl", "600")
    git(mallory, "fetch", "-q", "origin", f"+{REF}:{REF}")
    # the one-second renew again, byte for byte, on top of the ten-minute one
    message = git(mallory, "log", "-1", "--format=%B", short)
    copy = git(mallory, "commit-tree", f"{short}^{{tree}}", "-p", git(mallory, "rev-parse", REF),
               "-m", message)
    git(mallory, "push", "-q", "origin", f"{copy}:{REF}")
    time.sleep(7)   # past the copy's expiry and the 5 s skew margin
    refused = _lock(bob, "acquire", "task:t1", "--holder", "bob", check=False)
    assert refused.returncode == 5 and "held by alice" in refused.err


def test_a_forced_takeover_by_a_key_the_holder_named_counts_on_every_clone(tmp_path):
    hub, alice, bob, mallory = _alice_holds(tmp_path)
    ops = grite_json(alice, "lock", "acquire", "task:t1", "--remote", "origin", "--holder", "ops",
                     "--force")
    assert (ops["holder"], ops["token"], ops["last_action"]) == ("ops", 2, "force-takeover")
    assert _status(alice) == [("ops", 2)]
    refused = _lock(alice, "renew", "task:t1", "--holder", "alice", check=False)
    assert refused.returncode != 0 and "held by ops" in refused.err
    # bob trusts no key of alice's, but alice's clone named its own key as one that may
    # override its lease: every clone sees the same holder
    assert _status(bob) == [("ops", 2)]


def test_a_force_by_a_key_the_holder_did_not_name_is_refused_until_its_next_renewal(tmp_path):
    hub, alice, bob, mallory = _alice_holds(tmp_path)
    grite(bob, "sync")        # bob's log (and key) reach the hub, and alice
    grite(alice, "sync")
    carol = clone(str(hub), tmp_path / "carol")
    refused = _lock(bob, "acquire", "task:t1", "--holder", "bob", "--force", check=False)
    assert refused.returncode == 5 and "does not let this clone's key" in refused.err
    assert "nothing was written" in refused.err and replica_id(bob) in refused.err
    assert _status(alice) == _status(bob) == [("alice", 1)]
    # alice's clone trusts bob's key from now on: it names it when it next renews its lease
    grite(alice, "trust", "add", replica_id(bob))
    _lock(alice, "renew", "task:t1", "--holder", "alice")
    took = grite_json(bob, "lock", "acquire", "task:t1", "--remote", "origin", "--holder", "bob",
                      "--force")
    assert (took["holder"], took["token"]) == ("bob", 2)
    for repo in (alice, bob, carol):   # carol trusts no key of bob's: the holder's word counts
        assert _status(repo) == [("bob", 2)], repo

