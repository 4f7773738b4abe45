"""What the mayor reads from the work tree into its context: never through a symlink out of it."""

from __future__ import annotations

import os

import mayorkit
from helpers import brat, git

mrepo, record = mayorkit.mrepo, mayorkit.record   # fixtures


def test_a_committed_agents_md_linking_out_of_the_tree_stays_out_of_the_mayors_context(
        mrepo, record, tmp_path):
    secret = tmp_path / "credentials"
    secret.write_text("aws_secret_access_key = AKIA-VICTIM-SECRET\n")
    (mrepo / "AGENTS.md").unlink()
    os.symlink(os.path.relpath(secret, mrepo), mrepo / "AGENTS.md")
    os.symlink("/proc/self/environ", mrepo / "README.md")
    git(mrepo, "add", "-A")
    git(mrepo, "commit", "-qm", "docs")
    brat(mrepo, "mayor", "ask", "Plan the parser fix", "--dry-run",
         env={"ANTHROPIC_API_KEY": "sk-ant-ENV-SECRET"})
    (run,) = mayorkit.runs(record)
    assert "Plan the parser fix" in run["prompt"]
    assert "AKIA-VICTIM-SECRET" not in run["prompt"]
    assert "sk-ant-ENV-SECRET" not in run["prompt"]


def test_a_committed_readme_linking_into_the_git_directory_stays_out_of_the_mayors_context(
        mrepo, record):
    # Inside the work tree, yet the clone's own secrets: its config, the board's token.
    git(mrepo, "config", "remote.origin.url", "https://user:TOKEN-IN-GIT-CONFIG@example.com/r")
    (mrepo / "AGENTS.md").unlink()
    os.symlink(".git/config", mrepo / "README.md")
    os.symlink("docs/../.git/config", mrepo / "AGENTS.md")
    git(mrepo, "add", "-A")
    git(mrepo, "commit", "-qm", "docs")
    brat(mrepo, "mayor", "ask", "Plan the parser fix", "--dry-run")
    (run,) = mayorkit.runs(record)
    assert "Plan the parser fix" in run["prompt"]
    assert "TOKEN-IN-GIT-CONFIG" not in run["prompt"]
    assert "## README.md" not in run["prompt"] and "## AGENTS.md" not in run["prompt"]


def test_the_mayor_reads_the_readme_as_committed_not_as_the_work_tree_has_it(mrepo, record):
    (mrepo / "README.md").write_text("Committed readme.\n")
    git(mrepo, "add", "README.md")
    git(mrepo, "commit", "-qm", "readme")
    # Swapped in the work tree afterwards for a link out of it (a race with the read).
    (mrepo / "README.md").unlink()
    os.symlink("/proc/self/environ", mrepo / "README.md")
    brat(mrepo, "mayor", "ask", "Plan the parser fix", "--dry-run",
         env={"ANTHROPIC_API_KEY": "sk-ant-ENV-SECRET"})
    (run,) = mayorkit.runs(record)
    assert "Committed readme." in run["prompt"]
    assert "sk-ant-ENV-SECRET" not in run["prompt"]
