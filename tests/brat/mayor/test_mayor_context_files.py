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
