"""Snapshots: a rebuild or a fresh clone starts from the projected state and replays only the rest."""

from __future__ import annotations

import json
import shutil
import sqlite3

import msgspec
import pytest
import zstandard
from hypothesis import given, settings, strategies as st

from git_brat.grite.cache import snapshot
from git_brat.grite.cache.projection import CACHE_VERSION, Cache, in_memory
from git_brat.git.store import Store
from git_brat.grite.model.state import State, canonical, replay
from helpers import git, grite, grite_json, incremental, run, status
from gritekit import histories, recommit, write_snapshot
from sync_helpers import clone, replica_id, seeded_hub


def _some_history(repo, n: int = 6) -> list[str]:
    ids = [grite_json(repo, "issue", "create", f"issue {i}", "-l", "x")["id"] for i in range(n)]
    grite(repo, "issue", "comment", ids[0], "-m", "first")
    grite(repo, "issue", "close", ids[1])
    grite(repo, "dep", "add", ids[2], "--on", ids[3])
    grite(repo, "issue", "label", ids[4], "--remove", "x", "--add", "y")
    return ids


def _full_state(repo):
    return canonical(Cache(Store.discover(str(repo))).rebuild(full=True))


def test_rebuild_starts_from_the_snapshot_and_replays_only_later_events(grepo):
    ids = _some_history(grepo)
    snap = grite_json(grepo, "snapshot")
    assert snap["written"] and snap["ref"] == f"refs/grite/snapshots/{replica_id(grepo)}"
    grite(grepo, "issue", "update", ids[0], "--title", "renamed after the snapshot")
    grite(grepo, "issue", "reopen", ids[1])

    out = grite_json(grepo, "rebuild")
    assert out["snapshot"] == snap["snapshot"]
    assert out["replayed"] == 2 and out["events"] == snap["events"] + 2
    from_snapshot = canonical(Cache(Store.discover(str(grepo))).state())
    listed = grite(grepo, "issue", "list", "--state", "all", "--json").out

    full = grite_json(grepo, "rebuild", "--full")
    assert full["snapshot"] is None and full["replayed"] == full["events"] == out["events"]
    assert canonical(Cache(Store.discover(str(grepo))).state()) == from_snapshot == _full_state(grepo)
    assert grite(grepo, "issue", "list", "--state", "all", "--json").out == listed
    assert "renamed after the snapshot" in listed
    assert status(grepo) == ""


def test_snapshot_command_reports_up_to_date_and_works_from_a_subdirectory(grepo):
    _some_history(grepo, 5)
    (grepo / "sub").mkdir()
    first = grite_json(grepo / "sub", "snapshot")
    again = grite_json(grepo / "sub", "snapshot")
    assert first["written"] and not again["written"] and again["snapshot"] == first["snapshot"]
    assert "up to date" in grite(grepo, "snapshot").out
    commit = first["snapshot"]
    assert git(grepo, "log", "-1", "--format=%s", commit).startswith("grite: snapshot of")
    # The commit's parents are the log tips it covers, so it keeps their events reachable.
    assert git(grepo, "rev-parse", f"{commit}^1") == git(grepo, "rev-parse", "refs/grite/wal")
    assert git(grepo, "ls-tree", "--name-only", commit).split() == ["meta", "state.db.zst"]
    assert status(grepo) == ""


def test_snapshot_before_init_is_a_clear_error_and_writes_nothing(repo):
    proc = grite(repo, "snapshot", check=False)
    assert proc.returncode == 4 and proc.out == "" and "init" in proc.err
    assert git(repo, "for-each-ref", "refs/grite/") == ""


def test_a_fresh_clone_starts_from_the_snapshot_another_replica_published(tmp_path):
    hub = seeded_hub(tmp_path)
    a = clone(str(hub), tmp_path / "a")
    _some_history(a)
    grite(a, "snapshot")
    git(a, "push", "-q", "origin", "main")   # the pre-push hook publishes log and snapshot
    rid = replica_id(a)
    assert f"refs/grite/snapshots/{rid}" in git(a, "ls-remote", str(hub))

    b = clone(str(hub), tmp_path / "b")
    out = grite_json(b, "rebuild")
    assert out["snapshot"] == git(a, "rev-parse", f"refs/grite/snapshots/{rid}")
    assert out["replayed"] == 1   # only b's own actor record
    titles = lambda r: sorted(i["title"] for i in grite_json(r, "issue", "list", "--state", "all"))  # noqa: E731
    assert titles(b) == titles(a)
    started = canonical(Cache(Store.discover(str(b))).state())
    grite(b, "deepen")   # b was cut at the snapshot: with the whole history, a full replay agrees
    assert started == _full_state(b)


def test_a_snapshot_covering_events_our_logs_lack_is_not_used(tmp_path, grepo):
    other = clone(str(grepo), tmp_path / "other")
    grite(other, "issue", "create", "only in other")
    grite(other, "snapshot")
    rid = replica_id(other)
    # Fetch the snapshot alone: its parents come along, but no log ref of ours reaches them.
    git(grepo, "fetch", "-q", str(other), f"refs/grite/snapshots/{rid}:refs/grite/snapshots/{rid}")
    out = grite_json(grepo, "rebuild")
    assert out["snapshot"] is None
    assert "only in other" not in grite(grepo, "issue", "list").out


def _state_file(repo, snap, tmp_path):
    """The snapshot's state as the SQLite file it holds, unpacked at a path of our own."""
    path = tmp_path / "snapshot.db"
    data = run(["git", "cat-file", "blob", f"{snap.commit}:state.db.zst"], repo).stdout
    path.write_bytes(zstandard.ZstdDecompressor().stream_reader(
        data, read_across_frames=True).read())
    return path


def _repacked(repo, snap, data: bytes, **meta) -> str:
    """snap re-made holding this state file (packed as a writer packs it), meta changed by meta."""
    packed, frames = snapshot.pack(data)
    meta = msgspec.structs.replace(snap.meta, frames=frames, **meta)
    return recommit(repo, snap, {"state.db.zst": packed, "meta": msgspec.msgpack.encode(meta)})


def _with_change(repo, snap, tmp_path, *statements, args=(), **meta):
    """snap re-made with its state file changed by these SQL statements."""
    path = _state_file(repo, snap, tmp_path)
    conn = sqlite3.connect(path)
    for stmt in statements:
        conn.execute(stmt, args) if "?" in stmt else conn.execute(stmt)
    conn.commit()
    conn.close()
    return _repacked(repo, snap, path.read_bytes(), **meta)


def _not_used(repo):
    out = grite_json(repo, "rebuild")
    assert out["snapshot"] is None and out["replayed"] == out["events"]


def test_a_snapshot_in_another_format_or_that_does_not_decode_is_ignored(grepo, tmp_path):
    _some_history(grepo, 5)
    state = Cache(Store.discover(str(grepo))).state()
    write_snapshot(grepo, state, version=CACHE_VERSION + 1)
    assert grite_json(grepo, "rebuild")["snapshot"] is None
    snap = write_snapshot(grepo, state)
    good = _state_file(grepo, snap, tmp_path).read_bytes()
    _repacked(grepo, snap, good)
    assert grite_json(grepo, "rebuild")["snapshot"] is not None   # (so the rest is not vacuous)
    for damaged in (b"not a database" * 100, good[:len(good) // 2]):
        _repacked(grepo, snap, damaged)
        _not_used(grepo)
    zstd = zstandard.ZstdCompressor().compress
    for packed, frames in ((zstd(good), []),   # one stream, as this format's first writers made
                           (b"not zstd at all", [15]), (zstd(good), [len(zstd(good)) + 1])):
        meta = msgspec.structs.replace(snap.meta, frames=frames)
        recommit(grepo, snap, {"state.db.zst": packed, "meta": msgspec.msgpack.encode(meta)})
        if frames:
            _not_used(grepo)
        else:
            assert grite_json(grepo, "rebuild")["snapshot"] is not None
    assert grite(grepo, "doctor", check=False).returncode == 6   # and doctor names it
    assert canonical(Cache(Store.discover(str(grepo))).state()) == _full_state(grepo)


def test_a_snapshot_whose_rows_disagree_with_themselves_is_not_used(grepo, tmp_path):
    """Well-formed on the outside, wrong inside (a peer's bug or malice): refused before use."""
    ids = _some_history(grepo, 5)
    snap = write_snapshot(grepo, Cache(Store.discover(str(grepo))).state())
    _with_change(grepo, snap, tmp_path, "SELECT 1")   # re-made unchanged: used
    assert grite_json(grepo, "rebuild")["snapshot"] is not None
    for change, args in (
            ("UPDATE entity SET body = X'c1' WHERE id = ?", (ids[0],)),        # not msgpack
            ("UPDATE entity SET body = ? WHERE id = '%s'" % ids[0],            # not an entity
             (msgspec.msgpack.encode({"id": ids[0], "fields": {"title": ["no stamp"]}}),)),
            ("UPDATE entity SET status = 'closed' WHERE id = ?", (ids[0],)),   # column != body
            ("UPDATE entity SET view = ? WHERE id = '%s'" % ids[0],            # list != body
             (b'{"id":"x","title":"forged"}',)),
            ("UPDATE entity SET id = ? WHERE id = '%s'" % ids[0], ("f" * 32,)),  # not its id
            ("INSERT INTO kv VALUES ('fences', 'task:x', X'c1')", ()),        # a table's value
            ("INSERT INTO kv VALUES ('no such table', 'k', X'01')", ()),
            ("CREATE TRIGGER t AFTER INSERT ON entity BEGIN DELETE FROM kv; END", ()),
            ("CREATE INDEX entity_kind ON entity (status)", ()),              # anyone's index
            ("DELETE FROM meta", ()),
    ):
        _with_change(grepo, snap, tmp_path, change, args=args)
        _not_used(grepo)
        assert "forged" not in grite(grepo, "issue", "list").out
    assert canonical(Cache(Store.discover(str(grepo))).state()) == _full_state(grepo)


def test_a_snapshot_in_the_format_before_sqlite_files_is_still_used(grepo, tmp_path):
    """Snapshots written by the previous release held the state's msgpack (`state.z`, or
    `state` before it): a clone cut at one must still rebuild from it."""
    import zlib
    _some_history(grepo, 5)
    state = in_memory(Cache(Store.discover(str(grepo))).state())
    snap = write_snapshot(grepo, state)
    body = msgspec.msgpack.encode(state)
    for name, data in (("state.z", zlib.compress(body, 1)), ("state", body)):
        commit = recommit(grepo, snap, {name: data})
        grite(grepo, "issue", "create", f"after {name}")
        out = grite_json(grepo, "rebuild")
        assert out["snapshot"] == commit and out["replayed"] < out["events"]
        assert canonical(Cache(Store.discover(str(grepo))).state()) == _full_state(grepo)
    assert grite_json(grepo, "doctor")["ok"]


def test_doctor_reports_a_snapshot_that_disagrees_with_its_events_and_fix_removes_it(grepo):
    ids = _some_history(grepo, 5)
    store = Store.discover(str(grepo))
    state = Cache(store).state()
    _value, *stamp = state.entities[ids[0]].fields["title"]
    state.entities[ids[0]].fields["title"] = ("forged", *stamp)
    snap = write_snapshot(grepo, state)
    assert snap is not None

    proc = grite(grepo, "doctor", "--json", check=False)
    assert proc.returncode == 6
    found = [f for f in json.loads(proc.out)["findings"] if f["kind"] == "snapshot-mismatch"]
    assert [f["subject"] for f in found] == [snap.ref] and not found[0]["fixed"]

    fixed = grite(grepo, "doctor", "--fix", "--json", check=False)
    assert any(f["kind"] == "snapshot-mismatch" and f["fixed"] for f in json.loads(fixed.out)["findings"])
    assert git(grepo, "for-each-ref", "refs/grite/snapshots/") == ""
    assert grite(grepo, "doctor").returncode == 0
    assert "forged" not in grite(grepo, "issue", "list").out


def test_a_snapshot_is_written_when_due_and_published_with_the_log(tmp_path):
    hub = seeded_hub(tmp_path)
    a = clone(str(hub), tmp_path / "a")
    git(a, "config", "grite.snapshotEvery", "1000")
    items = [{"title": f"bulk {i}"} for i in range(1100)]
    (tmp_path / "bulk.json").write_text(json.dumps(items))
    grite(a, "import", str(tmp_path / "bulk.json"))
    assert git(a, "for-each-ref", "refs/grite/snapshots/") == ""   # not on every write
    git(a, "push", "-q", "origin", "main")
    rid = replica_id(a)
    on_hub = git(a, "ls-remote", str(hub), f"refs/grite/snapshots/{rid}")
    assert on_hub and on_hub.split()[0] == git(a, "rev-parse", f"refs/grite/snapshots/{rid}")
    meta = snapshot.read(Store.discover(str(a)), f"refs/grite/snapshots/{rid}".encode()).meta
    assert meta.events >= 1100

    # Not due again until another 1000 events: a push publishes nothing new.
    grite(a, "issue", "create", "one more")
    before = git(a, "rev-parse", f"refs/grite/snapshots/{rid}")
    git(a, "push", "-q", "origin", "main")
    assert git(a, "rev-parse", f"refs/grite/snapshots/{rid}") == before


def test_snapshots_can_be_turned_off_and_bad_settings_are_refused(grepo):
    _some_history(grepo, 5)
    grite(grepo, "snapshot")
    git(grepo, "config", "grite.snapshots", "false")
    assert grite_json(grepo, "rebuild")["snapshot"] is None
    hub = seeded_hub(grepo.parent)
    git(grepo, "remote", "add", "hub", str(hub))
    grite(grepo, "remote", "add-sync", "hub")
    grite(grepo, "sync")   # the log is published, the snapshot is not
    assert "refs/grite/replicas/" in git(grepo, "ls-remote", str(hub))
    assert "refs/grite/snapshots/" not in git(grepo, "ls-remote", str(hub))
    git(grepo, "config", "grite.snapshots", "maybe")
    proc = grite(grepo, "rebuild", check=False)
    assert proc.returncode == 1 and "grite.snapshots must be true or false" in proc.err
    git(grepo, "config", "grite.snapshots", "true")
    git(grepo, "config", "grite.snapshotEvery", "10")
    proc = grite(grepo, "rebuild", check=False)
    assert proc.returncode == 1 and "at least 1000" in proc.err


@settings(max_examples=200, deadline=None)
@given(data=st.data(), events=histories())
def test_snapshot_then_the_rest_equals_a_full_replay(data, events):
    """Any prefix projected, stored as a snapshot is, then extended: the full replay's state."""
    cut = data.draw(st.integers(0, len(events)))
    order = data.draw(st.permutations(events))
    head, rest = order[:cut], order[cut:]
    state = msgspec.msgpack.decode(msgspec.msgpack.encode(incremental([head])), type=State)
    for e in rest:
        if not state.apply(e):
            state = replay(order)
            break
    assert canonical(state) == canonical(replay(events))


def _damage_a_blob(repo, rev: str):
    """Move an events blob out of the object store; returns a function that puts it back."""
    blob = git(repo, "rev-parse", f"{rev}:events")
    path = repo / ".git" / "objects" / blob[:2] / blob[2:]
    aside = path.with_name(path.name + ".aside")
    path.rename(aside)
    return lambda: aside.rename(path)


def test_no_snapshot_is_taken_while_records_cannot_be_read(grepo):
    _some_history(grepo, 5)
    restore = _damage_a_blob(grepo, "refs/grite/wal~3")
    grite(grepo, "rebuild", "--full")   # warns about the skipped record
    proc = grite(grepo, "snapshot", check=False)
    assert proc.returncode == 1 and "could not be read" in proc.err
    git(grepo, "config", "grite.snapshotEvery", "1000")
    store = Store.discover(str(grepo))
    cache = Cache(store)
    assert cache.snapshot_if_due(snapshot.Settings(True, 1000)) is None
    assert git(grepo, "for-each-ref", "refs/grite/snapshots/") == ""
    restore()
    grite(grepo, "rebuild")
    assert grite_json(grepo, "snapshot")["written"]


def test_a_snapshot_whose_records_became_unreadable_is_kept_by_doctor(grepo):
    _some_history(grepo, 5)
    snap = grite_json(grepo, "snapshot")["snapshot"]
    blob = git(grepo, "rev-parse", "refs/grite/wal~3:events")
    _damage_a_blob(grepo, "refs/grite/wal~3")
    report = json.loads(grite(grepo, "doctor", "--json", check=False).out)
    kinds = {f["kind"]: f for f in report["findings"]}
    assert "corrupt" in kinds and "snapshot-mismatch" not in kinds
    assert kinds["snapshot-unverified"]["subject"].startswith("refs/grite/snapshots/")
    assert git(grepo, "rev-parse", f"refs/grite/snapshots/{replica_id(grepo)}") == snap
    # --fix makes git whole again; the snapshot's content is kept apart, not thrown away.
    grite(grepo, "doctor", "--fix")
    kept = git(grepo, "rev-parse", f"refs/grite/salvage/{replica_id(grepo)}/{snap}")
    assert git(grepo, "rev-parse", f"{kept}^{{tree}}") == git(grepo, "rev-parse", f"{snap}^{{tree}}")
    (grepo / ".git" / "objects" / blob[:2] / (blob[2:] + ".aside")).unlink()
    run(["git", "fsck", "--no-dangling"], grepo)


def test_fetched_snapshot_with_hostile_meta_is_ignored_without_a_traceback(grepo, tmp_path):
    _some_history(grepo, 5)
    git(grepo, "gc", "-q")   # packed, as a network clone is (dulwich asserts on odd ids there)
    store = Store.discover(str(grepo))
    snap = write_snapshot(grepo, Cache(store).state())
    git(grepo, "update-ref", "-d", snap.ref)
    tip = git(grepo, "rev-parse", "refs/grite/wal")
    for covers in (["zz"], ["--output=" + str(tmp_path / "pwned")], [tip + "0" * 24], [tip + "\n"]):
        meta = {"version": CACHE_VERSION, "replica": "ffff", "events": 10 ** 6, "entities": 1,
                "covers": covers}
        recommit(grepo, snap, {"meta": msgspec.msgpack.encode(meta)},
                  "refs/remotes/origin/grite/snapshots/ffff")
        shutil.rmtree(grepo / ".git" / "grite" / "cache")
        assert len(grite_json(grepo, "issue", "list", "--state", "all")) == 5
        out = grite_json(grepo, "rebuild")
        assert out["snapshot"] is None
        report = grite_json(grepo, "doctor")
        assert report["ok"] and report["findings"] == []
    assert not (tmp_path / "pwned").exists()


def _forge_counts(repo, tmp_path, meta_events: int, state_events: int):
    """Our snapshot, re-committed with its event counts replaced (what a peer could publish)."""
    from git_brat.grite.cache import snapdb
    store = Store.discover(str(repo))
    state = Cache(store).state()
    snap = write_snapshot(repo, state)
    return _with_change(repo, snap, tmp_path, "UPDATE meta SET v = ?",
                        args=(snapdb.counts_row(CACHE_VERSION, state.max_lamport, state_events),),
                        events=meta_events)


def test_a_snapshot_whose_counts_are_impossible_is_not_used_and_doctor_catches_the_rest(grepo, tmp_path):
    _some_history(grepo, 5)
    real = Cache(Store.discover(str(grepo))).state().event_count
    for meta_events, state_events in ((10 ** 6, real), (real, -1000)):   # disagree / negative
        _forge_counts(grepo, tmp_path, meta_events, state_events)
        out = grite_json(grepo, "rebuild")
        assert out["snapshot"] is None and out["events"] == real
    # Consistent but inflated: it is used (nothing cheap can tell), the numbers shown stay sane,
    # and doctor, which replays what it covers, refuses it.
    forged = _forge_counts(grepo, tmp_path, 10 ** 6, 10 ** 6)
    grite(grepo, "issue", "create", "after")
    out = grite_json(grepo, "rebuild")
    assert out["snapshot"] == forged and out["replayed"] >= 0
    report = json.loads(grite(grepo, "doctor", "--fix", "--json", check=False).out)
    assert [f["kind"] for f in report["findings"]] == ["snapshot-mismatch"] and report["ok"]
    assert grite_json(grepo, "rebuild")["snapshot"] is None


def test_a_snapshot_refused_by_doctor_stays_refused_when_fetched_again(tmp_path):
    hub = seeded_hub(tmp_path)
    a = clone(str(hub), tmp_path / "a")
    ids = _some_history(a, 5)
    state = Cache(Store.discover(str(a))).state()
    _value, *stamp = state.entities[ids[0]].fields["title"]
    state.entities[ids[0]].fields["title"] = ("forged", *stamp)
    write_snapshot(a, state)
    git(a, "push", "-q", "origin", "main")
    b = clone(str(hub), tmp_path / "b", init=False)
    git(b, "config", "grite.shallowClone", "false")   # whole history: doctor can check it
    grite(b, "init")
    assert "forged" in grite(b, "issue", "list").out            # used, until checked
    assert grite(b, "doctor", "--fix", check=False).returncode == 0
    git(b, "fetch", "-q", "origin")                               # brings it back
    assert git(b, "for-each-ref", "refs/remotes/origin/grite/snapshots/") != ""
    assert grite_json(b, "rebuild")["snapshot"] is None
    assert "forged" not in grite(b, "issue", "list").out


def test_a_snapshot_is_not_published_to_a_remote_that_lacks_logs_it_covers(tmp_path):
    public, private = seeded_hub(tmp_path, "public.git"), seeded_hub(tmp_path, "private.git")
    secret = clone(str(private), tmp_path / "secret")
    grite(secret, "issue", "create", "SECRET acquisition plan")
    grite(secret, "sync")
    a = clone(str(public), tmp_path / "a")
    git(a, "config", "remote.origin.griteRelay", "false")   # the public hub gets a's log only
    git(a, "remote", "add", "private", str(private))
    grite(a, "remote", "add-sync", "private")
    grite(a, "issue", "create", "public work")
    grite(a, "sync")
    assert "SECRET" in grite(a, "issue", "list").out
    grite(a, "snapshot")
    grite(a, "sync", "origin")
    assert "refs/grite/snapshots/" not in git(a, "ls-remote", str(public))
    objects = run(["git", "cat-file", "--batch-all-objects", "--batch"], public).stdout
    assert b"SECRET" not in objects
    grite(a, "sync", "private")   # the private hub has every log the snapshot covers
    assert f"refs/grite/snapshots/{replica_id(a)}" in git(a, "ls-remote", str(private))


REFUSING_HOOKS = {
    # per ref: only the snapshot's update is refused
    "update": 'case "$1" in refs/grite/snapshots/*) echo "no snapshots here" >&2; exit 1;; esac',
    # whole push: refused if it has a snapshot in it
    "pre-receive": 'while read old new ref; do case "$ref" in refs/grite/snapshots/*) exit 1;; '
                   'esac; done',
}


@pytest.mark.parametrize("hook", sorted(REFUSING_HOOKS))
def test_a_hub_that_refuses_the_snapshot_still_takes_the_log(tmp_path, hook):
    hub = seeded_hub(tmp_path)
    (hub / "hooks" / hook).write_text(f"#!/bin/sh\n{REFUSING_HOOKS[hook]}\n")
    (hub / "hooks" / hook).chmod(0o755)
    a = clone(str(hub), tmp_path / "a")
    grite(a, "issue", "create", "first")
    grite(a, "snapshot")
    out = grite(a, "sync")
    assert "refused this replica's snapshot" in out.out and "hook declined" in out.out
    sync = json.loads(grite(a, "sync", "--json").out)   # tried again, refused again: still ok
    assert sync["ok"] and sync["remotes"][0]["published"]["snapshot_error"]
    assert git(a, "ls-remote", str(hub), f"refs/grite/replicas/{replica_id(a)}").split()[0] == \
        git(a, "rev-parse", "refs/grite/wal")


def test_doctor_reports_a_damaged_log_commit_even_with_snapshots_around(grepo):
    _some_history(grepo, 5)
    grite(grepo, "snapshot")
    victim = git(grepo, "rev-parse", "refs/grite/wal~3")
    path = grepo / ".git" / "objects" / victim[:2] / victim[2:]
    path.chmod(0o644)
    path.write_bytes(path.read_bytes()[:10])   # truncated: git itself now refuses the walk
    proc = grite(grepo, "doctor", "--json", check=False)
    assert proc.returncode == 6, proc.err
    assert "corrupt" in {f["kind"] for f in json.loads(proc.out)["findings"]}
    shutil.rmtree(grepo / ".git" / "grite" / "cache")
    listed = grite(grepo, "issue", "list", "--state", "all", check=False)   # no traceback either
    assert listed.returncode == 0 and "Traceback" not in listed.err


def test_a_snapshot_taken_from_a_cache_an_older_version_wrote_is_used(grepo):
    """A cache written before list views held the author's id holds their name; a snapshot
    copies its rows as they are, and clones must still take it."""
    _some_history(grepo, 5)
    me = grite_json(grepo, "actor", "show")
    db = grepo / ".git" / "grite" / "cache" / "state.db"
    conn = sqlite3.connect(db)
    with conn:
        conn.execute("UPDATE entity SET view = CAST(replace(view, ?, ?) AS BLOB) "
                     "WHERE kind = 'issue'", (me["id"], me["name"]))
    conn.close()
    taken = grite_json(grepo, "snapshot")["snapshot"]
    shutil.rmtree(grepo / ".git" / "grite" / "cache")
    assert grite_json(grepo, "rebuild")["snapshot"] == taken
    assert {i["author"] for i in grite_json(grepo, "issue", "list", "--state", "all")} == {me["name"]}
