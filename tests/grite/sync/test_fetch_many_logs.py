"""A fetch that brings many log refs costs one import, not one Python start per ref."""

from __future__ import annotations

import json
import re
import sys

from gritekit import forge_log
from helpers import git, grite, make_repo
from sync_helpers import clone, seeded_hub

from git_brat.grite.model import events as ev

LOGS = 40


def test_forty_fetched_logs_start_python_at_most_twice_and_are_all_imported(tmp_path):
    hub = seeded_hub(tmp_path)
    victim = clone(str(hub), tmp_path / "victim")
    git(victim, "fetch", "-q")
    # Count the interpreter starts of grite's hook: its shim names the Python it runs.
    starts = tmp_path / "starts"
    counter = tmp_path / "python"
    counter.write_text(f"#!/bin/sh\necho x >> '{starts}'\nexec '{sys.executable}' \"$@\"\n")
    counter.chmod(0o755)
    shim = victim / ".git" / "hooks" / "reference-transaction"
    text = shim.read_text()
    shim.write_text(re.sub(r"(?m)^GRITE_PY=.*$", f"GRITE_PY='{counter}'", text))

    pusher = make_repo(tmp_path / "pusher")
    for i in range(LOGS):
        # Each log its own replica's and actor's: a batch naming another replica's actor is
        # not believed (signatures), and that is not what this test is about.
        e = ev.make_event(f"{i:032x}", f"{i:016x}", 1, 0, ev.Create("issue", {"title": f"spam {i}",
                                                                       "state": "open"}))
        forge_log(pusher, f"{i:016x}", [e])
    git(pusher, "push", "-q", str(hub), "refs/grite/replicas/*:refs/grite/replicas/*")

    proc = git(victim, "fetch")   # (returns once the hook's import after the fetch is done)
    assert "Traceback" not in proc
    assert len(starts.read_text().splitlines()) <= 2
    assert not list((victim / ".git" / "grite" / "sync").glob("fetch-queue.*"))
    listed = json.loads(grite(victim, "issue", "list", "--json").out)
    assert len(listed) == LOGS
    # Every fetched log was taken in by the hook: this clone relays each of them.
    relayed = git(victim, "for-each-ref", "--format=%(refname)", "refs/grite/replicas/")
    assert len(relayed.splitlines()) == LOGS
