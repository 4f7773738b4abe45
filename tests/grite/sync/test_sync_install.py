"""Setting up sync: refspecs and hooks on init, plain `git push` unchanged, chaining, uninstall."""

from __future__ import annotations

import json
import os
import shutil

from helpers import git, grite, grite_json, run, wal_tip
from sync_helpers import bare_hub, clone, refs, replica_id, seeded_hub, snapshot_dir, write_hook

SPEC = "+refs/grite/*:refs/remotes/{}/grite/*"


def test_init_sets_up_every_remote_and_plain_push_still_pushes_branches(tmp_path):
    hub = seeded_hub(tmp_path)
    backup = bare_hub(tmp_path / "backup.git")
    a = clone(str(hub), tmp_path / "a", init=False)
    git(a, "remote", "add", "backup", str(backup))

    out = grite_json(a, "init")
    assert out["remotes"] == ["backup", "origin"]
    assert {h["hook"]: h["action"] for h in out["hooks"]} == {
        "reference-transaction": "installed", "post-merge": "installed",
        "post-rewrite": "installed", "pre-push": "installed"}
    for r in ("origin", "backup"):
        assert SPEC.format(r) in git(a, "config", "--get-all", f"remote.{r}.fetch").splitlines()
        assert run(["git", "config", "--get-all", f"remote.{r}.push"], a, check=False).out == ""

    # Plain `git push` (push.default=simple, upstream origin/main) pushes the branch as before,
    # and publishes this replica's log next to it.
    grite(a, "issue", "create", "first")
    git(a, "commit", "-q", "--allow-empty", "-m", "work")
    git(a, "push", "-q", "--dry-run")                  # a dry run publishes nothing either
    git(a, "push", "-qn", "origin", "main")
    assert not refs(hub, "refs/grite/")
    git(a, "push", "-q")
    hub_refs = refs(hub)
    assert hub_refs["refs/heads/main"] == git(a, "rev-parse", "main")
    assert hub_refs[f"refs/grite/replicas/{replica_id(a)}"] == wal_tip(a)

    # --set-upstream works and records the upstream.
    git(a, "switch", "-q", "-c", "feature")
    git(a, "commit", "-q", "--allow-empty", "-m", "feature work")
    git(a, "push", "-q", "--set-upstream", "origin", "feature")
    assert refs(hub)["refs/heads/feature"] == git(a, "rev-parse", "feature")
    assert git(a, "rev-parse", "--abbrev-ref", "feature@{upstream}") == "origin/feature"

    # push.default=upstream: the branch goes to its upstream's (different) name.
    git(a, "switch", "-q", "-c", "topic", "--track", "origin/feature")
    git(a, "commit", "-q", "--allow-empty", "-m", "topic work")
    git(a, "-c", "push.default=upstream", "push", "-q")
    assert refs(hub)["refs/heads/feature"] == git(a, "rev-parse", "topic")

    # The pitfall grite avoids: with a bare remote.<r>.push entry a plain push stops pushing
    # the branch (only the configured ref goes).
    git(a, "commit", "-q", "--allow-empty", "-m", "more topic work")
    git(a, "-c", "push.default=upstream",
        "-c", f"remote.origin.push=refs/grite/wal:refs/grite/replicas/{replica_id(a)}", "push", "-q")
    assert refs(hub)["refs/heads/feature"] != git(a, "rev-parse", "topic")
    git(a, "-c", "push.default=upstream", "push", "-q")   # grite's setup: the branch goes again
    assert refs(hub)["refs/heads/feature"] == git(a, "rev-parse", "topic")


def test_installing_twice_changes_nothing(tmp_path):
    hub = seeded_hub(tmp_path)
    a = clone(str(hub), tmp_path / "a")
    hooks, config = snapshot_dir(a / ".git" / "hooks"), (a / ".git" / "config").read_bytes()
    out = grite_json(a, "init")
    assert {h["action"] for h in out["hooks"]} == {"unchanged"}
    assert snapshot_dir(a / ".git" / "hooks") == hooks
    assert (a / ".git" / "config").read_bytes() == config


def test_existing_hooks_still_run_first_and_uninstall_restores_them_byte_for_byte(tmp_path):
    hub = seeded_hub(tmp_path)
    a = clone(str(hub), tmp_path / "a", init=False)
    b = clone(str(hub), tmp_path / "b")
    hooks_dir = a / ".git" / "hooks"
    log = tmp_path / "pre-push.log"
    write_hook(hooks_dir, "pre-push",
               f'echo "args: $*" > "{log}"\ncat >> "{log}"\ntest ! -e "{tmp_path}/reject"\n')
    write_hook(hooks_dir, "post-merge", f'echo "post-merge $*" >> "{tmp_path}/merged"\n')
    write_hook(hooks_dir, "post-rewrite", "echo not executable, git ignores me\n", mode=0o644)
    txlog = tmp_path / "tx.log"
    write_hook(hooks_dir, "reference-transaction", f'echo "$1" >> "{txlog}"\ncat >> "{txlog}"\n')
    (hooks_dir / "pre-push").chmod(0o750)
    before_hooks, before_config = snapshot_dir(hooks_dir), (a / ".git" / "config").read_bytes()

    out = grite_json(a, "init")
    actions = {h["hook"]: h["action"] for h in out["hooks"]}
    assert actions == {"reference-transaction": "chained", "post-merge": "chained",
                       "post-rewrite": "chained", "pre-push": "chained"}
    grite(a, "issue", "create", "from a")
    git(a, "commit", "-q", "--allow-empty", "-m", "a work")
    main = git(a, "rev-parse", "main")

    # The user's pre-push rejects: the push fails with it, nothing reaches the hub.
    (tmp_path / "reject").touch()
    proc = run(["git", "push"], a, check=False)
    assert proc.returncode != 0
    assert f"refs/grite/replicas/{replica_id(a)}" not in refs(hub)
    assert refs(hub)["refs/heads/main"] != main
    # It saw exactly what git gives a pre-push hook: remote, URL, and the refs on stdin.
    old = refs(hub)["refs/heads/main"]
    assert log.read_text() == f"args: origin {hub}\nrefs/heads/main {main} refs/heads/main {old}\n"

    (tmp_path / "reject").unlink()
    git(a, "push", "-q")
    assert refs(hub)["refs/heads/main"] == main
    assert refs(hub)[f"refs/grite/replicas/{replica_id(a)}"] == wal_tip(a)

    # The user's post-merge still runs on `git pull`, and the pull brings b's issue in.
    grite(b, "issue", "create", "from b")
    git(b, "pull", "-q", "--no-rebase")
    git(b, "commit", "-q", "--allow-empty", "-m", "b work")
    git(b, "push", "-q")
    git(a, "pull", "-q", "--no-rebase")
    assert (tmp_path / "merged").read_text() == "post-merge 0\n"
    imported = (a / ".git" / "grite" / "sync" / "imported").read_text()
    assert f"refs/remotes/origin/grite/replicas/{replica_id(b)}" in imported   # by the hooks
    titles = {i["title"] for i in grite_json(a, "issue", "list")}
    assert titles == {"from a", "from b"}
    # The user's reference-transaction hook saw every state and every ref line, as before.
    tx = txlog.read_text()
    assert f" {git(a, 'rev-parse', 'HEAD')} refs/heads/main\n" in tx
    assert f"refs/remotes/origin/grite/replicas/{replica_id(b)}\n" in tx
    assert tx.count("prepared\n") == tx.count("committed\n") > 3

    out = grite_json(a, "uninstall")
    assert {h["hook"]: h["action"] for h in out["hooks"]} == {
        "reference-transaction": "restored", "post-merge": "restored",
        "post-rewrite": "restored", "pre-push": "restored"}
    assert out["remotes"] == ["origin"]
    assert snapshot_dir(hooks_dir) == before_hooks
    assert (a / ".git" / "config").read_bytes() == before_config


def test_core_hooks_path_is_honoured(tmp_path):
    hub = seeded_hub(tmp_path)
    a = clone(str(hub), tmp_path / "a", init=False)
    b = clone(str(hub), tmp_path / "b")
    shared = tmp_path / "shared-hooks"           # does not exist yet: grite creates it
    git(a, "config", "core.hooksPath", str(shared))
    dot_hooks = snapshot_dir(a / ".git" / "hooks")

    out = grite_json(a, "init")
    assert out["hooks_dir"] == str(shared)
    assert sorted(p.name for p in shared.iterdir()) == [
        ".grite", "post-merge", "post-rewrite", "pre-push", "reference-transaction"]
    assert snapshot_dir(a / ".git" / "hooks") == dot_hooks

    grite(b, "issue", "create", "from b")
    grite(b, "sync")
    # The hook in the shared dir imports b's log, even with no git-grite or python on PATH.
    git(a, "fetch", "-q", env={"PATH": os.path.dirname(shutil.which("git"))})
    imported = (a / ".git" / "grite" / "sync" / "imported").read_text()
    assert f"refs/remotes/origin/grite/replicas/{replica_id(b)}" in imported

    grite(a, "uninstall")
    assert not shared.exists()
    assert snapshot_dir(a / ".git" / "hooks") == dot_hooks


def test_remote_added_later_is_set_up_with_add_sync(tmp_path):
    hub = seeded_hub(tmp_path)
    other = bare_hub(tmp_path / "other.git")
    a = clone(str(hub), tmp_path / "a")
    grite(a, "issue", "create", "x")
    git(a, "remote", "add", "other", str(other))
    git(a, "push", "-q", "other", "main")
    assert not refs(other, "refs/grite/")   # not set up: a plain push leaves grite out

    out = grite_json(a, "remote", "add-sync", "other")
    assert out["added"] is True and out["fetched"] is True
    assert grite_json(a, "remote", "add-sync", "other")["added"] is False
    listing = {r["remote"]: r["sync"] for r in grite_json(a, "remote", "list")}
    assert listing == {"origin": True, "other": True}
    git(a, "commit", "-q", "--allow-empty", "-m", "w")
    git(a, "push", "-q", "other", "main")
    assert refs(other, "refs/grite/")[f"refs/grite/replicas/{replica_id(a)}"] == wal_tip(a)

    assert grite_json(a, "remote", "remove-sync", "other")["removed"] is True
    assert SPEC.format("other") not in git(a, "config", "--get-all", "remote.other.fetch")
    proc = grite(a, "remote", "add-sync", "nope", check=False)
    assert proc.returncode == 3 and proc.err.startswith("git-grite: error: no remote named")
    assert json.loads(grite(a, "remote", "list", "--json").out)[1]["sync"] is False


def test_sync_from_a_subdirectory_and_hooks_in_a_linked_worktree(tmp_path):
    hub = seeded_hub(tmp_path)
    b = clone(str(hub), tmp_path / "b")
    a = tmp_path / "a"
    git(tmp_path, "clone", "-q", "hub.git", "a")          # relative URL: ../hub.git from a/
    assert git(a, "remote", "get-url", "origin").endswith("hub.git")
    git(a, "remote", "set-url", "origin", "../hub.git")
    sub = a / "sub"
    sub.mkdir()
    grite(sub, "init")
    grite(b, "issue", "create", "from b")
    grite(b, "sync")
    out = grite_json(sub, "sync")
    assert out["ok"] is True and out["events"] > 0

    wt = tmp_path / "a-wt"
    git(a, "worktree", "add", "-q", "-b", "wt", str(wt))
    grite(b, "issue", "create", "second from b")
    grite(b, "sync")
    git(wt, "fetch", "-q")                                 # the shared hooks run in the worktree
    imported = (a / ".git" / "grite" / "sync" / "imported").read_text()
    assert git(b, "rev-parse", "refs/grite/wal") in imported
    assert {i["title"] for i in grite_json(wt, "issue", "list")} == {"from b", "second from b"}


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
