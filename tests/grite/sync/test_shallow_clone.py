"""A fresh clone starts from the hub's snapshot: it fetches only the events after it, answers as a
full clone does, refuses what needs whole logs (never a part taken for the whole), and
`git grite deepen` brings the rest."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from helpers import git, grite, grite_json, run, status
from gritekit import read_only, recommit, write_snapshot
from sync_helpers import clone, replica_id, seeded_hub


from git_brat.grite.log import identity
from git_brat.grite.log import cut
from git_brat.grite.sync import first_fetch
from git_brat.grite.cache import snapshot
from git_brat.grite.cache.projection import CACHE_VERSION, Cache, in_memory
from git_brat.git.store import Store
from git_brat.grite.model.state import canonical
from git_brat.grite.log.refs import grite_dir, log_tips


def _hub_with_history(tmp_path):
    """A hub whose logs go on past a published snapshot. `a` wrote it and more after it (its
    log is cut in the middle); `q` wrote before it and nothing since (its tip is one the
    snapshot covers); `b`'s log, which `a` had not fetched, is not covered at all (it comes
    whole) and goes on after it."""
    hub = seeded_hub(tmp_path)
    url = f"file://{hub}"
    a, b, q = (clone(url, tmp_path / n) for n in ("a", "b", "q"))
    early = [grite_json(a, "issue", "create", f"early {i}", "-l", "old")["id"] for i in range(4)]
    grite(a, "issue", "comment", early[0], "-m", "before the snapshot")
    grite(q, "issue", "create", "from the quiet replica")
    for r in (q, a, b):
        grite(r, "sync")
    grite(a, "snapshot")
    grite(a, "sync")
    grite(a, "issue", "close", early[1])
    grite(b, "issue", "create", "after the snapshot")
    grite(b, "issue", "comment", early[0], "-m", "after the snapshot")
    for r in (a, b):
        grite(r, "sync")
    return hub, url, a, early


def _listing(repo):
    return sorted((i["title"], i["state"], i["comments"])
                  for i in grite_json(repo, "issue", "list", "--state", "all"))


def _full_clone(url, path):
    c = clone(url, path, init=False)
    git(c, "config", "grite.shallowClone", "false")
    grite(c, "init")
    return c


def _grite_cut(repo) -> list[str]:
    """The log commits git holds without their parents (the cut)."""
    store = Store.discover(str(repo))
    return sorted(cut.cut(store, log_tips(store).values()))


def test_a_fresh_clone_fetches_only_the_events_after_the_snapshot(tmp_path):
    hub, url, a, early = _hub_with_history(tmp_path)
    first_commit = git(hub, "rev-list", "--reverse", f"refs/grite/replicas/{replica_id(a)}")
    first_commit = first_commit.split()[0]
    c = clone(url, tmp_path / "c")
    assert _grite_cut(c)   # cut where the snapshot ends, in every log
    # What came before the snapshot stayed on the hub ...
    assert run(["git", "cat-file", "-e", first_commit], c, check=False).returncode != 0
    # ... and yet every answer is a full clone's.
    full = _full_clone(url, tmp_path / "full")
    assert not _grite_cut(full)
    assert _listing(c) == _listing(full)
    shown = grite_json(c, "issue", "show", early[0])
    assert [x["body"] for x in shown["comments"]] == ["before the snapshot", "after the snapshot"]
    # Only grite's logs are cut: the user's branch keeps its whole history, the tree is clean.
    assert git(c, "rev-list", "--count", "main") == git(hub, "rev-list", "--count", "main")
    assert status(c) == ""


def test_a_cut_clone_refuses_whole_log_work_and_deepen_brings_the_history(tmp_path):
    _hub, url, _a, _early = _hub_with_history(tmp_path)
    c = clone(url, tmp_path / "c")
    before = _listing(c)
    cache = c / ".git" / "grite" / "cache" / "state.db"
    stamp = cache.stat().st_mtime_ns
    full = grite(c, "rebuild", "--full", check=False)
    assert full.returncode != 0 and full.out == ""
    assert full.err.count("\n") == 1 and "git grite deepen" in full.err
    assert cache.stat().st_mtime_ns == stamp   # refused before anything was written
    assert "made from a snapshot" in grite(c, "log").err
    report = grite_json(c, "doctor")
    assert report["ok"] and [f["kind"] for f in report["findings"]] == ["history-cut"]

    out = grite_json(c, "deepen")
    assert out["whole"] and [r["remote"] for r in out["remotes"]] == ["origin"]
    assert not _grite_cut(c)
    assert "made from a snapshot" not in grite(c, "log").err
    assert grite_json(c, "doctor")["findings"] == []
    assert grite_json(c, "rebuild", "--full")["snapshot"] is None
    assert _listing(c) == before
    assert grite_json(c, "deepen") == {"remotes": [], "whole": True}   # nothing left to do


def test_a_cut_clone_rebuilds_from_its_snapshot_when_the_cache_is_deleted(tmp_path):
    _hub, url, _a, _early = _hub_with_history(tmp_path)
    c = clone(url, tmp_path / "c")
    before = canonical(Cache(Store.discover(str(c))).state())
    shutil.rmtree(c / ".git" / "grite" / "cache")
    assert grite_json(c, "rebuild")["snapshot"] is not None
    assert canonical(Cache(Store.discover(str(c))).state()) == before


def test_a_cut_clone_without_a_usable_snapshot_fails_loudly_rather_than_answer_from_a_part(tmp_path):
    _hub, url, _a, _early = _hub_with_history(tmp_path)
    c = clone(url, tmp_path / "c")
    git(c, "config", "grite.snapshots", "false")
    shutil.rmtree(c / ".git" / "grite" / "cache")
    out = grite(c, "issue", "list", check=False)
    assert out.returncode != 0 and out.out == ""
    assert "only from the snapshot it was cloned from" in out.err and "deepen" in out.err
    git(c, "config", "grite.snapshots", "true")
    assert len(_listing(c)) == 6


def test_a_snapshot_that_no_longer_explains_the_cut_is_not_used(tmp_path):
    """A snapshot covering only some logs (as a replica that had not fetched them would write)
    cannot stand in for what the cut left out of the others."""
    _hub, url, _a, _early = _hub_with_history(tmp_path)
    c = clone(url, tmp_path / "c")
    store = Store.discover(str(c))
    state = Cache(store).state()
    own = log_tips(store)["refs/grite/wal"]   # c's own log: whole, not cut
    ident = identity.load(grite_dir(store))
    snapshot.write_state(store, ident.replica.id, ident.git_author, in_memory(state), [own],
                         CACHE_VERSION)
    partial = snapshot.read(store, snapshot.own_ref(ident.replica.id))
    assert not snapshot.contained(store, partial, log_tips(store).values())
    fetched = [s for s in snapshot.listed(store) if s.ref != partial.ref]
    assert fetched and snapshot.contained(store, fetched[0], log_tips(store).values())


def test_a_cut_clone_follows_the_hub_and_survives_gc_after_the_snapshot_moves(tmp_path):
    _hub, url, a, early = _hub_with_history(tmp_path)
    c = clone(url, tmp_path / "c")
    old = git(c, "for-each-ref", "--format=%(objectname)", "refs/remotes/origin/grite/snapshots/")
    grite(a, "issue", "create", "later still")
    grite(a, "issue", "comment", early[2], "-m", "much later")
    grite(a, "snapshot")
    grite(a, "sync")
    sync = grite_json(c, "sync")
    assert sync["events"] == 2
    new = git(c, "for-each-ref", "--format=%(objectname)", "refs/remotes/origin/grite/snapshots/")
    assert new != old
    git(c, "reflog", "expire", "--expire=now", "--all")
    git(c, "gc", "-q", "--prune=now")
    assert run(["git", "cat-file", "-e", old], c, check=False).returncode != 0   # pruned
    expected = _listing(c)
    shutil.rmtree(c / ".git" / "grite" / "cache")
    assert grite_json(c, "rebuild")["snapshot"] == new   # the newer one explains the cut too
    assert _listing(c) == expected
    assert grite_json(c, "doctor")["ok"]
    # And c's own work goes back to the hub as from any clone.
    grite(c, "issue", "create", "from the cut clone")
    grite(c, "sync")
    grite(a, "sync")
    assert "from the cut clone" in [t for t, _s, _n in _listing(a)]


def test_shallow_clone_can_be_turned_off_and_a_bad_setting_writes_nothing(tmp_path):
    _hub, url, _a, _early = _hub_with_history(tmp_path)
    c = clone(url, tmp_path / "c", init=False)
    git(c, "config", "grite.shallowClone", "maybe")
    out = grite(c, "init", check=False)
    assert out.returncode != 0 and "grite.shallowClone must be true or false" in out.err
    assert not (c / ".git" / "grite").exists()
    assert git(c, "config", "--get-all", "remote.origin.fetch").count("grite") == 0
    git(c, "config", "grite.shallowClone", "false")
    grite(c, "init")
    assert not (c / ".git" / "shallow").exists()
    assert len(_listing(c)) == 6


def test_a_forged_snapshot_a_clone_was_cut_at_is_caught_once_deepened(tmp_path):
    _hub, url, a, early = _hub_with_history(tmp_path)
    store = Store.discover(str(a))
    state = Cache(store).state()
    _value, *stamp = state.entities[early[3]].fields["title"]
    state.entities[early[3]].fields["title"] = ("forged", *stamp)
    ident = identity.load(grite_dir(store))
    snapshot.write_state(store, ident.replica.id, ident.git_author, in_memory(state),
                         list(log_tips(store).values()), CACHE_VERSION)
    grite(a, "sync")
    c = clone(url, tmp_path / "c")
    assert "forged" in grite(c, "issue", "list").out
    # Cut at it, c cannot replay what it covers: doctor says so instead of calling it checked.
    report = grite_json(c, "doctor")
    assert [f["kind"] for f in report["findings"]] == ["history-cut"]
    assert "cannot be replayed in full" in report["findings"][0]["detail"]
    grite(c, "deepen")
    found = grite(c, "doctor", "--json", check=False)
    assert found.returncode == 6
    assert "snapshot-mismatch" in [f["kind"] for f in json.loads(found.out)["findings"]]
    grite(c, "doctor", "--fix")
    assert "forged" not in grite(c, "issue", "list").out


def test_a_snapshot_that_moves_on_the_hub_during_the_first_fetch_leaves_no_gap(tmp_path):
    """Between reading the snapshot and cutting the logs at it, its replica publishes a newer
    one: the logs come cut at the newer one, which the clone does not hold. It must notice, and
    take the whole history rather than start from a snapshot with events missing after it."""
    hub = seeded_hub(tmp_path)
    url = f"file://{hub}"
    a, b = clone(url, tmp_path / "a"), clone(url, tmp_path / "b")
    grite(a, "issue", "create", "one")
    grite(b, "issue", "create", "two")
    for r in (a, b, a):
        grite(r, "sync")
    grite(a, "snapshot")
    grite(a, "sync")                                   # S1 on the hub
    grite(b, "issue", "create", "three")
    grite(b, "sync")
    grite(a, "sync")
    grite(a, "snapshot")                               # S2 covers "three"; kept off the hub's ref
    ref = f"refs/grite/snapshots/{replica_id(a)}"
    git(a, "push", "-q", "--no-verify", url, f"+{ref}:refs/test/next")
    grite(b, "issue", "create", "four")
    grite(b, "sync")

    # The hub moves its snapshot ref right after serving the first pack (git runs this hook in
    # place of pack-objects; it is read from protected config only, hence a global file).
    marker = tmp_path / "moved"
    hook = tmp_path / "pack-hook"
    hook.write_text(f'#!/bin/sh\n"$@"\nrc=$?\nif [ ! -e "{marker}" ]; then touch "{marker}"; '
                    f'git --git-dir="{hub}" update-ref {ref} refs/test/next; fi\nexit $rc\n')
    hook.chmod(0o755)
    config = tmp_path / "global.gitconfig"
    home = Path(os.environ["HOME"]) / ".gitconfig"
    config.write_text(home.read_text() + f"[uploadpack]\n\tpackObjectsHook = {hook}\n")
    c = clone(url, tmp_path / "c", init=False)
    grite(c, "init", env={"GIT_CONFIG_GLOBAL": str(config)})
    assert marker.exists()                             # the move happened mid-way
    assert not _grite_cut(c)                           # whole history taken instead
    assert sorted(t for t, _s, _n in _listing(c)) == ["four", "one", "three", "two"]
    assert grite_json(c, "doctor")["ok"]


def test_relaying_cut_logs_to_a_hub_without_their_history_says_so_until_deepened(tmp_path):
    _hub, url, _a, _early = _hub_with_history(tmp_path)
    c = clone(url, tmp_path / "c")
    second = seeded_hub(tmp_path, "second.git")
    git(c, "remote", "add", "second", f"file://{second}")
    grite(c, "remote", "add-sync", "second")
    out = grite_json(c, "sync", "second")["remotes"][0]["published"]
    # b's log came whole (the snapshot covers none of it); a's and q's start at the cut.
    assert out["status"] == "pushed" and len(out["relayed"]) == 1
    assert "2 log(s)" in out["relay_error"] and "git grite deepen" in out["relay_error"]
    assert "refused relayed logs" in grite(c, "sync", "second").out
    grite(c, "deepen")
    out = grite_json(c, "sync", "second")["remotes"][0]["published"]
    assert out["relay_error"] is None and len(out["relayed"]) == 2
    later = clone(f"file://{second}", tmp_path / "later")
    assert _listing(later) == _listing(c)


def test_a_read_only_cut_clone_with_no_cache_answers_from_the_snapshot(tmp_path):
    """The snapshot's file is unpacked where it can be ($TMPDIR) and read from there; nothing
    is written in the repository, and nothing is left behind."""
    _hub, url, _a, _early = _hub_with_history(tmp_path)
    c = clone(url, tmp_path / "c")
    expected = _listing(c)
    shutil.rmtree(c / ".git" / "grite" / "cache")
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    proc = read_only(c, "env", f"TMPDIR={scratch}", "git", "grite", "issue", "list", "--json",
                      "--state", "all")
    assert sorted((i["title"], i["state"], i["comments"]) for i in json.loads(proc.out)) == expected
    assert "error" not in proc.err
    assert not (c / ".git" / "grite" / "cache").exists() and list(scratch.iterdir()) == []


def test_a_first_fetch_adopts_the_snapshot_while_the_logs_arrive(tmp_path):
    """The snapshot is unpacked and checked in a thread started as soon as it is chosen; the
    cache then takes that file (no second adoption) and no scratch file is left."""
    from git_brat.grite.cache import snapdb
    from git_brat.grite.sync import exchange as sync
    _hub, url, _a, _early = _hub_with_history(tmp_path)
    full = _listing(_full_clone(url, tmp_path / "full"))
    c = clone(url, tmp_path / "c", init=False)
    store = Store.discover(str(c))
    (c / ".git" / "grite" / "cache").mkdir(parents=True)
    assert snapshot._early == {}
    assert first_fetch.first_fetch(store, "origin", sync.refspec("origin"), sync.transport_env(),
                                   sync.net_timeout()).ok
    [(commit, early)] = snapshot._early.items()
    early.thread.join()
    assert isinstance(early.outcome[0], snapdb.Adopted) and os.path.exists(early.path)
    assert commit == git(c, "rev-parse", "refs/remotes/origin/grite/snapshots/" + replica_id(_a))
    state = Cache(store).state()
    assert snapshot._early == {} and not os.path.exists(early.path)
    cache_dir = c / ".git" / "grite" / "cache"
    assert not [p.name for p in cache_dir.iterdir() if p.name.startswith("snapshot")]
    assert len([e for e in state.entities.values() if e.kind == "issue"]) == len(full)
    grite(c, "init")
    assert _listing(c) == full
    assert [f["kind"] for f in grite_json(c, "doctor")["findings"]] == ["history-cut"]
    assert status(c) == ""


def test_a_snapshot_adopted_early_and_never_taken_leaves_no_file(tmp_path):
    _hub, url, a, _early = _hub_with_history(tmp_path)
    store = Store.discover(str(a))
    [snap] = [s for s in snapshot.listed(store) if s.ref.startswith("refs/grite/")]
    snapshot.prepare(store, snap)
    path = snapshot._early[snap.commit].path
    snapshot._discard_early()   # (what runs at exit)
    assert snapshot._early == {} and not os.path.exists(path)


def test_a_snapshot_in_the_old_format_prepared_early_is_adopted_by_the_caller_instead(tmp_path):
    """The thread reads only state.db.zst (the older msgpack formats go through dulwich, which
    is not for two threads): the caller adopts such a snapshot itself, and no file is left."""
    import msgspec
    _hub, _url, a, _early = _hub_with_history(tmp_path)
    store = Store.discover(str(a))
    state = in_memory(Cache(store).state())
    snap = write_snapshot(a, state)
    commit = recommit(a, snap, {"state": msgspec.msgpack.encode(state)})
    [old] = [s for s in snapshot.listed(store) if s.commit == commit]
    cache_dir = a / ".git" / "grite" / "cache"
    snapshot.prepare(store, old)
    path = str(tmp_path / "adopted.db")
    start = snapshot.adopted(store, old, path)
    assert start is not None and start.events == state.event_count and os.path.exists(path)
    assert snapshot._early == {}
    assert not [p.name for p in cache_dir.iterdir() if p.name.startswith("snapshot")]
