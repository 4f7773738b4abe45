"""A sandboxed session (witness.sandbox = "bwrap") writes its work tree and its branch, and
nothing else: a hostile agent's every other attempt fails, its ordinary work lands."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from helpers import git
from agentkit import verdicts
from witnesskit import make_bench

HOSTILE = Path(__file__).resolve().parent / "hostile_agent.py"
needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None,
                                 reason="bubblewrap (bwrap) is not installed here")


def _snapshot(common: Path) -> dict[str, bytes]:
    """The files of .git that nothing in a session run changes but an agent would: config,
    hooks, branches (the witness itself writes refs/grite/ and .git/brat/: checked apart)."""
    out = {}
    for sub in ("config", "hooks", "refs/heads", "packed-refs", "brat/config.local.toml"):
        root = common / sub
        paths = [root] if root.is_file() else sorted(root.rglob("*")) if root.exists() else []
        for p in paths:
            rel = p.relative_to(common).as_posix()
            if p.is_file() and not rel.startswith(("brat/sessions", "brat/worktrees/",
                                                   "refs/heads/brat/")):
                out[rel] = p.read_bytes()
    return out


def _session_processes(sid: str) -> list[int]:
    mark = f"BRAT_SESSION={sid}".encode()
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                if mark in f.read().split(b"\0"):
                    out.append(int(entry))
        except OSError:
            continue
    return out


@needs_bwrap
def test_a_hostile_agent_in_the_sandbox_can_only_commit_on_its_branch(repo, tmp_path):
    bench = make_bench(repo, tmp_path)
    bench.config(engines__hostile__command=json.dumps(["python3", str(HOSTILE), "{prompt}"]),
                 witness__engine="hostile", witness__sandbox="bwrap", witness__max_retries="0")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "brat config")
    home = Path(os.environ["HOME"])
    (home / ".ssh").mkdir(exist_ok=True)
    (home / ".ssh" / "id_ed25519").write_text("PRIVATE KEY\n")
    remote = tmp_path / "evil.git"
    git(tmp_path, "init", "-q", "--bare", str(remote))
    git(repo, "remote", "add", "evil", str(remote))
    git(repo, "config", "remote.pushDefault", "evil")
    cid = bench.convoy()
    tid = bench.task(cid, "Say hello")
    other = bench.brat("task", "create", "--convoy", cid, "Wait for hello", "--needs",
                       tid).out.strip()
    common = repo / ".git"
    other_tree = common / "brat" / "worktrees" / other
    other_tree.mkdir(parents=True)
    (other_tree / "work.txt").write_text("another session's work\n")
    before = _snapshot(common)
    checkout_before = (repo / "README.md").read_bytes() if (repo / "README.md").exists() else b""
    main_before = git(repo, "rev-parse", "main").strip()

    env = {"HOSTILE_OTHER": other, "HOSTILE_TREE": str(other_tree),
           "GIT_CONFIG_GLOBAL": str(home / ".gitconfig")}
    bench.brat("witness", "run", "--once", "--json", env=env)

    sess = bench.sessions(tid)[0]
    assert sess["sandbox"] == "bwrap"
    log = (common / "brat" / "sessions" / f"{sess['id']}.log").read_text()
    said = verdicts(log, "HOSTILE")
    forbidden = {k: v for k, v in said.items() if k not in ("commit", "done")}
    assert {"checkout", "git-config", "hidden-hook", "update-ref-target",
            "update-ref-other-branch", "update-ref-grite", "brat-dir", "other-tree", "push",
            "read-ssh-key", "force-merged", "comment-other-task"} <= set(forbidden), log
    assert [k for k, v in forbidden.items() if v != "refused" and k != "setsid"] == [], log
    assert said.get("commit") == "ok" and said.get("done") == "ok", log

    # Nothing outside the session's tree and branch changed.
    assert _snapshot(common) == before
    assert not (common / "refs" / "grite" / "evil").exists()
    assert not (common / "brat" / "config.local.toml").exists()
    assert ((repo / "README.md").read_bytes() if (repo / "README.md").exists() else b"") \
        == checkout_before
    assert git(repo, "status", "--porcelain") == ""
    assert git(repo, "rev-parse", "main").strip() == main_before
    assert sorted(p.name for p in other_tree.iterdir()) == ["work.txt"]
    assert git(remote, "for-each-ref").strip() == ""
    # Its own work landed, and the task went to review.
    assert bench.show(tid)["status"] == "needs-review"
    shown = git(repo, "show", f"brat/{tid}:hello.txt")
    assert shown == "hello from the sandbox"
    assert "spoofed" not in json.dumps(bench.show(other))
    # The setsid child died with the session's pid namespace.
    assert _session_processes(sess["id"]) == []
    leftover = subprocess.run(["pgrep", "-f", "^sleep 600$"], capture_output=True, text=True)
    for pid in leftover.stdout.split():
        with open(f"/proc/{pid}/environ", "rb") as f:
            assert f"BRAT_SESSION={sess['id']}".encode() not in f.read()


PROBE = """
import socket, sys
port, secret = int(sys.argv[1]), sys.argv[2]
try:
    socket.create_connection(("127.0.0.1", port), 5).close()
    print("PROBE network reached")
except OSError as exc:
    print(f"PROBE network refused {exc}")
try:
    print("PROBE secret read", open(secret).read().strip())
except OSError as exc:
    print(f"PROBE secret refused {exc}")
"""


@needs_bwrap
@pytest.mark.parametrize("network", ["open", "none"])
def test_sandbox_network_and_hidden_paths_are_what_the_config_says(repo, tmp_path, network):
    import socket
    bench = make_bench(repo, tmp_path)
    home = Path(os.environ["HOME"])
    secret = home / "secrets" / "token"
    secret.parent.mkdir(exist_ok=True)
    secret.write_text("s3cr3t\n")
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(4)
    try:
        port = server.getsockname()[1]
        bench.config(engines__probe__command=json.dumps(
            ["python3", "-c", PROBE, str(port), str(secret), "{prompt}"]),
            witness__engine="probe", witness__sandbox="bwrap", witness__max_retries="0",
            witness__sandbox_network=network, witness__sandbox_hide='["~/secrets"]')
        tid = bench.task(bench.convoy(), "Probe")
        bench.brat("witness", "run", "--once", check=False)
    finally:
        server.close()
    sess = bench.sessions(tid)[0]
    log = (repo / ".git" / "brat" / "sessions" / f"{sess['id']}.log").read_text()
    said = [line for line in log.splitlines() if line.startswith("PROBE ")]
    assert any(line.startswith("PROBE network reached") for line in said) == \
        (network == "open"), log
    assert any(line.startswith("PROBE secret refused") for line in said), log
    assert "s3cr3t" not in log, log


@needs_bwrap
def test_a_sandboxed_agent_dies_with_its_witness_and_recovery_keeps_its_commit(repo, tmp_path):
    import signal
    import time
    from witnesskit import kill_group
    bench = make_bench(repo, tmp_path)
    bench.config(witness__sandbox="bwrap", witness__max_retries="2", witness__backoff="0")
    tid = bench.task(bench.convoy(), "Crash me", "write a.txt committed", "commit first part",
                     "hang-once")
    main = git(repo, "rev-parse", "main")
    w = bench.start_witness("--once", "--lease-ttl", "10")
    try:
        def committed_in_shadow():   # and hanging (its hang-once mark made)
            if not (tmp_path / "fake-state" / f"hung-once-{tid}").exists():
                return None
            for sess in bench.sessions(tid):
                f = repo / ".git" / "brat" / "sessions" / sess["id"] / "shadow" / "heads" / tid
                if f.exists() and f.read_text().strip() not in ("", main):
                    return sess["id"], f.read_text().strip()
            return None
        found = bench.wait_for(lambda: committed_in_shadow() or w.poll() is not None, 60)
        assert w.poll() is None and isinstance(found, tuple)
        sid, commit = found
        os.kill(w.pid, signal.SIGKILL)
        w.wait(timeout=10)
    finally:
        kill_group(w)
    deadline = time.monotonic() + 10
    while _session_processes(sid) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _session_processes(sid) == []          # its pid namespace went with the witness
    # Recovers it (at once, or once its lease runs out), then the task runs again.
    bench.brat("witness", "run", "--once", timeout=240)
    assert bench.session(sid)["status"] == "crashed"
    # The very commit the agent made in its sandbox is on its branch (not redone, not lost).
    run_ok = subprocess.run(["git", "merge-base", "--is-ancestor", commit, f"brat/{tid}"],
                            cwd=repo).returncode
    assert run_ok == 0, git(repo, "log", "--oneline", f"main..brat/{tid}")
    assert bench.show(tid)["status"] == "needs-review"


@needs_bwrap
def test_an_agent_started_from_a_virtualenv_under_tmp_runs_in_the_sandbox(repo, tmp_path):
    """A witness run from an activated virtualenv under /tmp (as CI's is), whose engine is that
    venv's python: the venv and the python inside it are both kept reachable under the private
    tmp, and the agent's work lands (binding bin/python, a symlink, again inside the venv's
    own read-only bind made bwrap fail before the agent started)."""
    import sys
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True,
                   timeout=120)
    assert (venv / "bin" / "python").is_symlink()
    bench = make_bench(repo, tmp_path)
    from witnesskit import FAKE
    bench.config(engines__fake__command=json.dumps([str(venv / "bin" / "python"), str(FAKE),
                                                    "{prompt}"]),
                 witness__sandbox="bwrap", witness__max_retries="0")
    tid = bench.task(bench.convoy(), "Greet", "write hello.txt hi", "commit greet", "done ok")
    env = {"VIRTUAL_ENV": str(venv)}   # (not on PATH: this bare venv cannot run git-brat)
    ran = bench.brat("witness", "run", "--once", env=env, check=False)
    sessions = bench.sessions(tid)
    assert sessions, ran.out + ran.err
    sess = sessions[0]
    log = (repo / ".git" / "brat" / "sessions" / f"{sess['id']}.log").read_text()
    assert bench.show(tid)["status"] == "needs-review", log
    assert git(repo, "show", f"brat/{tid}:hello.txt") == "hi", log
