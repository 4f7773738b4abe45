"""A hub whose copy of this replica's log was rewritten: sync says so and names the fix that works."""

from __future__ import annotations

import json

from gritekit import forge_log
from helpers import git, grite, run
from sync_helpers import clone, replica_id, seeded_hub

from git_brat.grite.model import events as ev


def test_a_rewritten_copy_of_our_own_log_is_named_and_the_advised_push_puts_it_back(tmp_path):
    hub = seeded_hub(tmp_path)
    victim = clone(str(hub), tmp_path / "victim")
    grite(victim, "issue", "create", "CVE-2024-0001: auth bypass in login")
    grite(victim, "sync")
    rid = replica_id(victim)
    attacker = clone(str(hub), tmp_path / "attacker")
    e = ev.make_event(f"{1:032x}", f"{1:032x}", 1, 1, ev.Create("issue", {"title": "forged",
                                                                     "state": "open"}))
    forge_log(attacker, rid, [e])
    git(attacker, "-c", "core.hooksPath=/dev/null", "push", "-q", "--force", "origin",
        f"refs/grite/replicas/{rid}:refs/grite/replicas/{rid}")

    grite(victim, "issue", "create", "second report")
    for _ in range(2):   # syncing again changes nothing, and it is not advised
        proc = grite(victim, "sync", check=False)
        assert proc.returncode != 0 and "again catches up" not in proc.err
        assert "is not this log" in proc.err and "Syncing again cannot fix it" in proc.err
    advice = proc.err[proc.err.index("git push --force-with-lease="):].split("`")[0]
    run(advice.split(), victim)
    grite(victim, "sync")                                     # and now it does
    fresh = clone(str(hub), tmp_path / "fresh")
    titles = {i["title"] for i in json.loads(grite(fresh, "issue", "list", "--json").out)}
    assert titles == {"CVE-2024-0001: auth bypass in login", "second report"}
