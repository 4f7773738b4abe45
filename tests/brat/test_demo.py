"""`git brat demo` runs the real commands end to end and leaves the user's repository alone."""

from __future__ import annotations

import json
import os

from helpers import brat, status


def test_demo_runs_every_step_and_cleans_up(repo):
    gitconfig = os.path.join(os.environ["HOME"], ".gitconfig")
    config_before = open(gitconfig).read()
    before = status(repo)
    hooks_before = sorted(os.listdir(repo / ".git" / "hooks"))
    proc = brat(repo, "demo", "--json", timeout=300)
    result = json.loads(proc.out)
    assert result["ok"] and not result["kept"]
    titles = [s["title"] for s in result["steps"]]
    assert len(titles) == 8
    assert any("race" in t for t in titles) and any("SIGKILL" in t for t in titles)
    race = next(s for s in result["steps"] if "race" in s["title"])
    assert race["result"].startswith("winner: ")
    crash = next(s for s in result["steps"] if "SIGKILL" in s["title"])
    assert "fencing token (2)" in crash["result"]
    assert "ok" in result["steps"][-1]["result"]
    assert not os.path.exists(result["directory"])
    assert status(repo) == before
    assert sorted(os.listdir(repo / ".git" / "hooks")) == hooks_before
    assert open(gitconfig).read() == config_before


def test_demo_in_a_named_directory_keeps_it(tmp_path):
    target = tmp_path / "demo"
    proc = brat(tmp_path, "demo", "--dir", str(target), timeout=300)
    assert "== A workflow turns one request into a convoy" in proc.out
    assert (target / "alice" / ".brat" / "config.toml").exists()
    assert (target / "hub.git").is_dir()
    refused = brat(tmp_path, "demo", "--dir", str(target), check=False)
    assert refused.returncode == 2 and "already exists" in refused.err
    assert refused.err.count("\n") == 1
