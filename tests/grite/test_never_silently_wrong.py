"""Issue 10: a demanding user's findings. Every read that can come up short says so; every
repair leaves a repository git itself is happy with; state travels along any chain of clones."""

from __future__ import annotations

import json
import os

import pytest

from helpers import brat, git, grite, grite_json, run
from gritekit import read_only


def _loose(repo, sha: str):
    return repo / ".git" / "objects" / sha[:2] / sha[2:]


def test_a_missing_log_commit_is_reported_even_with_a_commit_graph(grepo):
    git(grepo, "commit-graph", "write", "--reachable")
    for i in range(1, 6):
        grite(grepo, "issue", "create", f"i{i}")
    gone = git(grepo, "rev-parse", "refs/grite/wal~2")
    os.unlink(_loose(grepo, gone))
    (grepo / ".git" / "grite" / "cache").exists() and run(
        ["rm", "-rf", str(grepo / ".git" / "grite" / "cache")], grepo)
    proc = grite(grepo, "issue", "list", "--json")
    assert gone in proc.err and proc.err.startswith("warning:")
    doc = grite(grepo, "doctor", "--json", check=False)
    assert doc.returncode == 6
    assert any(f["kind"] == "corrupt" and f["subject"] == gone
               for f in json.loads(doc.out)["findings"])
    # With the cache warm, the next command still warns.
    assert gone in grite(grepo, "issue", "list").err


def _objects_of(repo, commit: str) -> list[str]:
    return [commit, git(repo, "rev-parse", f"{commit}^{{tree}}"), git(repo, "rev-parse", f"{commit}:events")]


def test_doctor_fix_gets_gc_fsck_and_appends_working_after_objects_were_pruned(grepo):
    ids = [grite(grepo, "issue", "create", t).out.strip() for t in ("a", "b", "c", "d")]
    assert len(grite_json(grepo, "issue", "list")) == 4   # what this clone showed
    tip = git(grepo, "rev-parse", "refs/grite/wal")
    middle = git(grepo, "rev-parse", "refs/grite/wal~2")
    middle_blob = git(grepo, "rev-parse", f"{middle}:events")
    # What `git gc --prune=now` during a write does: the objects the writer had just written
    # are gone when its ref update lands.
    for sha in _objects_of(grepo, tip):
        os.unlink(_loose(grepo, sha))
    # And a record further back lost its events blob.
    os.unlink(_loose(grepo, middle_blob))
    assert run(["git", "gc", "-q"], grepo, check=False).returncode != 0
    fix = grite(grepo, "doctor", "--fix", "--json", check=False)
    assert fix.returncode == 0, fix.out + fix.err
    report = json.loads(fix.out)
    lost = [f for f in report["findings"] if f["kind"] == "lost"]
    # The records, and (from what this clone last showed) the issues they held.
    assert {f["subject"] for f in lost} == {tip, middle, ids[1], ids[3]}
    assert '"d"' in " ".join(f["detail"] for f in lost)   # says what was in it, where it can
    run(["git", "fsck", "--no-dangling"], grepo)
    run(["git", "gc", "-q"], grepo)
    titles = {i["title"] for i in grite_json(grepo, "issue", "list")}
    assert titles == {"a", "c"}
    grite(grepo, "issue", "create", "e")
    assert grite(grepo, "doctor").returncode == 0
    assert {i["title"] for i in grite_json(grepo, "issue", "list")} == {"a", "c", "e"}


def test_state_travels_along_a_chain_of_clones_and_hubs_both_ways(tmp_path):
    from sync_helpers import bare_hub, clone, issue_json, seeded_hub
    hub1 = seeded_hub(tmp_path, "hub1.git")
    hub2 = bare_hub(tmp_path / "hub2.git")
    a = clone(str(hub1), tmp_path / "a")
    b = clone(str(hub1), tmp_path / "b")
    git(b, "remote", "add", "hub2", str(hub2))
    grite(b, "remote", "add-sync", "hub2")
    git(b, "push", "-q", "hub2", "main")
    c = clone(str(hub2), tmp_path / "c")
    iid = grite(a, "issue", "create", "from a").out.strip()
    grite(a, "sync")
    grite(b, "sync")                     # b relays a's log to hub2
    grite(c, "sync")
    assert [i["title"] for i in grite_json(c, "issue", "list")] == ["from a"]
    grite(c, "issue", "update", iid, "--title", "renamed by c")
    grite(c, "issue", "close", iid)
    git(c, "push", "-q")                 # plain push publishes c's log to hub2
    grite(b, "sync")                     # b relays c's log to hub1
    grite(a, "sync")
    assert issue_json(a) == issue_json(c)
    assert json.loads(issue_json(a)[1][0])["state"] == "closed"
    # A clone of a clone: d knows only a, and still sees what b relayed through hub1 to a.
    d = clone(str(a), tmp_path / "d")
    assert issue_json(d) == issue_json(a)
    assert grite(d, "doctor").returncode == 0
    # Relay is forward only: the hub never gets a replica's log rewound, and nothing is forced.
    hub_refs = git(hub1, "for-each-ref", "refs/grite/replicas/")
    assert len(hub_refs.splitlines()) == 3


@pytest.mark.parametrize("command", [["fetch", "origin", "main"], ["pull", "-q", "origin", "main"],
                                     ["pull", "-q", "--rebase", "origin", "main"]])
def test_fetch_or_pull_naming_a_branch_still_brings_the_state(tmp_path, command):
    from sync_helpers import clone, seeded_hub
    hub = seeded_hub(tmp_path)
    a = clone(str(hub), tmp_path / "a")
    b = clone(str(hub), tmp_path / "b")
    grite(a, "issue", "create", "from a")
    (a / "f").write_text("x\n")
    git(a, "add", "f")
    git(a, "commit", "-q", "-m", "work")
    git(a, "push", "-q", "origin", "main")       # the branch and a's log
    proc = run(["git", *command], b)
    assert "warning" not in proc.err, proc.err
    assert [i["title"] for i in grite_json(b, "issue", "list")] == ["from a"]


def _two_hub_clones(tmp_path):
    from sync_helpers import bare_hub, clone, seeded_hub
    hub = seeded_hub(tmp_path)
    backup = bare_hub(tmp_path / "backup.git")
    a = clone(str(hub), tmp_path / "a")
    git(a, "remote", "add", "backup", str(backup))
    grite(a, "remote", "add-sync", "backup")
    b = clone(str(hub), tmp_path / "b")
    return hub, backup, a, b


def test_a_clone_syncing_two_remotes_never_takes_a_lease_locally(tmp_path):
    _hub, _backup, a, b = _two_hub_clones(tmp_path)
    git(a, "config", "grite.lockRemote", "origin")    # two hubs: origin by name alone is refused
    got = grite_json(a, "lock", "acquire", "task:t1")
    assert got["mode"] == "remote" and got["remote"] == "origin"
    refused = grite(b, "lock", "acquire", "task:t1", check=False)
    assert refused.returncode == 5


def test_ambiguous_lock_remote_is_refused_with_the_fix_named(tmp_path):
    _hub, _backup, a, _b = _two_hub_clones(tmp_path)
    git(a, "remote", "rename", "origin", "hub")
    proc = grite(a, "lock", "acquire", "task:t1", check=False)
    assert proc.returncode == 2
    assert "[locks] remote" in proc.err and "grite.lockRemote" in proc.err
    assert not git(a, "for-each-ref", "refs/grite/locks/")


def test_the_committed_brat_config_names_the_lock_remote_for_every_clone(tmp_path):
    _hub, _backup, a, _b = _two_hub_clones(tmp_path)
    (a / ".brat").mkdir()
    (a / ".brat" / "config.toml").write_text('[locks]\nremote = "backup"\n')
    git(a, "config", "grite.lockRemote", "origin")   # the committed file wins over local config
    assert grite_json(a, "lock", "acquire", "task:t2")["remote"] == "origin"   # not committed yet
    grite(a, "lock", "release", "task:t2")
    git(a, "add", ".brat/config.toml")
    git(a, "commit", "-q", "-m", "locks on backup")
    brat(a, "trust")                                  # a committed lock remote, once approved
    # The first lease made origin's hub the lock authority, recorded in the log: a name
    # committed later does not move leases to another hub (two hubs would both grant them).
    assert grite_json(a, "lock", "acquire", "task:t2")["remote"] == "origin"
    git(a, "remote", "rename", "origin", "hub")
    assert grite_json(a, "lock", "acquire", "task:t3")["remote"] == "hub"


def test_reads_work_on_a_read_only_repository_cold_or_warm(grepo):
    import shutil as _sh
    brat(grepo, "init")
    git(grepo, "add", ".brat")
    git(grepo, "commit", "-q", "-m", "brat")
    grite(grepo, "issue", "create", "readable")
    _sh.rmtree(grepo / ".git" / "grite" / "cache", ignore_errors=True)
    for argv in (["issue", "list"], ["issue", "list", "--json"], ["log"], ["ready"]):
        proc = read_only(grepo, "git", "grite", *argv)
        assert "readable" in proc.out or argv == ["log"], (argv, proc.err)
        assert "error" not in proc.err
    assert "CONVOYS" in read_only(grepo, "git", "brat", "status").out
    assert not (grepo / ".git" / "grite" / "cache").exists()
    grite(grepo, "issue", "list", "--json")   # warm the cache, then read it read-only
    assert json.loads(read_only(grepo, "git", "grite", "issue", "list", "--json").out)[0][
        "title"] == "readable"


def test_deleting_the_cache_while_commands_run_costs_no_answer(grepo):
    import shutil as _sh
    import subprocess
    import threading
    for i in range(5):
        grite(grepo, "issue", "create", f"i{i}")
    cache = grepo / ".git" / "grite" / "cache"
    stop = threading.Event()

    def vandal():
        while not stop.is_set():
            _sh.rmtree(cache, ignore_errors=True)

    t = threading.Thread(target=vandal, daemon=True)
    t.start()
    try:
        procs = [subprocess.Popen(["git", "grite", "issue", "list", "--json"], cwd=grepo,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE)
                 for _ in range(24)]
        results = [(p.wait(timeout=120), p.stdout.read(), p.stderr.read()) for p in procs]
    finally:
        stop.set()
        t.join()
    failed = [err.decode() for rc, _out, err in results if rc != 0]
    assert failed == []
    assert all(len(json.loads(out)) == 5 for _rc, out, _err in results)


def test_terminal_escapes_never_reach_git_log_or_tables(grepo):
    title = "evil \x1b[2J\x07 \u202eright-to-left\u202c zero\u200bwidth"
    iid = grite(grepo, "issue", "create", title).out.strip()
    grite(grepo, "issue", "update", iid, "--title", title + "!")
    grite(grepo, "lock", "acquire", "task:\u202ex", check=False)
    subjects = git(grepo, "log", "--format=%B", "refs/grite/wal")
    reflog = (grepo / ".git" / "logs" / "refs" / "grite" / "wal").read_text()
    for text in (subjects, reflog):
        assert not any(c in text for c in "\x1b\x07\u202e\u202c\u200b"), repr(text)
    assert "\\u202e" in subjects   # shown escaped, not dropped
    table = grite(grepo, "issue", "list").out + grite(grepo, "issue", "show", iid).out
    assert not any(c in table for c in "\x1b\x07\u202e\u202c\u200b"), repr(table)
    grite(grepo, "issue", "create", "\u200b" * 70)
    assert all(len(line) <= 80 for line in grite(grepo, "issue", "list").out.splitlines())
    assert grite_json(grepo, "issue", "show", iid)["title"] == title + "!"   # exact in JSON


def test_object_lock_and_temp_files_left_by_a_killed_writer_are_reported_and_removed(grepo):
    import time as _t
    grite(grepo, "issue", "create", "x")
    objects = grepo / ".git" / "objects"
    left = [objects / "ab" / ("c" * 38 + ".lock"), objects / "ab" / "tmp_obj_Xy12ab"]
    for p in left:
        p.parent.mkdir(exist_ok=True)
        p.write_bytes(b"x\x9c half an object")
        old = _t.time() - 3600
        os.utime(p, (old, old))
    fresh = objects / "ab" / ("d" * 38 + ".lock")   # a writer at work right now: left alone
    fresh.write_bytes(b"")
    assert "bad sha1 file" in run(["git", "fsck"], grepo, check=False).err
    doc = grite(grepo, "doctor", "--json", check=False)
    assert doc.returncode == 6
    found = {f["subject"] for f in json.loads(doc.out)["findings"] if f["kind"] == "stale-temp"}
    assert found == {str(p) for p in left}
    grite(grepo, "doctor", "--fix")
    assert not any(p.exists() for p in left) and fresh.exists()
    fresh.unlink()
    run(["git", "fsck"], grepo)


def test_an_append_survives_a_gc_prune_between_its_objects_and_its_ref_update(grepo, tmp_path):
    import subprocess
    import time as _t
    grite(grepo, "issue", "create", "before")
    gate = tmp_path / "gate"
    gate.write_text("")
    writer = subprocess.Popen(["git", "grite", "issue", "create", "written during gc"],
                              cwd=grepo, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              env=dict(os.environ, GRITE_TEST_PAUSE_BEFORE_REF=str(gate)))
    deadline = _t.monotonic() + 30
    while not (tmp_path / "gate.waiting").exists() and _t.monotonic() < deadline:
        _t.sleep(0.01)
    run(["git", "gc", "-q", "--prune=now"], grepo)   # documented as unsafe while others write
    gate.unlink()
    out, err = writer.communicate(timeout=60)
    assert writer.returncode == 0, err
    run(["git", "fsck", "--no-dangling"], grepo)
    run(["git", "gc", "-q"], grepo)
    import shutil as _sh
    _sh.rmtree(grepo / ".git" / "grite" / "cache", ignore_errors=True)
    proc = grite(grepo, "issue", "list", "--json")
    assert {i["title"] for i in json.loads(proc.out)} == {"before", "written during gc"}
    assert proc.err == ""


def test_a_damaged_fetched_log_is_carried_and_the_next_fetch_brings_it_back_whole(tmp_path):
    import msgspec
    from sync_helpers import clone, replica_id, seeded_hub
    hub = seeded_hub(tmp_path)
    a = clone(str(hub), tmp_path / "a")
    b = clone(str(hub), tmp_path / "b")
    for t in ("one", "two", "three"):
        grite(a, "issue", "create", t)
    grite(a, "sync")
    git(b, "fetch", "-q")
    ref = f"refs/remotes/origin/grite/replicas/{replica_id(a)}"
    middle = git(b, "rev-parse", f"{ref}~1")
    os.unlink(_loose(b, git(b, "rev-parse", f"{middle}:events")))   # "two" is gone here
    assert run(["git", "gc", "-q"], b, check=False).returncode != 0
    assert grite(b, "doctor", "--fix", check=False).returncode == 0
    run(["git", "fsck", "--no-dangling"], b)
    assert {i["title"] for i in grite_json(b, "issue", "list")} == {"one", "three"}
    # b's log now carries a's readable batches, under b's name (a log's batches name its owner).
    for sha in git(b, "rev-list", "refs/grite/wal").split():
        blob = run(["git", "cat-file", "blob", f"{sha}:events"], b).stdout
        assert msgspec.msgpack.decode(blob)[1] == replica_id(b)
    git(b, "fetch", "-q")   # the hub still has a's log whole
    assert {i["title"] for i in grite_json(b, "issue", "list")} == {"one", "two", "three"}
    assert grite(b, "doctor").returncode == 0
