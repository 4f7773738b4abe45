"""Contracts of the refinery and deacon commands: bad input, hub setup, chained hooks."""

from __future__ import annotations

import json

from bratkit import convoy, fail, log_commits
from helpers import brat, brat_json, git, grite, run, status
from refinerykit import request
from sync_helpers import clone, seeded_hub, write_hook


def test_a_bad_config_stops_the_refinery_before_anything_is_written(brepo):
    git(brepo, "checkout", "-q", "-b", "work")
    request(brepo, convoy(brepo), "Waiting", {"w.txt": "w\n"})
    cfg = brepo / ".brat" / "config.toml"
    cfg.write_text(cfg.read_text().replace("batch = 1", "batch = 0"))
    before, main = log_commits(brepo), git(brepo, "rev-parse", "main")
    code, msg = fail(brepo, "refinery", "run", "--once")
    assert code == 2 and "refinery.batch = 0 is not allowed" in msg
    code, msg = fail(brepo, "deacon", "run", "--once")
    assert code == 2
    assert log_commits(brepo) == before and git(brepo, "rev-parse", "main") == main
    assert not (brepo / ".git" / "brat" / "refinery").exists()


def test_unknown_flags_and_uninitialised_repositories(repo):
    code, _ = fail(repo, "refinery", "status")
    assert code == 4
    code, _ = fail(repo, "deacon", "run", "--once")
    assert code == 4
    brat(repo, "init")
    code, msg = fail(repo, "refinery", "run", "--bogus")
    assert code == 2
    code, msg = fail(repo, "init", "--hub")
    assert code == 2 and "bare" in msg


def test_deacon_and_refinery_work_from_a_subdirectory(brepo):
    (brepo / "deep" / "er").mkdir(parents=True)
    before = status(brepo)
    out = brat_json(brepo / "deep" / "er", "deacon", "run", "--once")
    assert set(out["duties"]) == {"leases", "sessions", "worktrees", "logs", "sync", "inbox"}
    assert json.loads(brat(brepo / "deep", "deacon", "status", "--json").out)["ran_at"]
    assert status(brepo) == before


def test_hub_init_chains_an_existing_post_receive_and_uninstall_restores_it(tmp_path):
    hub = seeded_hub(tmp_path)
    marker = tmp_path / "seen"
    write_hook(hub / "hooks", "post-receive", f"cat >> {marker}\n")
    original = (hub / "hooks" / "post-receive").read_bytes()
    out = brat_json(hub, "init", "--hub")
    assert [(h["hook"], h["action"]) for h in out["hooks"]] == [("post-receive", "chained")]
    assert out["config_created"] and (hub / "brat" / "config.toml").exists()
    assert 'trigger = "hook"' in (hub / "brat" / "config.toml").read_text()
    again = brat_json(hub, "init", "--hub")
    assert [h["action"] for h in again["hooks"]] == ["unchanged"] and not again["config_created"]
    c = clone(str(hub), tmp_path / "c", init=False)
    git(c, "commit", "-q", "--allow-empty", "-m", "more")
    push = run(["git", "push", "-q", "origin", "main"], c)
    assert push.returncode == 0
    assert "refs/heads/main" in marker.read_text()            # the user's hook saw the push
    grite(hub, "uninstall")
    assert (hub / "hooks" / "post-receive").read_bytes() == original


def test_every_refinery_and_deacon_command_prints_bare_json_and_keeps_git_status(brepo):
    (brepo / "untracked.txt").write_text("the user's own file\n")
    (brepo / "README").write_text("the user's unstaged edit\n")
    before = status(brepo)
    tid = request(brepo, convoy(brepo), "Lands", {"new.txt": "n\n"})
    for cmd in (["refinery", "status"], ["refinery", "run", "--once"], ["refinery", "status"],
                ["refinery", "stop"], ["deacon", "run", "--once"], ["deacon", "status"],
                ["status"]):
        proc = brat(brepo, *cmd, "--json")
        json.loads(proc.out)
        assert proc.err == "", (cmd, proc.err)
        assert status(brepo) == before, f"`git brat {' '.join(cmd)}` changed git status"
    assert brat_json(brepo, "task", "show", tid)["status"] == "merged"
    assert (brepo / "new.txt").read_text() == "n\n"            # main was checked out: brought along
