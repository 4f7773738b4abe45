"""The one runner of git: git's own error line, bounded time, no git at all, and values that
look like options never read as options."""

from __future__ import annotations

import time

import pytest

from helpers import git
from git_brat.errors import GriteError
from git_brat.git import run as gitrun
from git_brat.git.run import environment, run
from git_brat.git.store import Store


def test_a_failed_command_says_what_git_said_went_wrong(repo):
    res = run(["checkout", "no-such-branch"], cwd=str(repo))
    assert not res.ok and res.code != 0
    assert res.error_line() == "pathspec 'no-such-branch' did not match any file(s) known to git"


def test_the_error_line_wins_over_the_lines_and_hints_around_it(repo, tmp_path):
    bare = tmp_path / "bare.git"
    git(tmp_path, "init", "-q", "--bare", str(bare))
    git(repo, "push", "-q", str(bare), "main")
    git(repo, "commit", "-q", "--amend", "--allow-empty", "-m", "rewritten")
    res = run(["push", str(bare), "main"], cwd=str(repo))
    assert not res.ok and "hint:" in res.err and " ! [rejected]" in res.err
    assert res.error_line() == f"failed to push some refs to '{bare}'"


def test_a_silent_failure_names_the_command_and_its_exit_code(repo):
    head = git(repo, "rev-parse", "HEAD")
    git(repo, "commit", "-q", "--allow-empty", "-m", "second")
    res = run(["merge-base", "--is-ancestor", git(repo, "rev-parse", "HEAD"), head],
              cwd=str(repo))
    assert res.code == 1 and res.err == ""
    assert res.error_line() == "git merge-base exited 1"


def test_check_raises_with_the_command_and_git_s_reason(repo):
    with pytest.raises(GriteError) as err:
        run(["rev-parse", "--verify", "no-such-rev"], cwd=str(repo), check=True)
    assert str(err.value.message) == "git rev-parse failed: Needed a single revision"


def test_output_is_there_as_text_and_as_the_bytes_git_wrote(repo):
    res = run(["rev-parse", "HEAD"], cwd=str(repo))
    assert res.ok and res.out.strip() == git(repo, "rev-parse", "HEAD")
    assert res.stdout == res.out.encode()


def test_a_git_that_runs_past_its_timeout_is_a_failure_not_a_hang(repo):
    started = time.monotonic()
    res = run(["-c", "alias.nap=!sleep 3", "nap"], cwd=str(repo), timeout=0.5)
    assert time.monotonic() - started < 2.5
    assert res.code == gitrun.TIMED_OUT and not res.ok
    assert res.error_line() == "timed out after 0s" or res.error_line().startswith("timed out")


def test_no_git_on_the_path_is_a_failure_not_a_crash(tmp_path):
    res = run(["status"], cwd=str(tmp_path), env={"PATH": str(tmp_path / "nowhere")})
    assert res.code == gitrun.NOT_FOUND and not res.ok
    assert res.error_line().startswith("cannot run git")


def test_a_branch_named_like_an_option_is_read_as_a_branch(repo):
    first = git(repo, "rev-parse", "HEAD")
    git(repo, "update-ref", "refs/heads/--all", first)   # git refuses such a name only in porcelain
    git(repo, "commit", "-q", "--allow-empty", "-m", "second")
    store = Store.discover(str(repo))
    assert store.objects.rev("--all") == first
    assert store.objects.count("--all", "main") == 1
    assert store.objects.merge_base("--all", "main") == first
    assert store.objects.is_ancestor("--all", "main")
    assert store.catfile.rev_list(["--all"]) == [first]
    assert store.catfile.rev_list(["main"], [first]) == [git(repo, "rev-parse", "HEAD")]


def test_a_remote_named_like_an_option_never_runs_a_command(repo, tmp_path):
    pwned = tmp_path / "pwned"
    store = Store.discover(str(repo))
    res = store.remote.fetch(f"--upload-pack=touch {pwned}", ["+refs/heads/*:refs/x/*"],
                             environment("transport"), timeout=30)
    assert not res.ok and not pwned.exists()
    res = store.remote.push(f"--receive-pack=touch {pwned}", ["HEAD:refs/heads/x"],
                            environment("transport"), timeout=30)
    assert not res.ok and not pwned.exists()


def test_work_tree_commands_ignore_the_repository_the_caller_was_pinned_to(monkeypatch):
    monkeypatch.setenv("GIT_DIR", "/elsewhere/.git")
    monkeypatch.setenv("GIT_INDEX_FILE", "/elsewhere/index")
    for preset in ("checkout", "worktree"):
        env = environment(preset)
        assert "GIT_DIR" not in env and "GIT_INDEX_FILE" not in env
    assert environment("repo")["GIT_DIR"] == "/elsewhere/.git"


def test_work_trees_and_transport_never_prompt_nor_re_enter_grite_s_hooks():
    for preset in ("worktree", "transport"):
        env = environment(preset, {"EXTRA": "1"})
        assert env[gitrun.SKIP_HOOKS] == "1" and env["GIT_TERMINAL_PROMPT"] == "0"
        assert env["EXTRA"] == "1"
    assert gitrun.SKIP_HOOKS not in environment("checkout")
