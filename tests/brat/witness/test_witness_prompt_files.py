"""What the witness reads from the work tree into an agent's prompt: committed files only, never
through a symlink out of the tree, never a FIFO, and capped."""

from __future__ import annotations

import os
import threading


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


def test_a_fifo_named_like_the_instructions_is_skipped_not_waited_on(tmp_path):
    os.mkfifo(tmp_path / "AGENTS.md")
    (tmp_path / "CLAUDE.md").write_text("Be brief.\n")
    got: list = []
    reader = threading.Thread(target=lambda: got.append(instructions(str(tmp_path))), daemon=True)
    reader.start()
    reader.join(timeout=10)
    stuck = reader.is_alive()
    if stuck:   # stuck opening the FIFO: a writer lets it go, then the test fails
        fd = os.open(tmp_path / "AGENTS.md", os.O_WRONLY | os.O_NONBLOCK)
        os.close(fd)
        reader.join(timeout=10)
    assert not stuck
    assert got == [[("CLAUDE.md", "Be brief.")]]
