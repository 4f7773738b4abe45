"""Edge cases found in review: each one a user could hit."""

from __future__ import annotations

import json
import subprocess

from helpers import git, grite, grite_json, run, wal_tip


def test_an_actor_name_git_would_reject_in_a_commit_is_refused(grepo):
    tip = wal_tip(grepo)
    for name in ("multi\nline", "evil <x@y>", "tab\tname"):
        proc = grite(grepo, "actor", "new", name, check=False)
        assert proc.returncode == 2 and proc.err.count("\n") == 1, proc.err
    proc = grite(grepo, "actor", "new", "ok", "--email", "a>b@c", check=False)
    assert proc.returncode == 2
    assert wal_tip(grepo) == tip
    grite(grepo, "issue", "create", "still fine")
    git(grepo, "fsck", "--no-dangling", "--strict")


def test_concurrent_imports_of_one_file_create_everything_once(grepo, tmp_path):
    f = tmp_path / "one.json"
    f.write_text(json.dumps([{"title": "Shared", "comments": [{"body": "once"}]}]))
    procs = [subprocess.Popen(["git", "grite", "import", str(f)], cwd=grepo,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE) for _ in range(6)]
    for p in procs:
        p.communicate(timeout=120)
        assert p.returncode == 0
    listed = grite_json(grepo, "issue", "list")
    assert len(listed) == 1 and listed[0]["comments"] == 1


def test_an_import_whose_dependencies_form_a_cycle_is_refused(grepo, tmp_path):
    x, y = "a" * 32, "b" * 32
    doc = {"format": "grite-export", "version": 1, "issues": [
        {"id": x, "title": "X", "deps": {"depends_on": [y]}},
        {"id": y, "title": "Y", "deps": {"depends_on": [x]}}]}
    f = tmp_path / "cycle.json"
    f.write_text(json.dumps(doc))
    tip = wal_tip(grepo)
    proc = grite(grepo, "import", str(f), check=False)
    assert proc.returncode == 5 and "cycle" in proc.err and wal_tip(grepo) == tip


def test_topo_never_drops_issues_caught_in_a_cycle_made_by_two_replicas(grepo):
    from git_brat.grite.model import events as ev
    from git_brat.grite.log.wal import Draft
    from git_brat.grite.repo import Grite
    a = grite(grepo, "issue", "create", "A").out.strip()
    b = grite(grepo, "issue", "create", "B").out.strip()
    c = grite(grepo, "issue", "create", "C").out.strip()
    g = Grite.open(str(grepo))   # what two replicas' concurrent `dep add`s merge into
    g.append([Draft(a, ev.AddTo("dep:depends_on", b)), Draft(b, ev.AddTo("dep:depends_on", a))], "x")
    order = [i["id"] for i in grite_json(grepo, "dep", "topo")]
    assert sorted(order) == sorted([a, b, c]) and order[0] == c


def test_export_to_an_unwritable_place_is_one_line(grepo, tmp_path):
    proc = grite(grepo, "export", "-o", str(tmp_path / "missing" / "x.json"), check=False)
    assert proc.returncode == 1 and proc.err.count("\n") == 1 and "cannot write" in proc.err


def test_arguments_that_are_not_utf8_are_refused_in_one_line(grepo):
    proc = run(["git", "grite", "issue", "create", b"caf\xff".decode("utf-8", "surrogateescape")],
               grepo, check=False)
    assert proc.returncode == 2 and proc.err.count("\n") == 1 and "UTF-8" in proc.err


def test_hooks_path_inside_the_work_tree_keeps_git_status_clean(repo):
    hooks = repo / "myhooks"
    hooks.mkdir()
    (hooks / "post-merge").write_text("#!/bin/sh\necho tracked hook\n")
    (hooks / "post-merge").chmod(0o755)
    (hooks / "pre-push").write_text("#!/bin/sh\nexit 0\n")        # untracked: chained
    (hooks / "pre-push").chmod(0o755)
    git(repo, "config", "core.hooksPath", "myhooks")
    git(repo, "add", "myhooks/post-merge")
    git(repo, "commit", "-qm", "hooks")
    exclude = repo / ".git" / "info" / "exclude"
    before_exclude = exclude.read_bytes()
    before = git(repo, "status", "--porcelain", "--untracked-files=all")
    result = grite_json(repo, "init")
    actions = {h["hook"]: h["action"] for h in result["hooks"]}
    assert actions["post-merge"] == "skipped" and actions["pre-push"] == "chained"
    assert (hooks / "post-merge").read_text() == "#!/bin/sh\necho tracked hook\n"
    assert git(repo, "status", "--porcelain", "--untracked-files=all") == before
    grite(repo, "uninstall")
    assert exclude.read_bytes() == before_exclude
    assert (hooks / "pre-push").read_text() == "#!/bin/sh\nexit 0\n"
    assert git(repo, "status", "--porcelain", "--untracked-files=all") == before
