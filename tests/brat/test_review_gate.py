"""The human is the gate: a finished task lands only once a human approved the very commit it
would land; a reply sends it back, and a session that then changes nothing never lands."""

from __future__ import annotations

from bratkit import fail
from helpers import brat, git, wal_tip
from refinerykit import outcomes, refine
from witnesskit import make_bench


def _finished(bench, title="Fix a", *lines):
    t = bench.task(bench.convoy(), title, *(lines or ("write a.txt x", "commit add a",
                                                     "done ok")))
    bench.brat("witness", "run", "--once")
    assert bench.show(t)["status"] == "needs-review"
    return t


def test_a_finished_task_waits_for_the_human_and_lands_once_approved(repo, tmp_path):
    bench = make_bench(repo, tmp_path)
    main = git(repo, "rev-parse", "main")
    t = _finished(bench)
    assert outcomes(refine(repo)) == {}
    assert git(repo, "rev-parse", "main") == main            # nothing lands unread
    st = bench.json("status")
    assert st["review_mode"] == "human"
    [w] = st["review"]
    assert w["task"] == t and w["head"] == git(repo, "rev-parse", f"brat/{t}")
    assert t not in [m["task"] for m in st["merge_queue"]]    # not the queue's yet
    text = bench.brat("status").out
    assert text.startswith("WAITING FOR YOUR REVIEW (1)")       # what needs the human, first
    assert f"git brat task approve {t[:7]}" in text and f"git diff main...brat/{t}" in text
    approved = bench.json("task", "approve", t, "-m", "looks right")
    assert approved["approved_head"] == w["head"]
    assert bench.json("status")["review"] == []
    assert outcomes(refine(repo)) == {t: "merged"}
    assert git(repo, "show", "main:a.txt") == "x"


def test_a_reply_sends_it_back_and_a_session_that_changes_nothing_never_lands(repo, tmp_path):
    bench = make_bench(repo, tmp_path)
    bench.config(refinery__check="true", refinery__review="auto")   # even with auto review
    t = _finished(bench)
    head = git(repo, "rev-parse", f"brat/{t}")
    bench.brat("task", "reply", t, "-m", "Do not merge this: a.txt must say y",
               "--note", "a.txt:1: should be y")
    assert bench.show(t)["status"] == "queued"
    # The agent's next session does nothing but say it is done.
    bench.brat("task", "update", t, "--body", "FAKE: done nothing to change")
    bench.brat("witness", "run", "--once")
    shown = bench.show(t)
    assert shown["status"] == "blocked"
    assert "made no new commit" in shown["reason"]
    reasons = [bench.session(x["id"])["reason"] for x in bench.sessions(t)]
    assert sum("changed nothing after your reply" in r for r in reasons) == 1
    assert git(repo, "rev-parse", f"brat/{t}") == head
    assert outcomes(refine(repo)) == {}
    assert git(repo, "show", "main:a.txt", check=False) != "x"
    prompt = bench.runs()[-1]["prompt"]
    assert "a.txt must say y" in prompt and "a.txt:1: should be y" in prompt


def test_an_approval_is_for_one_commit_and_new_commits_wait_for_another(repo, tmp_path):
    from refinerykit import commit_on
    bench = make_bench(repo, tmp_path)
    t = _finished(bench)
    bench.brat("task", "approve", t)
    commit_on(repo, f"brat/{t}", {"evil.txt": "pushed after the review\n"}, "Sneaked in")
    assert outcomes(refine(repo)) == {}
    assert [w["task"] for w in bench.json("status")["review"]] == [t]
    bench.brat("task", "approve", t)
    assert outcomes(refine(repo)) == {t: "merged"}
    assert git(repo, "show", "main:evil.txt") == "pushed after the review"


def test_auto_review_without_a_check_still_waits_for_the_human(repo, tmp_path):
    bench = make_bench(repo, tmp_path)
    bench.config(refinery__review="auto")
    t = _finished(bench)
    st = bench.json("status")
    assert st["review_mode"] == "human" and [w["task"] for w in st["review"]] == [t]
    assert any("refinery.review = \"auto\" needs a check" in w for w in st["warnings"])
    assert outcomes(refine(repo)) == {}
    bench.config(refinery__check="test -e a.txt")
    assert outcomes(refine(repo)) == {t: "merged"}


def test_a_pulled_auto_review_is_not_in_force_until_approved(repo, tmp_path):
    bench = make_bench(repo, tmp_path)
    bench.config(refinery__check="true")
    git(repo, "add", ".brat")
    git(repo, "commit", "-qm", "brat config")
    brat(repo, "trust")
    t = _finished(bench)
    # A pusher's commit turns the gate off in the committed file.
    toml = repo / ".brat" / "config.toml"
    toml.write_text(toml.read_text().replace('review = "human"', 'review = "auto"'))
    git(repo, "commit", "-qam", "land everything")
    assert "refinery.review" in brat(repo, "trust", "--show").out
    assert bench.json("status")["review_mode"] == "human"
    main = git(repo, "rev-parse", "main")
    code, msg = fail(repo, "refinery", "run", "--once")
    assert code == 7 and "refinery.review" in msg
    assert git(repo, "rev-parse", "main") == main
    brat(repo, "trust")
    assert outcomes(refine(repo)) == {t: "merged"}


def test_approve_is_refused_from_a_session_and_for_a_task_not_in_review(repo, tmp_path):
    bench = make_bench(repo, tmp_path)
    t = _finished(bench)
    queued = bench.task(bench.convoy(), "Not done yet")
    tip = wal_tip(repo)
    proc = brat(repo, "task", "approve", t, env={"BRAT_SESSION": "x" * 32}, check=False)
    assert proc.returncode == 2 and "cannot approve" in proc.err
    code, msg = fail(repo, "task", "approve", queued)
    assert code == 5 and "only a task in needs-review" in msg
    code, msg = fail(repo, "task", "reply", t, "-m", "x", "--note", "no line number")
    assert code == 2 and "path:line: text" in msg
    assert wal_tip(repo) == tip
