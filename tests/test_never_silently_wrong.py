"""Issue 10: a demanding user's findings. Every read that can come up short says so; every
repair leaves a repository git itself is happy with; state travels along any chain of clones."""

from __future__ import annotations

import json
import os

import pytest

from helpers import git, grite, grite_json, run


def _loose(repo, sha: str):
    return repo / ".git" / "objects" / sha[:2] / sha[2:]


def test_a_missing_log_commit_is_reported_even_with_a_commit_graph(grepo):
    git(grepo, "commit-graph", "write", "--reachable")
    for i in range(1, 6):
        grite(grepo, "issue", "create", f"i{i}")
    gone = git(grepo, "rev-parse", "refs/grite/wal~2")
    os.unlink(_loose(grepo, gone))
    (grepo / ".git" / "grite" / "cache").exists() and run(
        ["rm", "-rf", str(grepo / ".git" / "grite" / "cache")], grepo)
    proc = grite(grepo, "issue", "list", "--json")
    assert gone in proc.err and proc.err.startswith("warning:")
    doc = grite(grepo, "doctor", "--json", check=False)
    assert doc.returncode == 6
    assert any(f["kind"] == "corrupt" and f["subject"] == gone
               for f in json.loads(doc.out)["findings"])
    # With the cache warm, the next command still warns.
    assert gone in grite(grepo, "issue", "list").err
