"""A user tracks issues with git grite: create, list, show, change, from anywhere in the repo."""

from __future__ import annotations

import json

from helpers import git, grite, grite_json, issues, run, status, wal_tip
import time


def test_user_creates_lists_and_shows_issues(grepo):
    before = status(grepo)
    out = grite(grepo, "issue", "create", "Fix parser", "-b", "It breaks on tabs", "-l", "bug",
                "-l", "p1").out.strip()
    assert len(out) == 32
    created = grite_json(grepo, "issue", "create", "Write docs", "-a", "alice")
    assert created["title"] == "Write docs" and created["assignees"] == ["alice"]

    listed = grite_json(grepo, "issue", "list")
    assert [i["id"] for i in listed] == [out, created["id"]]
    first = listed[0]
    for key in ("id", "title", "state", "labels", "assignees", "created_at", "updated_at"):
        assert key in first
    assert first["labels"] == ["bug", "p1"] and first["state"] == "open"

    shown = grite_json(grepo, "issue", "show", out[:6])
    assert shown["body"] == "It breaks on tabs"
    human = grite(grepo, "issue", "show", out[:8]).out
    assert "Fix parser" in human and "bug, p1" in human
    assert status(grepo) == before


def test_user_changes_an_issue_through_its_life(grepo):
    iid = grite(grepo, "issue", "create", "Crash on start", "-l", "bug").out.strip()
    grite(grepo, "issue", "update", iid[:7], "--title", "Crash on startup", "--body", "Stack trace")
    grite(grepo, "issue", "label", iid[:7], "--add", "urgent", "--remove", "bug")
    grite(grepo, "issue", "assign", iid[:7], "--add", "bob", "--add", "carol")
    grite(grepo, "issue", "assign", iid[:7], "--remove", "carol")
    grite(grepo, "issue", "comment", iid[:7], "-m", "Reproduced on Linux")
    shown = grite_json(grepo, "issue", "close", iid[:7])
    assert shown["state"] == "closed"
    assert shown["title"] == "Crash on startup" and shown["body"] == "Stack trace"
    assert shown["labels"] == ["urgent"] and shown["assignees"] == ["bob"]
    assert [c["body"] for c in shown["comments"]] == ["Reproduced on Linux"]
    assert grite_json(grepo, "issue", "list") == []
    assert [i["id"] for i in grite_json(grepo, "issue", "list", "--state", "closed")] == [iid]
    grite(grepo, "issue", "reopen", iid[:7])
    assert [i["state"] for i in grite_json(grepo, "issue", "list", "--state", "all")] == ["open"]


def test_list_filters_by_every_label_given(grepo):
    a = grite(grepo, "issue", "create", "A", "-l", "x", "-l", "y").out.strip()
    grite(grepo, "issue", "create", "B", "-l", "x")
    assert [i["id"] for i in grite_json(grepo, "issue", "list", "-l", "x", "-l", "y")] == [a]
    assert len(grite_json(grepo, "issue", "list", "-l", "x")) == 2


def test_commands_work_from_a_subdirectory_and_a_linked_worktree(grepo, tmp_path):
    sub = grepo / "deep" / "er"
    sub.mkdir(parents=True)
    iid = grite(sub, "issue", "create", "From a subdirectory").out.strip()
    git(grepo, "worktree", "add", "-q", str(tmp_path / "wt"))
    wt = tmp_path / "wt"
    assert [i["id"] for i in grite_json(wt, "issue", "list")] == [iid]
    other = grite(wt, "issue", "create", "From a worktree").out.strip()
    assert [i["id"] for i in grite_json(sub, "issue", "list")] == [iid, other]
    # A snapshot taken in the worktree is the repository's, and a rebuild anywhere uses it.
    snap = grite_json(wt, "snapshot")["snapshot"]
    assert grite_json(sub, "rebuild")["snapshot"] == snap
    assert status(wt) == "" and status(grepo) == ""


def test_commands_honour_git_dir(grepo, tmp_path):
    iid = grite(grepo, "issue", "create", "Via GIT_DIR").out.strip()
    listed = json.loads(run(["git", "grite", "issue", "list", "--json"], tmp_path,
                            env={"GIT_DIR": str(grepo / ".git")}).out)
    assert [i["id"] for i in listed] == [iid]


def test_every_write_is_one_commit_with_a_readable_message(grepo):
    tip = wal_tip(grepo)
    iid = grite(grepo, "issue", "create", "Audit me").out.strip()
    assert git(grepo, "rev-list", "--count", f"{tip}..refs/grite/wal") == "1"
    assert git(grepo, "log", "-1", "--format=%s", "refs/grite/wal") == \
        f'grite: issue.create {iid[:7]} "Audit me"'
    assert git(grepo, "ls-tree", "--name-only", "refs/grite/wal") == "events"
    assert status(grepo) == ""


def test_log_shows_who_did_what_and_from_which_replica(grepo):
    iid = grite(grepo, "issue", "create", "Logged").out.strip()
    grite(grepo, "issue", "label", iid[:7], "--add", "ops")
    replica = json.loads((grepo / ".git" / "grite" / "replica.json").read_text())["id"]
    entries = grite_json(grepo, "log", iid[:7])
    assert [e["op"] for e in entries] == ["create", "add"]
    assert all(e["actor_name"] == "Test User" and e["replica"] == replica for e in entries)
    human = grite(grepo, "log").out
    assert "issue.create" in human and "labels +ops" in human and replica[:8] in human


def test_uninitialised_repository_is_a_clear_error(repo):
    proc = grite(repo, "issue", "list", check=False)
    assert proc.returncode == 4
    assert proc.err.strip().count("\n") == 0 and "git grite init" in proc.err


def test_outside_a_repository_is_a_clear_error(tmp_path):
    proc = grite(tmp_path, "issue", "list", check=False)
    assert proc.returncode == 4 and "not a git repository" in proc.err


def test_init_is_idempotent_and_reports_identity(repo):
    first = grite_json(repo, "init")
    tip = wal_tip(repo)
    second = grite_json(repo, "init")
    assert first["created"] is True and second["created"] is False
    assert first["replica"] == second["replica"] and first["actor"] == second["actor"]
    assert wal_tip(repo) == tip


def test_listed_lines_fit_80_columns_even_with_wide_characters(grepo):
    from git_brat.clikit import columns
    grite(grepo, "issue", "create", "修复解析器在处理长输入时崩溃的问题并且添加回归测试以及文档说明和示例" * 2)
    grite(grepo, "issue", "create", "Café crème — naïve résumé " * 5)
    lines = grite(grepo, "issue", "list").out.splitlines()
    assert len(lines) == 2
    assert all(columns(line) <= 80 for line in lines), [columns(line) for line in lines]
    assert all(line.endswith("…") for line in lines)


def test_control_characters_from_the_log_never_reach_the_terminal(grepo):
    # Another replica's grite need not validate what it writes: the title arrives as is.
    from git_brat.grite.model import events as ev
    from git_brat.grite.log.wal import Draft
    from git_brat.grite.repo import Grite
    title = "Fix \x1b[31mred\x1b[0m text and bell\x07"   # (a line break: rejected on replay)
    iid = grite_json(grepo, "issue", "create", "Plain")["id"]
    g = Grite.open(str(grepo))
    g.append([Draft(iid, ev.SetFields({"title": title})), Draft(iid, ev.Comment("see \x1b]0;owned\x07\rhere"))],
             "grite: from a careless peer")
    for out in (grite(grepo, "issue", "list").out, grite(grepo, "issue", "show", iid).out,
                grite(grepo, "log").out, grite(grepo, "export", "--format", "md").out):
        assert not any(ord(c) < 32 and c not in "\n\t" for c in out), repr(out)
    assert grite_json(grepo, "issue", "show", iid)["title"] == title   # JSON keeps the exact text


def test_changes_that_change_nothing_write_nothing_and_say_so(grepo):
    a, b = issues(grepo, "a", "b")
    grite(grepo, "issue", "close", a)
    grite(grepo, "dep", "add", a, "--on", b)
    tip = wal_tip(grepo)
    for argv, said in ((["issue", "close", a], "already closed"),
                       (["issue", "label", a, "--remove", "absent"], "nothing written"),
                       (["dep", "add", a, "--on", b], "already"),
                       (["issue", "update", a, "--title", "a"], "nothing written")):
        proc = grite(grepo, *argv)
        assert said in proc.out, (argv, proc.out)
        assert wal_tip(grepo) == tip, argv
    assert grite_json(grepo, "dep", "add", a, "--on", b)["changed"] is False


def test_comments_are_shown_in_time_order(grepo, tmp_path):
    (iid,) = issues(grepo, "talk")
    # A second clone comments later in time but with a lower clock than this one.
    other = tmp_path / "other"
    git(tmp_path, "clone", "-q", str(grepo), str(other))
    grite(other, "init")
    grite(other, "sync")
    for i in range(5):
        grite(grepo, "issue", "comment", iid, "-m", f"early {i}")
    time.sleep(0.05)
    grite(other, "issue", "comment", iid, "-m", "late")
    git(grepo, "remote", "add", "other", str(other))
    grite(grepo, "remote", "add-sync", "other")
    bodies = [c["body"] for c in grite_json(grepo, "issue", "show", iid)["comments"]]
    assert bodies == [f"early {i}" for i in range(5)] + ["late"]
