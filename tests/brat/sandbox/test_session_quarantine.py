"""A sandboxed session is a quarantine whose only way out is its branch, moved by the witness:
nothing the agent wrote runs outside the sandbox, what its work tree's HEAD names is never
followed, and its objects come in only verified (issue 33, items 2, 3 and 8)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from helpers import git
from witnesskit import make_bench

AGENT = Path(__file__).resolve().parent / "quarantine_agent.py"
needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None,
                                 reason="bubblewrap (bwrap) is not installed here")


def _bench(repo: Path, tmp_path: Path, *agent_args: str, sandbox: str = "bwrap"):
    """The repository set up (and committed) for sessions of the quarantine agent."""
    bench = make_bench(repo, tmp_path)
    bench.config(engines__quarantine__command=json.dumps(
        ["python3", str(AGENT), *agent_args, "{prompt}"]),
        witness__engine="quarantine", witness__sandbox=sandbox, witness__max_retries="0",
        # what leaves a session through git is tested here, not its network (the agent
        # quarantine tests have pasta's): no namespace plumbing between the test and the agent
        witness__sandbox_network="none")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "brat config")
    return bench


def _run_session(bench, repo: Path, sandbox: str = "bwrap"):
    """One session; (task id, its log's QUARANTINE lines by name, the log)."""
    tid = bench.task(bench.convoy(), "Do the work")
    bench.brat("witness", "run", "--once", "--json")
    sess = bench.sessions(tid)[0]
    assert sess["sandbox"] == sandbox
    log = (repo / ".git" / "brat" / "sessions" / f"{sess['id']}.log").read_text()
    said = {}
    for line in log.splitlines():
        if line.startswith("QUARANTINE "):
            _, name, verdict, *_ = line.split(" ", 3)
            said[name] = verdict
    return tid, said, log


def _subjects(repo: Path, rev: str) -> list[str]:
    return git(repo, "log", "--format=%s", rev).splitlines()


@needs_bwrap
def test_a_nested_repository_s_fsmonitor_never_runs_outside_the_sandbox(repo, tmp_path):
    marker = tmp_path / "fsmonitor-ran"
    bench = _bench(repo, tmp_path, "fsmonitor", str(marker))
    tid, said, log = _run_session(bench, repo)
    assert said.get("fsmonitor") == "planted", log
    assert not marker.exists(), marker.read_text()
    # The ordinary work and the gitlink landed, and what was left uncommitted was committed.
    branch = f"brat/{tid}"
    assert git(repo, "ls-tree", "--name-only", branch).split() == \
        [".brat", "README", "left.txt", "vendor", "work.txt"], log
    assert bench.show(tid)["status"] == "needs-review"


@pytest.mark.parametrize("target,sandbox", [
    pytest.param("refs/heads/main", "bwrap", marks=needs_bwrap),
    pytest.param("refs/heads/feature", "bwrap", marks=needs_bwrap),
    pytest.param("refs/grite/wal", "bwrap", marks=needs_bwrap),
    # Unconfined, the agent could move any ref itself; the witness still follows none.
    pytest.param("refs/heads/main", "none")])
def test_an_agent_that_points_its_head_elsewhere_moves_nothing_but_its_branch(
        repo, tmp_path, target, sandbox):
    bench = _bench(repo, tmp_path, "head", target, sandbox=sandbox)
    git(repo, "branch", "feature")
    main, feature = git(repo, "rev-parse", "main"), git(repo, "rev-parse", "feature")
    tid, said, log = _run_session(bench, repo, sandbox)
    assert said.get("head") == "pointed", log
    assert git(repo, "rev-parse", "main") == main
    assert git(repo, "rev-parse", "feature") == feature
    assert git(repo, "status", "--porcelain") == ""
    assert not any("uncommitted work" in s for s in _subjects(repo, "refs/grite/wal"))
    # Its ordinary commit landed on its branch, and what it left on top, by plumbing.
    branch = f"brat/{tid}"
    subjects = _subjects(repo, f"main..{branch}")
    assert len(subjects) == 2 and subjects[1] == "agent: ordinary work", subjects
    assert "uncommitted work of session" in subjects[0]
    assert git(repo, "show", f"{branch}:README") == "changed by the agent, left uncommitted"
    assert git(repo, "show", f"{branch}:left.txt") == "left uncommitted"
    assert bench.show(tid)["status"] == "needs-review"


@needs_bwrap
def test_an_agent_cannot_rewrite_an_object_of_the_shared_store(repo, tmp_path):
    blob = git(repo, "rev-parse", "main:README")
    loose = repo / ".git" / "objects" / blob[:2] / blob[2:]
    assert loose.is_file()   # a loose object, as the attack needs
    before = loose.read_bytes()
    bench = _bench(repo, tmp_path, "rewrite-loose")
    tid, said, log = _run_session(bench, repo)
    assert said.get("found") == "ok", log   # the agent reached the blob's file
    assert said.get("rewrite-loose") == "refused" and said.get("delete-loose") == "refused", log
    assert loose.read_bytes() == before
    assert git(repo, "cat-file", "-p", blob) == "hello"
    assert git(repo, "fsck", "--no-dangling") == ""
    assert git(repo, "show", f"brat/{tid}:work.txt") == "the agent's ordinary work"
    assert bench.show(tid)["status"] == "needs-review"


@needs_bwrap
@pytest.mark.parametrize("how", ["forge", "missing"])
def test_a_forged_or_missing_object_in_the_session_s_store_is_refused_at_hand_over(
        repo, tmp_path, how):
    bench = _bench(repo, tmp_path, how)
    main = git(repo, "rev-parse", "main")
    tid, said, log = _run_session(bench, repo)
    assert said.get(how) == "ok", log
    assert f"brat/{tid} left at " in log and "was refused" in log, log
    # None of its commits came in; what its tree held was committed by the witness, as read.
    assert not any(s.startswith("agent:") for s in _subjects(repo, f"{main}..brat/{tid}"))
    assert git(repo, "fsck", "--no-dangling") == ""
    assert "other content under the same name" not in git(repo, "log", "--all", "-p")
