"""A damaged record is skipped with a warning naming it; everything else still replays."""

from __future__ import annotations

import os
import shutil

import json

import msgspec
import pytest

from helpers import ROOT, git, grite, grite_json, run


def _loose(repo, sha: str):
    return repo / ".git" / "objects" / sha[:2] / sha[2:]


def _overwrite(path, data: bytes) -> None:
    os.chmod(path, 0o644)
    path.write_bytes(data)


def _three_issues(repo):
    ids = [grite(repo, "issue", "create", t).out.strip() for t in ("first", "second", "third")]
    commits = git(repo, "rev-list", "refs/grite/wal").split()   # newest first
    return ids, commits


def _fresh_list(repo):
    shutil.rmtree(repo / ".git" / "grite" / "cache", ignore_errors=True)
    return grite(repo, "issue", "list", "--json")


def test_corrupt_events_blob_is_skipped_with_a_warning(grepo):
    ids, commits = _three_issues(grepo)
    blob = git(grepo, "rev-parse", f"{commits[1]}:events")
    _overwrite(_loose(grepo, blob), b"garbage, not zlib")
    proc = _fresh_list(grepo)
    titles = [i["title"] for i in msgspec.json.decode(proc.stdout)]
    assert titles == ["first", "third"]
    assert commits[1] in proc.err and proc.err.startswith("warning:")
    report = grite_json(grepo, "doctor", check=False)
    assert not report["ok"] and any(f["kind"] == "corrupt" and f["subject"] == commits[1]
                                    for f in report["findings"])


def test_blob_that_is_not_a_batch_is_skipped(grepo):
    ids, commits = _three_issues(grepo)
    # A valid git blob with bytes that are not a msgpack batch: rewrite history around it.
    bad_blob = git(grepo, "hash-object", "-w", "--stdin", input=b"\x93\x01\x02")
    tree = git(grepo, "mktree", input=f"100644 blob {bad_blob}\tevents\n")
    parent = commits[2]
    bad = git(grepo, "commit-tree", tree, "-p", parent, "-m", "grite: bad")
    top = git(grepo, "commit-tree", f"{commits[0]}^{{tree}}", "-p", bad, "-m", "grite: third")
    git(grepo, "update-ref", "refs/grite/wal", top)
    proc = _fresh_list(grepo)
    assert [i["title"] for i in msgspec.json.decode(proc.stdout)] == ["first", "third"]
    assert bad in proc.err


def test_corrupt_commit_is_named_and_newer_history_still_replays(grepo):
    ids, commits = _three_issues(grepo)
    _overwrite(_loose(grepo, commits[1]), b"broken commit")
    proc = _fresh_list(grepo)
    titles = [i["title"] for i in msgspec.json.decode(proc.stdout)]
    assert "third" in titles
    assert commits[1] in proc.err
    report = grite_json(grepo, "doctor", check=False)
    assert any(f["subject"] == commits[1] for f in report["findings"])


_FUTURE = """
import sys, msgspec
sys.path.insert(0, {root!r})
from git_brat.grite.repo import Grite
from git_brat.grite.model import events as ev
from git_brat.grite.log import wal as log
class Future(msgspec.Struct, array_like=True, tag="zz"):
    what: str
g = Grite.open()
drafts = [log.Draft({iid!r}, Future("teleport"))]
if {title!r}:
    drafts.append(log.Draft({iid!r}, ev.SetFields({{"title": {title!r}}})))
log.append(g.store, g.identity, lambda tip: drafts, lambda e: "grite: future op")
"""


def _append_future_op(repo, iid: str, also_title: str = "") -> None:
    """One batch with an operation this version does not know (as a newer grite writes)."""
    run(["python", "-c", _FUTURE.format(root=str(ROOT), iid=iid, title=also_title)], repo)


def test_events_from_a_newer_grite_are_kept_and_skipped(grepo):
    iid = grite(grepo, "issue", "create", "Known").out.strip()
    _append_future_op(grepo, iid, also_title="Still known")
    proc = _fresh_list(grepo)
    assert [i["title"] for i in msgspec.json.decode(proc.stdout)] == ["Still known"]
    assert proc.err == ""
    report = grite_json(grepo, "doctor")
    assert report["ok"] and report["findings"][0]["kind"] == "unknown-ops"
    ops = [e["op"] for e in grite_json(grepo, "log", iid)]
    assert "unknown" in ops


_BULK = """
import sys
sys.path.insert(0, {root!r})
from git_brat.grite.repo import Grite
from git_brat.grite import issues
g = Grite.open()
for i in range(150):
    issues.create(g, f"bulk {{i}}")
"""


def _bulk(repo) -> list[str]:
    """150 issues, one commit each: enough that replay streams them through git cat-file."""
    run(["python", "-c", _BULK.format(root=str(ROOT))], repo)
    return git(repo, "rev-list", "refs/grite/wal").split()   # newest first


def _damage_in_the_middle(path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF   # zlib stream corrupt: git cat-file dies on it ("unable to stream")
    _overwrite(path, bytes(data))


@pytest.mark.parametrize("damage", [lambda p: _overwrite(p, b"not zlib at all"), _damage_in_the_middle],
                         ids=["not-zlib", "zlib-stream-corrupt"])
def test_a_damaged_record_among_many_is_skipped_by_the_streaming_reader(grepo, damage):
    commits = _bulk(grepo)
    victim = commits[75]
    blob = git(grepo, "rev-parse", f"{victim}:events")
    damage(_loose(grepo, blob))
    proc = _fresh_list(grepo)
    titles = {i["title"] for i in msgspec.json.decode(proc.stdout)}
    lost = {f"bulk {i}" for i in range(150)} - titles
    assert len(titles) == 149 and len(lost) == 1
    assert lost.pop() in git(grepo, "log", "-1", "--format=%s", victim)
    assert victim in proc.err


def _log_commit(repo, ref: str, entries: dict[str, str], message: str) -> str:
    """A commit (no parent) whose tree holds the given blobs, on ref: a hand-made log."""
    tree = git(repo, "mktree", input="".join(f"100644 blob {sha}\t{name}\n"
                                             for name, sha in sorted(entries.items())))
    commit = git(repo, "commit-tree", tree, "-m", message)
    git(repo, "update-ref", ref, commit)
    return commit


def test_two_logs_sharing_one_events_blob_replay_the_same_by_every_path(grepo):
    # History rewritten elsewhere can leave two commits with the same batch (the attic keeps
    # the old one). Read once by the fast replay, once per commit elsewhere: same answer.
    iid = grite(grepo, "issue", "create", "Known").out.strip()
    _append_future_op(grepo, iid)
    blob = git(grepo, "rev-parse", "refs/grite/wal:events")
    _log_commit(grepo, "refs/grite/replicas/aaaa", {"events": blob}, "copy one")
    _log_commit(grepo, "refs/grite/replicas/bbbb", {"events": blob}, "copy two")
    grite(grepo, "rebuild", "--full")
    for _ in range(2):   # and doctor --fix does not chase a difference that keeps coming back
        report = grite_json(grepo, "doctor", "--fix")
        assert report["ok"] and [f["kind"] for f in report["findings"]] == ["unknown-ops"]
        assert report["findings"][0]["detail"].startswith("1 events")


def test_a_log_tree_with_more_than_events_is_read_the_same_by_every_path(grepo, tmp_path):
    other = tmp_path / "other"
    git(tmp_path, "clone", "-q", str(grepo), str(other))
    grite(other, "init")
    grite(other, "issue", "create", "Only events counts")
    grite(other, "issue", "create", "Hidden in an extra entry")
    blobs = []
    for rev in ("refs/grite/wal~1:events", "refs/grite/wal:events"):
        data = run(["git", "cat-file", "blob", rev], other).stdout
        blobs.append(run(["git", "hash-object", "-w", "--stdin"], grepo, input=data).out.strip())
    # (in the other replica's own ref: a replica's log holds only that replica's batches)
    other_id = json.loads((other / ".git" / "grite" / "replica.json").read_text())["id"]
    # (with the first batch's own message: its signature speaks for the replica's actor)
    _log_commit(grepo, f"refs/grite/replicas/{other_id}", {"events": blobs[0], "extra": blobs[1]},
                git(other, "log", "-1", "--format=%B", "refs/grite/wal~1"))
    incremental = [i["title"] for i in grite_json(grepo, "issue", "list")]
    grite(grepo, "rebuild", "--full")
    assert [i["title"] for i in grite_json(grepo, "issue", "list")] == incremental
    assert "Only events counts" in incremental and "Hidden in an extra entry" not in incremental
    assert grite_json(grepo, "doctor")["ok"]


def test_a_tree_where_events_should_be_costs_only_its_own_record(grepo, tmp_path):
    # A peer's log of 80 commits (enough to be streamed through one git cat-file) where one
    # commit's `events` is a tree: git prints the tree's content, which must be stepped over.
    other = tmp_path / "other"
    git(tmp_path, "clone", "-q", str(grepo), str(other))
    grite(other, "init")
    _bulk(other)
    git(grepo, "fetch", "-q", str(other), "refs/grite/wal:refs/tmp/peer")
    commits = git(grepo, "rev-list", "--reverse", "refs/tmp/peer").split()[-80:]
    git(grepo, "update-ref", "-d", "refs/tmp/peer")
    parent = None
    for n, c in enumerate(commits):
        if n == 40:
            events = git(grepo, "mktree", input=f"100644 blob {git(grepo, 'rev-parse', f'{c}:events')}\tx\n")
            entry = f"040000 tree {events}\tevents\n"
        else:
            entry = f"100644 blob {git(grepo, 'rev-parse', f'{c}:events')}\tevents\n"
        tree = git(grepo, "mktree", input=entry)
        signed = git(grepo, "log", "-1", "--format=%B", c)   # each batch's own signature
        parent = git(grepo, "commit-tree", tree, *(["-p", parent] if parent else []), "-m", signed)
        if n == 40:
            odd = parent
    other_id = json.loads((other / ".git" / "grite" / "replica.json").read_text())["id"]
    git(grepo, "update-ref", f"refs/grite/replicas/{other_id}", parent)   # (its own replica's ref)
    proc = _fresh_list(grepo)
    titles = {i["title"] for i in msgspec.json.decode(proc.stdout)}
    assert len([t for t in titles if t.startswith("bulk ")]) == 79
    assert odd in proc.err and proc.err.count("skipped") == 1, proc.err


def test_when_git_keeps_dying_every_record_is_still_read(grepo, tmp_path):
    grite(grepo, "issue", "list")   # the cache is warm; what follows is an incremental update
    _bulk(grepo)
    # A git whose per-commit reader dies at once, every time: grite must still read everything.
    wrapper = tmp_path / "bin" / "git"
    wrapper.parent.mkdir()
    wrapper.write_text(f'#!/bin/sh\ncase "$*" in *"cat-file --batch=%(objecttype)"*) exit 1;; esac\n'
                       f'exec {shutil.which("git")} "$@"\n')
    wrapper.chmod(0o755)
    env = {"PATH": f"{wrapper.parent}{os.pathsep}{os.environ['PATH']}"}
    proc = run(["git-grite", "issue", "list", "--json"], grepo, env=env)
    assert len(msgspec.json.decode(proc.stdout)) == 150 and proc.err == ""
