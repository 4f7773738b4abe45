"""The witness and the refinery together: a session's merge request lands, a failed check reaches
the agent's next prompt."""

from __future__ import annotations

from helpers import git, status
from refinerykit import configure, outcomes, refine
from witnesskit import make_bench


def test_a_sessions_work_lands_and_a_failed_check_reaches_the_next_prompt(repo, tmp_path):
    bench = make_bench(repo, tmp_path)
    git(repo, "checkout", "-q", "-b", "work")
    before = status(repo)
    configure(repo, check="test ! -e broken.txt || { echo 'E: broken.txt breaks the build'; "
                          "exit 1; }", review="auto")
    cid = bench.convoy()
    good = bench.task(cid, "Good", "write good.txt fine", "commit add good", "done finished")
    bad = bench.task(cid, "Bad", "write broken.txt oops", "commit add broken", "done finished")
    bench.brat("witness", "run", "--once", "--json", timeout=120)
    assert bench.show(good)["status"] == bench.show(bad)["status"] == "needs-review"
    report = refine(repo)
    assert outcomes(report) == {good: "merged", bad: "requeued"}
    assert git(repo, "show", "main:good.txt") == "fine"
    assert bench.show(bad)["status"] == "queued"
    bench.brat("witness", "run", "--once", "--json", timeout=120)   # the agent's next attempt
    prompt = [r for r in bench.runs() if r["task"] == bad][-1]["prompt"]
    assert "E: broken.txt breaks the build" in prompt
    assert status(repo) == before


def test_with_the_hook_trigger_a_finished_session_starts_the_refinery(repo, tmp_path):
    bench = make_bench(repo, tmp_path)
    configure(repo, trigger="hook", check="true", review="auto")
    t = bench.task(bench.convoy(), "Lands by itself", "write a.txt x", "commit a", "done ok")
    bench.brat("witness", "run", "--once")
    bench.wait_for(lambda: bench.show(t)["status"] == "merged", 60, every=0.3)
    assert git(repo, "show", "main:a.txt") == "x"
    bench.wait_for(lambda: not bench.json("refinery", "status").get("running"), 30, every=0.3)
