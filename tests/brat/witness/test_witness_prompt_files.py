"""What the witness reads from the work tree into an agent's prompt: committed files only, never
through a symlink out of the tree, never a FIFO, and capped."""

from __future__ import annotations

import os


from git_brat.brat.witness.prompt import MAX_INSTRUCTIONS, instructions
from helpers import git


def test_a_committed_symlink_to_a_file_outside_the_tree_is_not_pasted_into_the_prompt(
        bench, repo, tmp_path):
    secret = tmp_path / "credentials"
    secret.write_text("aws_secret_access_key = AKIA-VICTIM-SECRET\n")
    os.symlink(os.path.relpath(secret, repo), repo / "AGENTS.md")
    os.symlink("/proc/self/environ", repo / "CLAUDE.md")
    git(repo, "add", "AGENTS.md", "CLAUDE.md")
    git(repo, "commit", "-qm", "agent instructions")
    bench.task(bench.convoy(), "Fix it", "write a x", "commit a")
    bench.brat("witness", "run", "--once", env={"ANTHROPIC_API_KEY": "sk-ant-ENV-SECRET"})
    (run,) = bench.runs()
    assert "Fix it" in run["prompt"]
    assert "AKIA-VICTIM-SECRET" not in run["prompt"]
    assert "sk-ant-ENV-SECRET" not in run["prompt"]
    assert "The repository's instructions" not in run["prompt"]


def test_instructions_symlinked_inside_the_tree_are_read_and_a_long_file_is_cut_visibly(
        bench, repo):
    (repo / "docs").mkdir()
    (repo / "docs" / "agents.md").write_text("Run make lint first.\n")
    os.symlink("docs/agents.md", repo / "AGENTS.md")
    (repo / "CLAUDE.md").write_text("y" * (MAX_INSTRUCTIONS + 500) + "TAIL-NOT-SENT\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "agent instructions")
    bench.task(bench.convoy(), "Fix it", "write a x", "commit a")
    bench.brat("witness", "run", "--once")
    (run,) = bench.runs()
    assert "Run make lint first." in run["prompt"]
    assert "TAIL-NOT-SENT" not in run["prompt"]
    assert f"[… cut: CLAUDE.md is longer than {MAX_INSTRUCTIONS} bytes]" in run["prompt"]


def test_instructions_are_read_from_the_commit_the_session_starts_from(tmp_path, repo):
    from git_brat.git.store import Store
    (repo / "AGENTS.md").write_text("Committed rules.\n")
    git(repo, "add", "AGENTS.md")
    git(repo, "commit", "-qm", "rules")
    head = git(repo, "rev-parse", "HEAD")
    (repo / "AGENTS.md").write_text("Uncommitted rules.\n")   # the work tree is not read
    os.mkfifo(repo / "CLAUDE.md")                             # nor waited on
    assert instructions(Store.discover(str(repo)), head) == [("AGENTS.md", "Committed rules.")]
