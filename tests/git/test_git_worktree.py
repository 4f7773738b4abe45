"""The one work-tree API of the witness, the refinery and the deacon, and landing a branch in a
work tree, against real repositories."""

from __future__ import annotations

import os
import stat

from helpers import git, make_repo, run
from git_brat.git import merge, quarantine, worktree
from git_brat.git.store import Store

IDENT = ("Landing Bot", "bot@example.invalid")


def _hook(repo, name: str, marker) -> None:
    path = repo / ".git" / "hooks" / name
    path.write_text(f"#!/bin/sh\necho ran >> {marker}\n")
    path.chmod(path.stat().st_mode | stat.S_IEXEC)


def test_an_agent_s_tree_on_a_new_branch_keeps_what_was_left_uncommitted(repo, tmp_path):
    store, path = Store.discover(str(repo)), str(tmp_path / "trees" / "t1")
    worktree.add(store.git_dir, path, branch="brat/t1", start="main")
    listed = {os.path.realpath(w["worktree"]): w.get("branch") for w in
              worktree.listing(store.common_dir)}
    assert listed[os.path.realpath(path)] == "refs/heads/brat/t1"
    (tmp_path / "trees" / "t1" / "work.txt").write_text("half done\n")
    (tmp_path / "trees" / "t1" / "scratch").mkdir()
    (tmp_path / "trees" / "t1" / "scratch" / "notes").write_text("mine\n")
    main = git(repo, "rev-parse", "main")
    assert worktree.dirty(store.common_dir, path, main)
    env = {"GIT_AUTHOR_NAME": "An Agent", "GIT_AUTHOR_EMAIL": "agent@example.invalid",
           "GIT_COMMITTER_NAME": "A Witness", "GIT_COMMITTER_EMAIL": "w@example.invalid"}
    sha = quarantine.commit_onto(store.common_dir, path, "brat/t1", "brat: salvage", env,
                                 skip=["scratch/"])
    assert sha == store.refs.branch_tip("brat/t1") == worktree.head(path)
    assert git(repo, "show", "-s", "--format=%an", sha) == "An Agent"
    assert git(repo, "ls-tree", "--name-only", sha).split() == ["README", "work.txt"]
    assert quarantine.commit_onto(store.common_dir, path, "brat/t1", "brat: salvage", env,
                                  skip=["scratch/"]) is None
    assert store.objects.count("main", "brat/t1") == 1
    assert store.objects.merge_base("main", "brat/t1") == git(repo, "rev-parse", "main")


def test_a_removed_tree_is_gone_but_its_branch_stays(repo, tmp_path):
    store, path = Store.discover(str(repo)), str(tmp_path / "t2")
    worktree.add(store.git_dir, path, branch="brat/t2", start="main")
    (tmp_path / "t2" / "left.txt").write_text("uncommitted\n")
    assert worktree.remove(store.common_dir, path)
    assert not os.path.exists(path)
    assert all(os.path.realpath(w["worktree"]) != os.path.realpath(path)
               for w in worktree.listing(store.common_dir))
    assert store.refs.branch_tip("brat/t2") == git(repo, "rev-parse", "main")
    # An existing branch is checked out again as it was.
    worktree.add(store.git_dir, path, branch="brat/t2")
    assert worktree.head(path) == git(repo, "rev-parse", "main")


def test_a_detached_tree_is_reset_to_exactly_a_commit(repo, tmp_path):
    store, path = Store.discover(str(repo)), str(tmp_path / "refinery")
    first = git(repo, "rev-parse", "HEAD")
    (repo / "b.txt").write_text("b\n")
    git(repo, "add", "b.txt")
    git(repo, "commit", "-q", "-m", "second")
    worktree.add(store.common_dir, path, start=first)
    entry = [w for w in worktree.listing(store.common_dir)
             if os.path.realpath(w["worktree"]) == os.path.realpath(path)][0]
    assert "branch" not in entry and entry["HEAD"] == first
    assert worktree.branches_containing(store.common_dir, first) == ["refs/heads/main"]
    (tmp_path / "refinery" / "README").write_text("changed\n")
    (tmp_path / "refinery" / "stray.txt").write_text("untracked\n")
    with open(repo / ".git" / "info" / "exclude", "a") as f:
        f.write("kept.log\n")
    (tmp_path / "refinery" / "kept.log").write_text("ignored\n")
    worktree.reset(path, git(repo, "rev-parse", "main"))
    assert worktree.head(path) == git(repo, "rev-parse", "main")
    assert (tmp_path / "refinery" / "README").read_text() == "hello\n"
    assert not (tmp_path / "refinery" / "stray.txt").exists()
    assert (tmp_path / "refinery" / "kept.log").exists()   # ignored files are not the tree's
    assert not worktree.dirty(store.common_dir, path, git(repo, "rev-parse", "main"))


def test_the_roles_trees_run_no_hook_and_an_agent_s_runs_the_user_s(repo, tmp_path):
    marker = tmp_path / "post-checkout-ran"
    _hook(repo, "post-checkout", marker)
    store = Store.discover(str(repo))
    worktree.add(store.common_dir, str(tmp_path / "role"), start="main")
    assert not marker.exists()
    worktree.add(store.git_dir, str(tmp_path / "agent"), branch="brat/a", start="main",
                 hooks=True)
    assert marker.read_text() == "ran\n"


def test_a_tree_is_found_from_its_own_directory_whatever_repository_the_caller_pinned(
        repo, tmp_path, monkeypatch):
    other = make_repo(tmp_path / "other")
    store, path = Store.discover(str(repo)), str(tmp_path / "t3")
    worktree.add(store.git_dir, path, branch="brat/t3", start="main")
    (tmp_path / "t3" / "new.txt").write_text("x\n")
    monkeypatch.setenv("GIT_DIR", str(other / ".git"))
    monkeypatch.setenv("GIT_WORK_TREE", str(other))
    assert worktree.dirty(store.common_dir, path, git(repo, "rev-parse", "main"))
    assert quarantine.commit_onto(store.common_dir, path, "brat/t3", "brat: salvage", {}) == \
        store.refs.branch_tip("brat/t3")
    assert git(other, "rev-list", "--count", "HEAD") == "1"


def test_the_user_s_checkout_status_and_files_are_read(repo):
    (repo / "new.txt").write_text("x\n")
    assert worktree.status(str(repo)) == ["?? new.txt"]
    assert worktree.tracked(str(repo)) == ["README"]
    assert Store.discover(str(repo)).tracked(["README", "new.txt"]) == {"README"}


def _branch(repo, name: str, path: str, text: str) -> str:
    git(repo, "checkout", "-q", "-b", name, "main")
    (repo / path).write_text(text)
    git(repo, "add", path)
    git(repo, "commit", "-q", "-m", f"{name}: {path}")
    head = git(repo, "rev-parse", "HEAD")
    git(repo, "checkout", "-q", "main")
    return head


def _landing_tree(repo, tmp_path) -> str:
    path = str(tmp_path / "landing")
    worktree.add(str(repo / ".git"), path, start="main")
    return path


def test_rebase_squash_and_merge_land_a_branch_on_the_tree_s_head(repo, tmp_path):
    a = _branch(repo, "a", "a.txt", "a\n")
    b = _branch(repo, "b", "b.txt", "b\n")
    c = _branch(repo, "c", "c.txt", "c\n")
    path = _landing_tree(repo, tmp_path)
    assert merge.apply_rebase(path, a, IDENT) == (True, [])
    assert merge.apply_squash(path, b, "squashed b", IDENT) == (True, [])
    assert merge.apply_merge(path, c, "Merge c", IDENT) == (True, [])
    log = git(repo, "-C", path, "log", "--format=%s", "--first-parent").splitlines()
    assert log == ["Merge c", "squashed b", "a: a.txt", "initial"]
    assert sorted(os.listdir(path)) == [".git", "README", "a.txt", "b.txt", "c.txt"]


def test_a_conflict_is_reported_by_file_and_leaves_the_tree_as_it_was(repo, tmp_path):
    one = _branch(repo, "one", "README", "one\n")
    two = _branch(repo, "two", "README", "two\n")
    path = _landing_tree(repo, tmp_path)
    assert merge.apply_rebase(path, one, IDENT) == (True, [])
    landed = worktree.head(path)
    for apply in (lambda: merge.apply_rebase(path, two, IDENT),
                  lambda: merge.apply_squash(path, two, "squash two", IDENT),
                  lambda: merge.apply_merge(path, two, "Merge two", IDENT)):
        assert apply() == (False, ["README"])
        assert worktree.head(path) == landed and \
            not worktree.dirty(str(repo / ".git"), path, landed)


def test_a_merge_is_committed_as_the_given_identity_when_git_has_none(repo, tmp_path,
                                                                        monkeypatch):
    b = _branch(repo, "b", "b.txt", "b\n")
    path = _landing_tree(repo, tmp_path)
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", os.devnull)
    git(repo, "config", "user.useConfigOnly", "true")
    assert not run(["git", "var", "GIT_COMMITTER_IDENT"], path, check=False).returncode == 0
    assert merge.apply_squash(path, b, "squashed b", IDENT) == (True, [])
    assert git(repo, "-C", path, "show", "-s", "--format=%cn <%ce>", "HEAD") == \
        "Landing Bot <bot@example.invalid>"


def test_a_merge_keeps_git_s_own_identity_when_it_has_one(repo, tmp_path):
    b = _branch(repo, "b", "b.txt", "b\n")
    path = _landing_tree(repo, tmp_path)
    assert merge.apply_merge(path, b, "Merge b", IDENT) == (True, [])
    assert git(repo, "-C", path, "show", "-s", "--format=%cn", "HEAD") == "Test User"


def test_a_checkout_of_the_target_is_brought_forward_only_by_fast_forward(repo, tmp_path):
    ahead = _branch(repo, "ahead", "x.txt", "x\n")
    assert merge.ff_checkout(str(repo), ahead).ok
    assert git(repo, "rev-parse", "main") == ahead
    sideways = _branch(repo, "side", "y.txt", "y\n")
    git(repo, "commit", "-q", "--allow-empty", "-m", "main moves on")
    res = merge.ff_checkout(str(repo), sideways)
    assert not res.ok and res.error_line()
