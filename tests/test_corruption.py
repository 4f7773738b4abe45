"""A damaged record is skipped with a warning naming it; everything else still replays."""

from __future__ import annotations

import os
import shutil

import msgspec

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


def test_events_from_a_newer_grite_are_kept_and_skipped(grepo):
    iid = grite(grepo, "issue", "create", "Known").out.strip()
    script = f"""
import sys, msgspec
sys.path.insert(0, {str(ROOT)!r})
from git_brat.grite.repo import Grite
from git_brat.grite import events as ev, log
class Future(msgspec.Struct, array_like=True, tag="zz"):
    what: str
g = Grite.open()
log.append(g.store, g.identity, lambda tip: [log.Draft({iid!r}, Future("teleport")),
           log.Draft({iid!r}, ev.SetFields({{"title": "Still known"}}))],
           lambda e: "grite: future op")
"""
    run(["python", "-c", script], grepo)
    proc = _fresh_list(grepo)
    assert [i["title"] for i in msgspec.json.decode(proc.stdout)] == ["Still known"]
    assert proc.err == ""
    report = grite_json(grepo, "doctor")
    assert report["ok"] and report["findings"][0]["kind"] == "unknown-ops"
    ops = [e["op"] for e in grite_json(grepo, "log", iid)]
    assert "unknown" in ops


def test_a_damaged_record_among_many_is_skipped_by_the_streaming_reader(grepo):
    # Enough commits that replay reads them through one streaming `git cat-file --batch`.
    script = f"""
import sys
sys.path.insert(0, {str(ROOT)!r})
from git_brat.grite.repo import Grite
from git_brat.grite import issues
g = Grite.open()
for i in range(150):
    issues.create(g, f"bulk {{i}}")
"""
    run(["python", "-c", script], grepo)
    commits = git(grepo, "rev-list", "refs/grite/wal").split()   # newest first
    victim = commits[75]
    blob = git(grepo, "rev-parse", f"{victim}:events")
    _overwrite(_loose(grepo, blob), b"not zlib at all")
    proc = _fresh_list(grepo)
    titles = {i["title"] for i in msgspec.json.decode(proc.stdout)}
    lost = {f"bulk {i}" for i in range(150)} - titles
    assert len(titles) == 149 and len(lost) == 1
    assert lost.pop() in git(grepo, "log", "-1", "--format=%s", victim)
    assert victim in proc.err
