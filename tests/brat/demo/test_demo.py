"""`git brat demo` runs the whole loop end to end and leaves the user's repository alone."""

from __future__ import annotations

import json
import os

from helpers import brat, status


def test_demo_runs_the_whole_loop_and_cleans_up(repo):
    gitconfig = os.path.join(os.environ["HOME"], ".gitconfig")
    config_before = open(gitconfig).read()
    before = status(repo)
    hooks_before = sorted(os.listdir(repo / ".git" / "hooks"))
    proc = brat(repo, "demo", "--json", timeout=300)
    result = json.loads(proc.out)
    assert result["ok"] and not result["kept"] and result["engine"] == "demo"
    titles = [s["title"] for s in result["steps"]]
    steps = {s["title"]: s for s in result["steps"]}
    assert "its tests fail" in titles[0] and "FAILED" in result["steps"][0]["result"]
    mayor = next(s for s in result["steps"] if "mayor" in s["title"])
    assert "3 tasks" in mayor["result"] and "waits for" in mayor["result"]
    crash = next(s for s in result["steps"] if "SIGKILLed" in s["title"])
    assert "kill -9" in " ".join(crash["commands"])
    recovered = next(s for s in result["steps"] if "recovers" in s["title"])
    # Sandboxed agents die with their witness, so recovery finds each one stopped or already
    # gone (racing the kernel): either way, it commits the edit each left half-way.
    said = recovered["result"]
    assert said.count("its unsaved edit committed") >= 2, said
    assert said.count("its orphaned agent stopped") + said.count("its agent already gone") >= 2
    report = next(s for s in result["steps"] if "recovery report" in s["title"])
    assert "crashed session" in report["result"] and "survive on its branch" in report["result"]
    merges = [s for s in result["steps"] if s["title"].startswith("The refinery")]
    assert merges and all("main now: OK" in s["result"] for s in merges)
    assert titles[-1] == "The convoy has landed" and "landed" in steps[titles[-1]]["result"]
    assert not os.path.exists(result["directory"])
    assert status(repo) == before
    assert sorted(os.listdir(repo / ".git" / "hooks")) == hooks_before
    assert open(gitconfig).read() == config_before


def test_demo_fast_skips_the_crash_and_keep_leaves_the_repository(tmp_path, repo):
    proc = brat(repo, "demo", "--fast", "--keep", timeout=300)
    assert "SIGKILLed" not in proc.out and "The convoy has landed" in proc.out
    line = next(l for l in proc.out.splitlines() if "the demo's repository is in" in l)
    root = line.split(" is in ")[1].split(";")[0]
    try:
        assert os.path.isdir(os.path.join(root, "textstats", ".git"))
        assert "brat session log" in proc.out
    finally:
        import shutil
        shutil.rmtree(root)


def test_demo_refuses_an_unknown_engine_before_anything_runs(repo):
    from bratkit import fail
    code, msg = fail(repo, "demo", "--engine", "nosuch")
    assert code == 3 and "no engine named 'nosuch'" in msg
