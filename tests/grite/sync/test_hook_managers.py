"""grite's hooks beside real hook managers: husky (npm) and pre-commit (PyPI), lefthook if it installs.

Installed before grite and after it; in each case the user's hooks still run (and still decide
a push), grite still publishes, `uninstall` undoes only what grite did, and `doctor` notices
when grite's hooks are no longer live.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from helpers import brat, git, grite, grite_json, run
from sync_helpers import clone, refs, replica_id, seeded_hub

CACHE = Path(tempfile.gettempdir()) / "git-brat-test-cache"


def _npm_package(name: str, binary: str) -> Path:
    """`npm install` name into a cache outside the tree (once); skip with the reason if impossible."""
    npm = shutil.which("npm")
    if npm is None:
        pytest.skip(f"npm is not installed: the {name} tests need it (CI installs it)")
    prefix = CACHE / "npm"
    path = prefix / "node_modules" / ".bin" / binary
    if not path.exists():
        prefix.mkdir(parents=True, exist_ok=True)
        proc = subprocess.run([npm, "install", "--prefix", str(prefix), "--no-audit", "--no-fund",
                               name], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              timeout=300)
        if proc.returncode != 0 or not path.exists():
            pytest.skip(f"npm could not install {name}: "
                        f"{proc.stdout.decode('utf-8', 'replace').strip()[-300:]}")
    return path


@pytest.fixture(scope="session")
def husky() -> Path:
    _npm_package("husky@9", "husky")
    return CACHE / "npm" / "node_modules" / "husky" / "bin.js"


@pytest.fixture(scope="session")
def pre_commit() -> list[str]:
    try:
        import pre_commit  # noqa: F401
    except ImportError:
        pytest.skip("pre-commit is not installed (pip install '.[test]')")
    return [sys.executable, "-m", "pre_commit"]


def _husky(repo: Path, husky: Path, *args: str) -> None:
    run(["node", str(husky), *args], repo)


def _hub_and_clone(tmp_path, init: bool = True):
    hub = seeded_hub(tmp_path)
    a = clone(str(hub), tmp_path / "a", init=init)
    return hub, a


def _published(hub: Path, repo: Path) -> bool:
    return f"refs/grite/replicas/{replica_id(repo)}" in refs(hub, "refs/grite/")


def _push_blocked_then_allowed(hub: Path, repo: Path, user_hook: Path, marker: str) -> None:
    """The user's pre-push runs and decides; once it allows, grite publishes."""
    user_hook.write_text(f"echo {marker} >&2\nexit 1\n")
    user_hook.chmod(0o755)
    grite(repo, "issue", "create", "work")
    (repo / "f").write_text("1\n")
    git(repo, "add", "f")
    git(repo, "commit", "-q", "-m", "work")
    blocked = run(["git", "push", "origin", "main"], repo, check=False)
    assert blocked.returncode != 0 and marker in blocked.err, blocked.err
    assert not _published(hub, repo)
    user_hook.write_text(f"echo {marker} >&2\nexit 0\n")
    allowed = run(["git", "push", "origin", "main"], repo)
    assert marker in allowed.err
    assert _published(hub, repo)


def test_husky_hooks_still_run_when_husky_was_there_before_grite(tmp_path, husky):
    hub, a = _hub_and_clone(tmp_path, init=False)
    _husky(a, husky)
    grite(a, "init")
    assert (a / ".husky" / "_" / ".grite" / "pre-push").exists()
    _push_blocked_then_allowed(hub, a, a / ".husky" / "pre-push", "husky-pre-push-ran")
    assert grite(a, "doctor").returncode == 0
    assert ".husky/_" not in git(a, "status", "--porcelain")
    # `npm install` runs husky again (its `prepare`): it rewrites its stubs over grite's shims.
    _husky(a, husky)
    assert grite(a, "doctor", check=False).returncode == 6
    grite(a, "doctor", "--fix")
    assert grite(a, "doctor").returncode == 0
    grite(a, "issue", "create", "after husky ran again")
    (a / ".husky" / "pre-push").write_text("echo husky-again >&2\nexit 0\n")
    before = refs(hub, "refs/grite/")
    assert "husky-again" in run(["git", "push", "origin", "main"], a).err
    assert refs(hub, "refs/grite/") != before


def test_husky_installed_after_grite_is_noticed_and_doctor_fix_puts_grite_back(tmp_path, husky):
    hub, a = _hub_and_clone(tmp_path)
    brat(a, "init")
    _husky(a, husky)   # moves core.hooksPath to .husky/_: grite's shims are not live any more
    doc = grite(a, "doctor", "--json", check=False)
    assert doc.returncode == 6
    [finding] = [f for f in json.loads(doc.out)["findings"] if f["kind"] == "hooks-missing"]
    assert finding["subject"].endswith(".husky/_")
    shown = brat(a, "status").out
    assert "warning: grite's hooks are not live" in shown
    assert all(len(line) <= 80 for line in shown.splitlines())
    grite(a, "doctor", "--fix")
    assert grite(a, "doctor").returncode == 0
    assert "warning" not in brat(a, "status").out
    _push_blocked_then_allowed(hub, a, a / ".husky" / "pre-push", "husky-after-grite")


def test_hooks_path_changed_by_hand_is_reported_by_doctor(tmp_path):
    _hub, a = _hub_and_clone(tmp_path)
    git(a, "config", "core.hooksPath", str(tmp_path / "elsewhere"))
    doc = grite_json(a, "doctor", check=False)
    assert not doc["ok"] and [f["kind"] for f in doc["findings"]] == ["hooks-missing"]
    grite(a, "doctor", "--fix")
    assert grite_json(a, "doctor")["ok"]


PRE_COMMIT_CONFIG = """\
repos:
- repo: local
  hooks:
  - id: gate
    name: gate
    entry: sh -c 'echo pre-commit-gate-ran; test -f allow-push'
    language: system
    stages: [pre-push]
    always_run: true
    pass_filenames: false
"""


def _pre_commit_repo(tmp_path, pre_commit, grite_first: bool):
    hub, a = _hub_and_clone(tmp_path, init=grite_first)
    (a / ".pre-commit-config.yaml").write_text(PRE_COMMIT_CONFIG)
    git(a, "add", ".pre-commit-config.yaml")
    git(a, "commit", "-q", "-m", "pre-commit")
    run([*pre_commit, "install", "-t", "pre-push", "-t", "post-merge"], a)
    if not grite_first:
        grite(a, "init")
    return hub, a


@pytest.mark.parametrize("grite_first", [True, False], ids=["grite-first", "pre-commit-first"])
def test_pre_commit_gates_the_push_and_grite_still_publishes(tmp_path, pre_commit, grite_first):
    hub, a = _pre_commit_repo(tmp_path, pre_commit, grite_first)
    if grite_first:
        # pre-commit keeps grite's shim as pre-push.legacy and would run it before its own
        # gate: doctor says so, and --fix puts pre-commit's hook first, as a chained hook.
        doc = grite_json(a, "doctor", check=False)
        assert not doc["ok"] and "runs before" in " ".join(f["detail"] for f in doc["findings"])
        grite(a, "doctor", "--fix")
    grite(a, "issue", "create", "work")
    blocked = run(["git", "push", "origin", "main"], a, check=False)
    assert blocked.returncode != 0 and "pre-commit-gate-ran" in blocked.out + blocked.err
    assert not _published(hub, a)   # the gate decided, before grite published anything
    (a / "allow-push").write_text("")
    run(["git", "push", "origin", "main"], a)
    assert _published(hub, a)
    assert grite(a, "doctor").returncode == 0


def test_uninstall_after_pre_commit_install_removes_the_shims_it_moved(tmp_path, pre_commit):
    _hub, a = _pre_commit_repo(tmp_path, pre_commit, grite_first=True)
    hooks = a / ".git" / "hooks"
    assert (hooks / "pre-push.legacy").exists()   # pre-commit kept grite's shim there
    out = grite_json(a, "uninstall")
    assert any("moved to" in h["detail"] for h in out["hooks"])
    run([*pre_commit, "uninstall", "-t", "pre-push", "-t", "post-merge"], a)
    left = [p.name for p in hooks.iterdir() if p.is_file() and
            b"git-grite hook shim" in p.read_bytes()[:256]]
    assert left == []
    # And after doctor --fix put pre-commit's hook behind grite's shim: uninstall puts it back.
    grite(a, "init")
    run([*pre_commit, "install", "-t", "pre-push"], a)
    grite(a, "doctor", "--fix")
    assert (hooks / ".grite" / "pre-push").exists()
    grite(a, "uninstall")
    assert b"pre-commit" in (hooks / "pre-push").read_bytes()
    run([*pre_commit, "uninstall", "-t", "pre-push"], a)
    assert not (hooks / "pre-push").exists()


def test_uninstall_keeps_shims_another_repository_uses_through_a_shared_hooks_path(tmp_path):
    hub = seeded_hub(tmp_path)
    shared = tmp_path / "shared-hooks"
    a = clone(str(hub), tmp_path / "a", init=False)
    b = clone(str(hub), tmp_path / "b", init=False)
    for r in (a, b):
        git(r, "config", "core.hooksPath", str(shared))
        grite(r, "init")
    out = grite_json(a, "uninstall")
    assert {h["action"] for h in out["hooks"]} == {"kept"}
    assert grite(b, "doctor").returncode == 0
    grite(b, "issue", "create", "from b")
    git(b, "push", "-q", "origin", "main")
    assert _published(hub, b)
    grite(b, "uninstall")
    assert not shared.exists() or list(shared.iterdir()) == []


def test_lefthook_hooks_still_run_beside_grite(tmp_path):
    lefthook = _npm_package("lefthook", "lefthook")
    if run([str(lefthook), "version"], tmp_path, check=False).returncode != 0:
        pytest.skip("lefthook's binary did not install (its package downloads it at install time)")
    hub, a = _hub_and_clone(tmp_path)
    (a / "lefthook.yml").write_text("pre-push:\n  commands:\n    gate:\n"
                                    "      run: echo lefthook-gate-ran; test -f allow-push\n")
    git(a, "add", "lefthook.yml")
    git(a, "commit", "-q", "-m", "lefthook")
    run([str(lefthook), "install"], a)
    grite(a, "init")
    grite(a, "issue", "create", "work")
    blocked = run(["git", "push", "origin", "main"], a, check=False)
    assert blocked.returncode != 0 and "lefthook-gate-ran" in blocked.out + blocked.err
    (a / "allow-push").write_text("")
    run(["git", "push", "origin", "main"], a)
    assert _published(hub, a)


def test_hooks_chained_by_an_earlier_grite_are_moved_and_still_restored(tmp_path):
    hub, a = _hub_and_clone(tmp_path)
    hooks = a / ".git" / "hooks"
    user = b"#!/bin/sh\necho users-own-hook >&2\n"
    # The earlier layout: the user's hook beside the shim as pre-push.grite-chained.
    (hooks / "pre-push.grite-chained").write_bytes(user)
    (hooks / "pre-push.grite-chained").chmod(0o755)
    grite(a, "init")
    assert not (hooks / "pre-push.grite-chained").exists()
    assert (hooks / ".grite" / "pre-push").read_bytes() == user
    grite(a, "issue", "create", "x")
    assert "users-own-hook" in run(["git", "push", "origin", "main"], a).err
    assert _published(hub, a)
    grite(a, "uninstall")
    assert (hooks / "pre-push").read_bytes() == user and not (hooks / ".grite").exists()
