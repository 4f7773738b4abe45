"""Sync over the network: `git daemon --enable=receive-pack` on 127.0.0.1, a random free port."""

from __future__ import annotations

import pytest

from helpers import git, grite, grite_json, make_repo, run, wal_tip
from sync_helpers import Daemon, bare_hub, clone, issue_json, refs, replica_id


@pytest.fixture
def daemon(tmp_path):
    served = tmp_path / "served"
    served.mkdir()
    for name in ("hub.git", "strict.git"):
        hub = bare_hub(served / name)
        seed = make_repo(tmp_path / f"seed-{name}")
        git(seed, "push", "-q", str(hub), "main")
    # strict.git refuses grite refs, as a locked-down server might.
    hook = served / "strict.git" / "hooks" / "pre-receive"
    hook.write_text("#!/bin/sh\nwhile read old new ref; do\n  case $ref in refs/grite/*)"
                    " echo \"grite refs not accepted here\" >&2; exit 1;; esac\ndone\nexit 0\n")
    hook.chmod(0o755)
    d = Daemon(served).start()
    yield d
    d.stop()


def test_plain_push_fetch_and_pull_over_git_daemon(tmp_path, daemon):
    hub = tmp_path / "served" / "hub.git"
    a = clone(daemon.url("hub.git"), tmp_path / "a")
    b = clone(daemon.url("hub.git"), tmp_path / "b")

    grite(a, "issue", "create", "over the wire", "-l", "net")
    git(a, "commit", "-q", "--allow-empty", "-m", "a work")
    git(a, "push", "-q")                      # branch + a's log, over git://
    assert refs(hub)["refs/heads/main"] == git(a, "rev-parse", "main")
    assert refs(hub)[f"refs/grite/replicas/{replica_id(a)}"] == wal_tip(a)

    git(b, "pull", "-q", "--rebase")
    [issue] = grite_json(b, "issue", "list")
    assert issue["title"] == "over the wire"
    grite(b, "issue", "comment", issue["id"], "-m", "seen from b")
    out = grite_json(b, "sync")
    assert out["ok"] is True
    assert out["remotes"][0]["published"]["status"] == "pushed"

    git(a, "fetch", "-q")
    assert issue_json(a) == issue_json(b)
    c = clone(daemon.url("hub.git"), tmp_path / "c")     # fresh clone + init over the network
    assert issue_json(c) == issue_json(a)


def test_a_remote_refusing_the_replica_ref_costs_one_warning_line(tmp_path, daemon):
    strict = tmp_path / "served" / "strict.git"
    a = clone(daemon.url("strict.git"), tmp_path / "a")
    grite(a, "issue", "create", "kept local")
    git(a, "commit", "-q", "--allow-empty", "-m", "a work")

    proc = run(["git", "push", "-q"], a)                   # the user's push succeeds
    assert refs(strict)["refs/heads/main"] == git(a, "rev-parse", "main")
    assert not refs(strict, "refs/grite/")
    warnings = [ln for ln in proc.err.splitlines() if "grite" in ln]
    assert len(warnings) == 1 and warnings[0].startswith("warning: grite pre-push hook: could not "
                                                          "publish refs/grite/replicas/")

    proc = grite(a, "sync", "--json", check=False)
    assert proc.returncode == 1
    assert '"status":"failed"' in proc.out
