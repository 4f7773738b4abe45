"""The refinery lands merge requests: policies, the check, conflicts, the user's checkout, CAS."""

from __future__ import annotations

import json


from bratkit import convoy, fail, move, status_of
from helpers import brat, brat_json, git, run, status
from refinerykit import (check_runs, commit_on, configure, field, log_subjects, outcomes, refine,
                         request, tree_bytes)


def test_rebase_lands_each_commit_in_order_and_the_convoy_lands(queue):
    repo, cid = queue
    tid = request(repo, cid, "Add a", {"a.py": "a = 1\n"})
    commit_on(repo, f"brat/{tid}", {"a.py": "a = 2\n"}, "Change a")
    brat(repo, "task", "approve", tid)   # the approval is for the head it lands
    commit_on(repo, "main", {"other.txt": "x\n"}, "Unrelated work on main")   # target moved on
    report = refine(repo)
    assert outcomes(report) == {tid: "merged"}
    assert log_subjects(repo)[:3] == ["Change a", "Add a", "Unrelated work on main"]
    assert git(repo, "show", "main:a.py") == "a = 2"
    assert len(git(repo, "rev-list", "--min-parents=2", "main").split()) == 0   # linear
    assert status_of(repo, tid) == "merged"
    assert brat_json(repo, "convoy", "show", cid)["status"] == "landed"
    merge = brat_json(repo, "refinery", "status")["recent"][0]
    assert merge["task"] == tid and merge["status"] == "merged" and merge["duration"] >= 0


def test_squash_lands_one_commit(queue):
    repo, cid = queue
    configure(repo, merge_policy="squash")
    tid = request(repo, cid, "Add b", {"b.py": "1\n"})
    commit_on(repo, f"brat/{tid}", {"b.py": "2\n"}, "Fix b")
    brat(repo, "task", "approve", tid)
    before = git(repo, "rev-parse", "main")
    assert outcomes(refine(repo)) == {tid: "merged"}
    assert git(repo, "rev-list", "--count", f"{before}..main") == "1"
    assert log_subjects(repo)[0] == f"Add b (brat task {tid[:7]})"
    assert git(repo, "show", "main:b.py") == "2"


def test_merge_policy_makes_a_merge_commit(queue):
    repo, cid = queue
    configure(repo, merge_policy="merge")
    commit_on(repo, "main", {"m.txt": "moved\n"}, "Main moved")
    tid = request(repo, cid, "Add c", {"c.py": "c\n"}, start="main~1")
    assert outcomes(refine(repo)) == {tid: "merged"}
    parents = git(repo, "rev-list", "--parents", "-n", "1", "main").split()
    assert len(parents) == 3 and parents[2] == git(repo, "rev-parse", f"brat/{tid}")
    assert log_subjects(repo)[0].startswith(f"Merge brat/{tid}")


def test_a_failing_check_requeues_with_its_output_and_leaves_the_target(queue):
    repo, cid = queue
    configure(repo, check="test ! -e bad.txt || { echo 'FAILED: bad.txt must not exist'; exit 3; }")
    tid = request(repo, cid, "Add bad", {"bad.txt": "oops\n"})
    before = git(repo, "rev-parse", "main")
    report = refine(repo)
    # (the second run: main checked alone, to tell a red main from this work's failure)
    assert outcomes(report) == {tid: "requeued"} and check_runs(report) == 2
    assert git(repo, "rev-parse", "main") == before
    assert status_of(repo, tid) == "queued"
    failure = field(repo, tid, "last_failure")
    assert "FAILED: bad.txt must not exist" in failure and "exit 3" in failure
    assert field(repo, tid, "failures") == 1
    merge_id = report["passes"][0]["outcomes"][0]["merge"]
    log = (repo / ".git" / "brat" / "merges" / f"{merge_id}.log").read_text()
    assert "FAILED: bad.txt must not exist" in log


def test_on_fail_fail_marks_the_task_failed(queue):
    repo, cid = queue
    configure(repo, check="test ! -e d.txt", on_fail="fail")
    tid = request(repo, cid, "Doomed", {"d.txt": "d\n"})
    assert outcomes(refine(repo)) == {tid: "failed"}
    assert status_of(repo, tid) == "failed"
    kinds = [i["kind"] for i in brat_json(repo, "status")["interventions"]]
    assert "failed" in kinds


def test_max_attempts_fails_a_task_that_keeps_failing(queue):
    repo, cid = queue
    configure(repo, check="test ! -e f.txt", max_attempts=2)
    tid = request(repo, cid, "Flaky", {"f.txt": "f\n"})
    assert outcomes(refine(repo)) == {tid: "requeued"}
    # The agent tries again (a new commit); handing its work in resets the witness's own count.
    move(repo, tid, "running")
    commit_on(repo, f"brat/{tid}", {"f2.txt": "f\n"}, "Try again")
    move(repo, tid, "needs-review")
    brat(repo, "task", "approve", tid)
    from git_brat.brat import board as model
    from git_brat.grite.model import events as ev
    from git_brat.grite.log.wal import Draft
    model.open_grite(str(repo)).append([Draft(tid, ev.SetFields({"failures": 0}))], "witness")
    assert outcomes(refine(repo)) == {tid: "failed"}
    assert field(repo, tid, "merge_failures") == 2 and field(repo, tid, "failures") == 1
    assert "attempt 2 of 2" in brat_json(repo, "task", "show", tid)["reason"]


def test_a_check_that_runs_too_long_is_stopped_and_fails(queue):
    repo, cid = queue
    configure(repo, check="test ! -e s.txt || sleep 30", check_timeout=1)
    tid = request(repo, cid, "Slow", {"s.txt": "s\n"})
    report = refine(repo, timeout=60)
    assert outcomes(report) == {tid: "requeued"}
    assert "timed out" in field(repo, tid, "last_failure")


def _conflicting(repo, cid):
    commit_on(repo, "main", {"README": "main's line\n"}, "Main edits README")
    return request(repo, cid, "Edit README", {"README": "agent's line\n", "new.py": "n\n"},
                   start="main~1")


def test_a_conflict_requeues_naming_the_files(queue):
    repo, cid = queue
    tid = _conflicting(repo, cid)
    before = git(repo, "rev-parse", "main")
    assert outcomes(refine(repo)) == {tid: "conflict"}
    assert git(repo, "rev-parse", "main") == before
    assert status_of(repo, tid) == "queued"
    assert field(repo, tid, "last_failure") == \
        f"merge conflict in: README; rebase brat/{tid} onto main"
    assert git(repo / ".git" / "brat" / "refinery", "status", "--porcelain") == ""


def test_a_conflict_blocks_for_a_human_with_on_conflict_block(queue):
    repo, cid = queue
    configure(repo, on_conflict="block")
    tid = _conflicting(repo, cid)
    assert outcomes(refine(repo)) == {tid: "blocked"}
    assert status_of(repo, tid) == "blocked"
    [item] = [i for i in brat_json(repo, "status")["interventions"] if i["task"] == tid]
    assert item["kind"] == "needs-human" and "README" in item["detail"]
    assert item["command"] == f"git brat refinery retry {tid[:7]}"
    # The human rebases the branch, then retries: it lands.
    commit_on(repo, f"brat/{tid}", {"README": "main's line\n"}, "Resolve", start="main")
    git(repo, "update-ref", f"refs/heads/brat/{tid}",
        commit_on(repo, "fixed", {"new.py": "n\n"}, "Agent work, rebased"))
    brat(repo, "refinery", "retry", tid[:7])
    brat(repo, "task", "approve", tid)   # the rebased head is a new one to review
    assert outcomes(refine(repo)) == {tid: "merged"}


def test_the_users_dirty_checkout_is_byte_identical(queue):
    repo, cid = queue
    (repo / "README").write_text("my uncommitted edit\n")
    (repo / "scratch.txt").write_text("untracked\n")
    git(repo, "add", "README")
    (repo / "README").write_text("and unstaged on top\n")
    before_files, before_status = tree_bytes(repo), status(repo)
    before_index = (repo / ".git" / "index").read_bytes()
    head = git(repo, "rev-parse", "HEAD")
    tid = request(repo, cid, "Work", {"w.py": "w\n", "README": "agent\n"})
    assert outcomes(refine(repo)) == {tid: "merged"}
    assert tree_bytes(repo) == before_files and status(repo) == before_status
    assert (repo / ".git" / "index").read_bytes() == before_index
    assert git(repo, "rev-parse", "HEAD") == head


def test_a_checked_out_target_is_fast_forwarded_carrying_local_edits(brepo):
    repo, cid = brepo, convoy(brepo)
    (repo / "README").write_text("local edit\n")
    (repo / "notes.txt").write_text("untracked\n")
    tid = request(repo, cid, "Add f", {"f.py": "f\n"})
    assert outcomes(refine(repo)) == {tid: "merged"}
    assert git(repo, "rev-parse", "HEAD") == git(repo, "rev-parse", "main")
    assert (repo / "f.py").read_text() == "f\n"                   # brought forward
    assert (repo / "README").read_text() == "local edit\n"        # carried along
    assert run(["git", "status", "--porcelain"], repo).out.splitlines() == \
        [" M README", "?? .brat/", "?? notes.txt"]
    assert git(repo, "diff", "--cached", "--name-only") == ""     # index agrees with HEAD


def test_colliding_local_edits_make_the_merge_wait_as_an_intervention(brepo, tmp_path):
    repo, cid = brepo, convoy(brepo)
    runs = tmp_path / "runs"
    configure(repo, check=f"echo run >> {runs}")
    (repo / "README").write_text("my edit\n")
    tid = request(repo, cid, "Touch README", {"README": "agent\n"})
    before = git(repo, "rev-parse", "main")
    assert outcomes(refine(repo)) == {tid: "waiting"}
    assert git(repo, "rev-parse", "main") == before
    assert (repo / "README").read_text() == "my edit\n"
    assert status_of(repo, tid) == "needs-review"
    [item] = [i for i in brat_json(repo, "status")["interventions"] if i["task"] == tid]
    assert item["kind"] == "needs-human" and "README" in item["detail"]
    (repo / "README").write_text("hello\n")                       # the user puts it back
    report = refine(repo)
    assert outcomes(report) == {tid: "merged"}
    assert (repo / "README").read_text() == "agent\n"
    assert check_runs(report) == 0 and runs.read_text() == "run\n"   # checked once in all


def test_the_target_moving_during_the_check_redoes_the_merge(queue, tmp_path):
    repo, cid = queue
    flag = tmp_path / "moved"
    # The first check run moves main (as another writer would); the refinery must notice.
    script = (f"if [ ! -e {flag} ]; then touch {flag}; "
              f"c=$(git -C {repo} commit-tree main^{{tree}} -p main -m 'Someone else landed'); "
              f"git -C {repo} update-ref refs/heads/main $c; fi")
    configure(repo, check=script)
    tid = request(repo, cid, "Mine", {"mine.py": "m\n"})
    report = refine(repo)
    assert outcomes(report) == {tid: "merged"}
    assert report["passes"][0]["redone"] == 1 and check_runs(report) == 2
    assert log_subjects(repo)[:2] == ["Mine", "Someone else landed"]


def test_commands_work_from_a_subdirectory_and_a_linked_worktree(queue, tmp_path):
    repo, cid = queue
    (repo / "sub").mkdir()
    tid = request(repo, cid, "From below", {"z.py": "z\n"})
    q = brat_json(repo / "sub", "refinery", "status")["queue"]
    assert [x["task"] for x in q] == [tid]
    git(repo, "worktree", "add", "-q", str(tmp_path / "linked"), "-b", "other")
    assert outcomes(refine(tmp_path / "linked")) == {tid: "merged"}


def test_bad_input_is_one_line_with_an_exit_code_and_writes_nothing(queue):
    repo, cid = queue
    from bratkit import log_commits
    before = log_commits(repo)
    code, msg = fail(repo, "refinery", "retry", "zzzz")
    assert code == 2
    code, msg = fail(repo, "refinery", "retry", "abcdef12")
    assert code == 3
    tid = request(repo, cid, "Queued", {"q.py": "q\n"})
    mid = log_commits(repo)
    code, msg = fail(repo, "refinery", "retry", tid)
    assert code == 5 and "needs-review" in msg
    assert log_commits(repo) == mid and mid > before
    assert brat(repo, "refinery", "stop", "--json").out.strip() == '{"stopped":false,"pid":null}'
    json.loads(brat(repo, "refinery", "status", "--json").out)
