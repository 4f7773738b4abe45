"""Contracts every grite command keeps: --json is bare JSON, git status is untouched, help works."""

from __future__ import annotations

import json
import shutil

import pytest

from helpers import grite, run, status


def test_every_command_prints_bare_json_and_leaves_git_status_alone(grepo, tmp_path):
    (grepo / "untracked.txt").write_text("user's own file\n")
    (grepo / "README").write_text("user's unstaged edit\n")
    before = status(grepo)
    a = json.loads(grite(grepo, "issue", "create", "A", "--json").out)["id"]
    b = json.loads(grite(grepo, "issue", "create", "B", "--json").out)["id"]
    f = tmp_path / "in.json"
    f.write_text('[{"title": "Imported"}]')
    commands = [
        ["init"], ["issue", "list"], ["issue", "show", a], ["issue", "update", a, "--title", "A2"],
        ["issue", "comment", a, "-m", "hi"], ["issue", "label", a, "--add", "x"],
        ["issue", "assign", a, "--add", "me"], ["issue", "close", b], ["issue", "reopen", b],
        ["dep", "add", a, "--on", b], ["dep", "list", a], ["dep", "topo"], ["ready"],
        ["dep", "remove", a, "--on", b], ["log"], ["import", str(f)], ["doctor"], ["rebuild"],
        ["snapshot"], ["rebuild"], ["rebuild", "--full"], ["actor", "list"], ["actor", "show"], ["actor", "new", "bot"], ["actor", "use", "bot"],
    ]
    for cmd in commands:
        proc = grite(grepo, *cmd, "--json")
        json.loads(proc.out)   # bare JSON, nothing else on stdout
        assert status(grepo) == before, f"`git grite {' '.join(cmd)}` changed git status"


def test_cache_that_disagrees_with_the_log_is_reported_and_fixed(grepo):
    from git_brat.grite.cache.projection import Cache
    from git_brat.git.store import Store
    import msgspec
    a = grite(grepo, "issue", "create", "Truth").out.strip()
    grite(grepo, "issue", "list")
    import sqlite3
    db = Cache(Store.discover(str(grepo))).path
    with sqlite3.connect(db) as conn:   # the row says something the log never did
        body, = conn.execute("SELECT body FROM entity WHERE id=?", (a,)).fetchone()
        ent = msgspec.msgpack.decode(body)
        ent["fields"]["title"][0] = "Lie"
        conn.execute("UPDATE entity SET body=? WHERE id=?", (msgspec.msgpack.encode(ent), a))
    report = json.loads(grite(grepo, "doctor", "--json", check=False).out)
    assert not report["ok"] and report["findings"][0]["kind"] == "cache-mismatch"
    fixed = json.loads(grite(grepo, "doctor", "--fix", "--json").out)
    assert fixed["findings"][0]["fixed"]
    assert json.loads(grite(grepo, "issue", "show", a, "--json").out)["title"] == "Truth"


def test_version_and_help(repo):
    assert "git-grite, version" in grite(repo, "--version").out
    assert "issue" in run(["git-grite", "--help"], repo).out


@pytest.mark.skipif(shutil.which("man") is None, reason="man is not installed")
def test_git_grite_help_opens_the_man_page(repo):
    proc = run(["git", "grite", "--help"], repo, env={"MANPAGER": "cat", "PAGER": "cat",
                                                      "MANWIDTH": "80"})
    assert "GIT-GRITE(1)" in proc.out and "issue create" in proc.out
