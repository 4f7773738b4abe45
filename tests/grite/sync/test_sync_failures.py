"""Hooks never break git; a rewound or rewritten replica ref never makes a clone forget."""

from __future__ import annotations

import json
import re
import shutil

from helpers import git, grite, grite_json, run
from sync_helpers import clone, refs, replica_id, seeded_hub


def _grite_lines(stderr: str) -> list[str]:
    return [ln for ln in stderr.splitlines() if ln.startswith("warning:") and "grite" in ln]


def _set_shim_python(repo, python: str) -> None:
    for name in ("reference-transaction", "post-merge", "pre-push"):
        shim = repo / ".git" / "hooks" / name
        text = re.sub(r"^GRITE_PY=.*$", f"GRITE_PY='{python}'", shim.read_text(), flags=re.M)
        shim.write_text(text)


def test_grite_failures_in_hooks_never_fail_the_git_command(tmp_path):
    hub = seeded_hub(tmp_path)
    a = clone(str(hub), tmp_path / "a")
    b = clone(str(hub), tmp_path / "b")
    grite(b, "issue", "create", "from b")
    grite(b, "sync")

    # A broken cache (a file where the cache directory should be): fetch works, one warning.
    cache = a / ".git" / "grite" / "cache"
    shutil.rmtree(cache)
    cache.write_text("not a directory")
    proc = run(["git", "fetch", "-q"], a)
    [line] = _grite_lines(proc.err)
    assert line.startswith("warning: grite reference-transaction hook:")
    assert f"refs/remotes/origin/grite/replicas/{replica_id(b)}" in refs(a)
    cache.unlink()

    # The python that installed the hooks is gone: push and pull work, one warning line each.
    _set_shim_python(a, str(tmp_path / "no" / "python3"))
    grite(b, "issue", "create", "second from b")
    git(b, "commit", "-q", "--allow-empty", "-m", "b work")
    git(b, "push", "-q")
    proc = run(["git", "pull", "-q", "--no-rebase"], a)
    assert [ln.startswith("warning: git-grite:") for ln in _grite_lines(proc.err)] == [True, True]
    git(a, "commit", "-q", "--allow-empty", "-m", "a work")
    proc = run(["git", "push", "-q"], a)
    [line] = _grite_lines(proc.err)
    assert "is gone; grite hook skipped" in line
    assert refs(hub)["refs/heads/main"] == git(a, "rev-parse", "main")
    # ...and grite itself still sees everything fetched (the view is keyed by the refs).
    assert {i["title"] for i in grite_json(a, "issue", "list")} == {"from b", "second from b"}


def test_ordinary_commits_do_not_start_python(tmp_path):
    hub = seeded_hub(tmp_path)
    a = clone(str(hub), tmp_path / "a")
    b = clone(str(hub), tmp_path / "b")
    calls = tmp_path / "calls"
    spy = tmp_path / "spy-python"
    real = re.search(r"^GRITE_PY='(.*)'$", (a / ".git/hooks/pre-push").read_text(), re.M).group(1)
    spy.write_text(f'#!/bin/sh\necho "$@" >> "{calls}"\nexec "{real}" "$@"\n')
    spy.chmod(0o755)
    _set_shim_python(a, str(spy))

    for i in range(3):
        git(a, "commit", "-q", "--allow-empty", "-m", f"c{i}")
    git(a, "commit", "-q", "--amend", "--allow-empty", "-m", "amended")
    git(a, "switch", "-q", "-c", "other")
    assert not calls.exists()

    grite(b, "issue", "create", "from b")
    grite(b, "sync")
    git(a, "fetch", "-q")
    assert "hook reference-transaction committed" in calls.read_text()


def test_a_rewound_replica_ref_is_kept_and_doctor_reports_it(tmp_path):
    hub = seeded_hub(tmp_path)
    a = clone(str(hub), tmp_path / "a")
    b = clone(str(hub), tmp_path / "b")
    for t in ("one", "two", "three"):
        grite(a, "issue", "create", t)
    grite(a, "sync")
    git(b, "fetch", "-q")
    replica = f"refs/grite/replicas/{replica_id(a)}"
    first_tip = refs(hub)[replica]
    titles = {"one", "two", "three"}
    assert {i["title"] for i in grite_json(b, "issue", "list")} == titles

    # The hub rewinds a's log by two commits; b's plain fetch follows (forced update).
    git(hub, "update-ref", replica, f"{first_tip}~2")
    proc = run(["git", "fetch"], b)
    assert "forced update" in proc.err
    [line] = _grite_lines(proc.err)
    assert "rewound or rewritten by its remote; what it had is kept" in line
    assert {i["title"] for i in grite_json(b, "issue", "list")} == titles
    grite(b, "rebuild")
    assert {i["title"] for i in grite_json(b, "issue", "list")} == titles

    proc = grite(b, "doctor", "--json", check=False)
    assert proc.returncode == 6
    [finding] = [f for f in json.loads(proc.out)["findings"] if f["kind"] == "rewrite"]
    assert finding["subject"] == f"refs/remotes/origin/{replica.removeprefix('refs/')}"
    assert "possible tampering" in finding["detail"] and first_tip[:12] in finding["detail"]
    assert finding["fixed"] is False
    assert grite(b, "doctor", "--fix").returncode == 0       # acknowledged; the events stay
    assert grite(b, "doctor").returncode == 0
    assert {i["title"] for i in grite_json(b, "issue", "list")} == titles

    # a publishes again: its log is a fast-forward of what the hub now has.
    grite(a, "issue", "create", "four")
    assert grite_json(a, "sync")["remotes"][0]["published"]["status"] == "pushed"


def test_a_deleted_replica_fetched_with_hooks_off_is_still_kept(tmp_path):
    hub = seeded_hub(tmp_path)
    a = clone(str(hub), tmp_path / "a")
    b = clone(str(hub), tmp_path / "b")
    grite(a, "issue", "create", "survivor")
    grite(a, "sync")
    git(b, "fetch", "-q")
    assert [i["title"] for i in grite_json(b, "issue", "list")] == ["survivor"]

    replica = f"refs/grite/replicas/{replica_id(a)}"
    git(hub, "update-ref", "-d", replica)
    # No hooks at all this time (core.hooksPath pointing nowhere), and a pruning fetch.
    git(b, "-c", f"core.hooksPath={tmp_path / 'nowhere'}", "fetch", "-q", "--prune")
    assert f"refs/remotes/origin/{replica.removeprefix('refs/')}" not in refs(b)
    grite(b, "rebuild")
    assert [i["title"] for i in grite_json(b, "issue", "list")] == ["survivor"]
    # A deletion (pruned here; `git remote remove` looks the same) is kept but is no alarm.
    report = grite_json(b, "doctor")
    [finding] = [f for f in report["findings"] if f["kind"] == "deleted-log"]
    assert finding["fixed"] is True and "refs/grite/attic/" in finding["detail"]
    assert report["ok"] is True
