"""Git in what an agent wrote: a tree read with the witness's own git dir runs nothing of the
tree's, and a session's private objects come in only verified."""

from __future__ import annotations

import os
import zlib

import pytest

from helpers import git
from git_brat.errors import GriteError
from git_brat.git import quarantine, worktree
from git_brat.git.store import Store

WHO = {"GIT_AUTHOR_NAME": "An Agent", "GIT_AUTHOR_EMAIL": "agent@example.invalid",
       "GIT_COMMITTER_NAME": "A Witness", "GIT_COMMITTER_EMAIL": "witness@example.invalid"}


def _agent_tree(repo, tmp_path, marker):
    """A task's tree holding a committed nested repository whose own config runs a command
    (core.fsmonitor), a clean filter the user's config defines selected by the tree's
    .gitattributes, and work left uncommitted in both."""
    store, path = Store.discover(str(repo)), tmp_path / "tree"
    worktree.add(store.git_dir, str(path), branch="brat/t", start="main")
    git(path, "init", "-q", "vendor/lib")
    git(path / "vendor" / "lib", "commit", "-q", "--allow-empty", "-m", "lib")
    git(path / "vendor" / "lib", "config", "core.fsmonitor", f"echo fsmonitor >> '{marker}'; false")
    git(path, "add", "vendor/lib")
    git(path, "commit", "-q", "-m", "nested")
    git(repo, "config", "filter.evil.clean", f"echo filter >> '{marker}'; cat")
    (path / ".gitattributes").write_text("* filter=evil\n")
    (path / "vendor" / "lib" / "dirty.txt").write_text("x\n")
    (path / "left.txt").write_text("left\n")
    return store, str(path)


def test_the_deacon_s_look_and_a_later_salvage_run_nothing_the_tree_holds(repo, tmp_path):
    marker = tmp_path / "ran"
    store, path = _agent_tree(repo, tmp_path, marker)
    head = git(repo, "rev-parse", "brat/t")
    assert worktree.dirty(store.common_dir, path, head)
    sha = quarantine.commit_onto(store.common_dir, path, "brat/t", "brat: salvage", WHO)
    assert not marker.exists(), marker.read_text()
    assert sha == git(repo, "rev-parse", "brat/t")
    assert git(repo, "show", "-s", "--format=%an|%cn|%P", sha) == f"An Agent|A Witness|{head}"
    assert git(repo, "show", f"{sha}:left.txt") == "left"   # stored as it is, no filter
    assert not worktree.dirty(store.common_dir, path, sha)
    (tmp_path / "tree" / "README").write_text("changed\n")
    assert worktree.dirty(store.common_dir, path, sha)
    (tmp_path / "tree" / "README").unlink()
    assert worktree.dirty(store.common_dir, path, sha)
    assert not marker.exists(), marker.read_text()


def test_what_the_tree_s_head_names_is_neither_read_nor_moved(repo, tmp_path):
    store, path = Store.discover(str(repo)), tmp_path / "tree"
    worktree.add(store.git_dir, str(path), branch="brat/t", start="main")
    main = git(repo, "rev-parse", "main")
    gd = worktree.private_git_dir(str(path))
    with open(os.path.join(gd, "HEAD"), "w") as f:
        f.write("ref: refs/heads/main\n")
    (path / "left.txt").write_text("left\n")
    sha = quarantine.commit_onto(store.common_dir, str(path), "brat/t", "brat: salvage", WHO)
    assert git(repo, "rev-parse", "main") == main
    assert git(repo, "rev-parse", "brat/t") == sha
    worktree.point_head(str(path), "brat/t")
    assert worktree.on_branch(str(path)) == "brat/t"


def _session_commit(repo, tmp_path):
    """A commit made with a private object directory borrowing from the shared store:
    (private dir, commit, its new blob)."""
    private = tmp_path / "private"
    quarantine.make_private_store(str(private), str(repo / ".git"))
    (private / "info" / "alternates").unlink()   # names the store as a sandbox sees it
    shared = str(repo / ".git" / "objects")
    env = {"GIT_OBJECT_DIRECTORY": str(private), "GIT_ALTERNATE_OBJECT_DIRECTORIES": shared}
    blob = git(repo, "hash-object", "-w", "--stdin", input="the session's work\n", env=env)
    tree = git(repo, "mktree", input=f"100644 blob {blob}\twork.txt\n", env=env)
    commit = git(repo, "commit-tree", "-p", "main", "-m", "work", tree, env=env)
    return private, commit, blob


def test_a_session_s_objects_come_in_verified(repo, tmp_path):
    private, commit, blob = _session_commit(repo, tmp_path)
    store = Store.discover(str(repo))
    assert not store.objects.is_commit(commit)
    quarantine.take_in(store.common_dir, str(private), commit, [git(repo, "rev-parse", "main")])
    assert git(repo, "cat-file", "-t", commit) == "commit"
    assert git(repo, "rev-list", "--objects", commit).count("\n") >= 3
    assert not [n for n in os.listdir(repo / ".git" / "objects") if n.startswith("incoming-")]


@pytest.mark.parametrize("how", ["forged", "missing"])
def test_a_forged_or_missing_object_is_refused_and_nothing_comes_in(repo, tmp_path, how):
    private, commit, blob = _session_commit(repo, tmp_path)
    loose = private / blob[:2] / blob[2:]
    if how == "forged":
        body = b"other content under the same name\n"
        loose.chmod(0o644)
        loose.write_bytes(zlib.compress(b"blob %d\0" % len(body) + body))
    else:
        loose.unlink()
    packs = sorted(os.listdir(repo / ".git" / "objects" / "pack"))
    store = Store.discover(str(repo))
    with pytest.raises(GriteError):
        quarantine.take_in(store.common_dir, str(private), commit,
                           [git(repo, "rev-parse", "main")])
    assert sorted(os.listdir(repo / ".git" / "objects" / "pack")) == packs
    assert not store.objects.is_commit(commit)
