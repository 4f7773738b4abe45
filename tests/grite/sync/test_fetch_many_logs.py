"""A fetch that brings many log refs costs one import, not one Python start per ref."""

from __future__ import annotations

import json
import re
import sys

from gritekit import forge_log, push_spam_logs
from helpers import git, grite, make_repo, run
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

    push_spam_logs(hub, tmp_path, LOGS)

    proc = git(victim, "fetch")   # (returns once the hook's import after the fetch is done)
    assert "Traceback" not in proc
    assert len(starts.read_text().splitlines()) <= 2
    assert not list((victim / ".git" / "grite" / "sync").glob("fetch-queue.*"))
    listed = json.loads(grite(victim, "issue", "list", "--json").out)
    assert len(listed) == LOGS
    # Every fetched log was taken in by the hook: this clone relays each of them.
    relayed = git(victim, "for-each-ref", "--format=%(refname)", "refs/grite/replicas/")
    assert len(relayed.splitlines()) == LOGS


def test_a_fetch_of_more_logs_than_max_fetch_refs_takes_in_that_many_names_the_rest_and_the_next_read_takes_them_in(tmp_path):
    hub = seeded_hub(tmp_path)
    victim = clone(str(hub), tmp_path / "victim")
    git(victim, "config", "grite.maxFetchRefs", "10")
    pusher = make_repo(tmp_path / "pusher")
    for i in range(25):
        e = ev.make_event(f"{i:032x}", f"{i:016x}", 1, 0, ev.Create(
            "issue", {"title": f"spam {i}", "state": "open"}))
        forge_log(pusher, f"{i:016x}", [e])
    git(pusher, "push", "-q", str(hub), "refs/grite/replicas/*:refs/grite/replicas/*")

    proc = run(["git", "fetch"], victim)
    assert "Traceback" not in proc.err and "not believed" not in proc.err
    # git may run the hook on a first ref alone, then on the rest: one or two imports of at
    # most 10 new logs each. Each new log is two refs here (fetched, and relayed).
    said = re.search(r"(\d+) fetched log refs were left out of this fetch's import \(over "
                     r"grite.maxFetchRefs=10 new logs[^)]*\): (.*?) and (\d+) more;", proc.err)
    assert said, proc.err
    left, named, more = int(said[1]), said[2].split(", "), int(said[3])
    assert left in (28, 30) and len(named) == 10 and more == left - 10
    assert all(re.fullmatch(r"refs/(remotes/origin/)?grite/replicas/0{14}[01][0-9a-f]", n)
               for n in named)
    # The next read takes the rest in: what it shows is never short of a fetched log.
    listed = json.loads(grite(victim, "issue", "list", "--json").out)
    assert len(listed) == 25
    assert grite(victim, "doctor", "--json", check=False).returncode == 0


def test_a_fetch_of_more_new_events_than_max_fetch_bytes_takes_in_what_fits_and_names_the_rest(tmp_path):
    hub = seeded_hub(tmp_path)
    victim = clone(str(hub), tmp_path / "victim")
    git(victim, "config", "grite.maxFetchRefs", "0")
    git(victim, "config", "grite.maxFetchBytes", "25000")
    pusher = make_repo(tmp_path / "pusher")
    for i in range(5):   # each log about 10 kB of events: two fit
        e = ev.make_event(f"{i:032x}", f"{i:016x}", 1, 0, ev.Create(
            "issue", {"title": f"big {i}", "state": "open", "body": "x" * 10_000}))
        forge_log(pusher, f"{i:016x}", [e])
    git(pusher, "push", "-q", str(hub), "refs/grite/replicas/*:refs/grite/replicas/*")

    proc = run(["git", "fetch"], victim)
    said = re.search(r"(\d+) fetched log refs were left out of this fetch's import \(over "
                     r"grite.maxFetchBytes=25000 bytes of new events\): ([^;]*);", proc.err)
    assert said, proc.err
    # one import (two logs fit, three left) or two (the first log alone, then two of four)
    assert int(said[1]) in (4, 6) and "maxFetchRefs" not in said[0]
    assert f"refs/grite/replicas/{4:016x}" in said[2]
    listed = json.loads(grite(victim, "issue", "list", "--json").out)
    assert len(listed) == 5


def test_a_bad_max_fetch_refs_is_named_and_the_fetch_still_works(tmp_path):
    hub = seeded_hub(tmp_path)
    victim = clone(str(hub), tmp_path / "victim")
    git(victim, "config", "grite.maxFetchRefs", "lots")
    pusher = make_repo(tmp_path / "pusher")
    forge_log(pusher, "ab" * 8, [ev.make_event("c" * 32, "cc" * 8, 1, 0, ev.Create(
        "issue", {"title": "one", "state": "open"}))])
    git(pusher, "push", "-q", str(hub), "refs/grite/replicas/*:refs/grite/replicas/*")
    proc = run(["git", "fetch"], victim)
    assert "grite.maxFetchRefs is 'lots'" in proc.err and "Traceback" not in proc.err
    assert git(victim, "rev-parse", f"refs/remotes/origin/grite/replicas/{'ab' * 8}")
