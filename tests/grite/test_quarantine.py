"""A poisoned batch someone pushed: `doctor --fix` sets it aside for good, fetch after fetch."""

from __future__ import annotations

import json

from gritekit import forge_log
from helpers import git, grite, grite_json, issues, make_repo
from sync_helpers import clone, seeded_hub
from test_hostile_logs import FORGER, _deep_batch, _every_read_works


def _doctor(repo):
    proc = grite(repo, "doctor", "--json", check=False)
    return proc.returncode, json.loads(proc.out)["findings"]


def test_doctor_fix_quarantines_a_fetched_poisoned_batch_and_the_next_fetch_does_not_bring_it_back(tmp_path):
    hub = seeded_hub(tmp_path)
    victim = clone(str(hub), tmp_path / "victim")
    (iid,) = issues(victim, "an issue")
    git(victim, "push", "-q", "origin", "main")
    attacker = make_repo(tmp_path / "attacker")
    bad = forge_log(attacker, FORGER, _deep_batch(iid, 200_000))
    git(attacker, "push", "-q", str(hub), "refs/grite/replicas/*:refs/grite/replicas/*")

    git(victim, "fetch", "-q")
    rc, findings = _doctor(victim)
    assert rc == 6 and any(f["kind"] == "corrupt" and f["subject"] == bad for f in findings)

    grite(victim, "doctor", "--fix")
    git(victim, "fetch", "-q")
    git(victim, "fetch", "-q", "origin", "+refs/grite/*:refs/remotes/origin/grite/*")
    assert bad in git(victim, "rev-parse", f"refs/remotes/origin/grite/replicas/{FORGER}")
    _every_read_works(victim, iid)
    assert bad not in grite(victim, "issue", "list").err   # skipped without a word
    rc, findings = _doctor(victim)
    assert rc == 0
    assert not any(f["kind"] == "corrupt" for f in findings)
    assert any(f["kind"] == "quarantined" and f["subject"] == bad and "nested too deep"
               in f["detail"] for f in findings)

    # Taken back, it is read (and reported) again.
    out = grite_json(victim, "doctor", "--unquarantine", bad[:12])
    assert out["unquarantined"] == [bad]
    rc, findings = _doctor(victim)
    assert rc == 6 and any(f["kind"] == "corrupt" and f["subject"] == bad for f in findings)
    assert bad in grite(victim, "issue", "list").err


def test_unquarantine_of_a_commit_that_is_not_quarantined_says_so_and_writes_nothing(grepo):
    proc = grite(grepo, "doctor", "--unquarantine", "0123456789ab", check=False)
    assert proc.returncode == 3 and "no quarantined batch" in proc.err
    proc = grite(grepo, "doctor", "--unquarantine", "--fix", check=False)
    assert proc.returncode == 2 and "no commit id" in proc.err
    assert not (grepo / ".git" / "grite" / "quarantine.json").exists()
