"""What the refinery lands is what it checked, and only that: humans, agents and clones moving
things under it (issue 24: items 6 and 8 to 12, and the merge subjects)."""

from __future__ import annotations

import pytest

from bratkit import convoy, status_of
from helpers import brat, brat_json, git, run
from refinerykit import (check_runs, commit_on, configure, log_subjects, outcomes,
                         refine, request, task_json)
from sync_helpers import clone, seeded_hub


def test_a_task_a_human_blocks_during_its_check_is_not_landed(queue):
    repo, cid = queue
    tid = request(repo, cid, "Hold on", {"hold.py": "h\n"})
    configure(repo, check=f"git brat task update {tid} --status blocked -m 'do not merge this'")
    before = git(repo, "rev-parse", "main")
    report = refine(repo)
    assert outcomes(report) == {tid: "left-out"}
    assert git(repo, "rev-parse", "main") == before
    assert status_of(repo, tid) == "blocked"
    [recent] = brat_json(repo, "refinery", "status")["recent"]
    assert recent["task"] == tid and recent["status"] == "superseded"
    assert "moved to blocked during its check" in recent["result"]
    assert brat_json(repo, "refinery", "status")["queue"] == []


def test_a_commit_added_to_the_branch_during_its_check_is_checked_and_lands(queue, tmp_path):
    repo, cid = queue
    tid = request(repo, cid, "Work", {"work.py": "w\n"})
    old = git(repo, "rev-parse", f"brat/{tid}")
    fix = commit_on(repo, "scratch", {"fix.py": "f\n"}, "Human fix", start=old)
    # The first check run adds the fix to the branch (as a human or a push would).
    # (review = "auto": the check is the gate, so what it checked lands; under human review a
    # commit added after the approval waits for a new one, see test_review_gate.py)
    configure(repo, check=f"git update-ref refs/heads/brat/{tid} {fix} {old} || true",
              review="auto")
    report = refine(repo)
    results = [o["result"] for p in report["passes"] for o in p["outcomes"]]
    assert results == ["requeued", "merged"] and check_runs(report) == 2
    assert git(repo, "show", "main:fix.py") == "f"
    assert log_subjects(repo)[:2] == ["Human fix", "Work"]
    assert git(repo, "rev-list", f"main..brat/{tid}") == ""
    assert status_of(repo, tid) == "merged"


def test_a_title_with_terminal_escapes_and_10_kb_lands_as_a_safe_short_subject(queue):
    repo, cid = queue
    configure(repo, merge_policy="squash")
    from refinerykit import quick_requests
    [evil, huge] = quick_requests(repo, cid, [("title \x1b]0;PWNED\x07 \x1b[2J", {"e.py": "e\n"}, 2),
                                              ("T" * 10240, {"t.py": "t\n"}, 2)])
    assert outcomes(refine(repo)) == {evil: "merged", huge: "merged"}
    subjects = git(repo, "log", "--format=%s", "-2", "main").splitlines()
    raw = run(["git", "log", "--format=%B", "-2", "main"], repo).out
    assert "\x1b" not in raw and "\x07" not in raw
    assert any(s.startswith("title \\x1b]0;PWNED\\x07") for s in subjects)
    assert max(len(s) for s in subjects) <= 120


def test_a_branch_the_check_makes_does_not_stay_in_the_users_repository(queue):
    repo, cid = queue
    configure(repo, check="git checkout -q -b made-by-check && echo gen > gen.txt && "
                          "git add gen.txt && git commit -qm generated && git tag made-tag")
    tid = request(repo, cid, "Checked", {"c.py": "c\n"})
    assert outcomes(refine(repo)) == {tid: "merged"}
    assert git(repo, "branch", "--list", "made-by-check") == ""
    assert git(repo, "tag", "--list", "made-tag") == ""
    assert "made-by-check" not in git(repo, "worktree", "list")
    assert git(repo, "show", "main:c.py") == "c"


@pytest.mark.parametrize("main_moved_since", [False, True])
def test_a_branch_that_resolved_its_conflict_by_merging_the_target_lands(queue, main_moved_since):
    repo, cid = queue
    commit_on(repo, "main", {"f.txt": "1\n2\n3\n"}, "Base")
    tid = request(repo, cid, "Make it X", {"f.txt": "1\nX\n3\n"})
    commit_on(repo, "main", {"f.txt": "1\nY\n3\n"}, "Y landed first")
    # The agent resolves the conflict as people do: it merges main into its branch.
    resolved = commit_on(repo, "scratch", {"f.txt": "1\nXY\n3\n"}, "resolution", start="main")
    merged = run(["git", "commit-tree", f"{resolved}^{{tree}}", "-p", f"brat/{tid}", "-p", "main",
                  "-m", "Merge main, resolve f.txt"], repo).out.strip()
    git(repo, "update-ref", f"refs/heads/brat/{tid}", merged)
    brat(repo, "task", "approve", tid)   # the resolved head is the one reviewed
    if main_moved_since:
        commit_on(repo, "main", {"other.txt": "o\n"}, "More on main")
    assert outcomes(refine(repo)) == {tid: "merged"}
    assert git(repo, "show", "main:f.txt") == "1\nXY\n3"
    assert run(["git", "merge-base", "--is-ancestor", merged, "main"], repo,
               check=False).returncode == 0   # the resolving merge is kept
    if main_moved_since:
        assert git(repo, "show", "main:other.txt") == "o"


def test_the_users_unpushed_commit_on_a_diverged_target_is_not_pushed_with_the_work(tmp_path):
    hub = seeded_hub(tmp_path)
    user = clone(str(hub), tmp_path / "user", init=False)
    other = clone(str(hub), tmp_path / "other", init=False)
    brat(user, "init")
    tid = request(user, convoy(user), "Task work", {"task.txt": "t\n"})
    (user / "draft.txt").write_text("private\n")
    git(user, "add", "draft.txt")
    git(user, "commit", "-qm", "My private draft")            # not pushed
    mine = git(user, "rev-parse", "main")
    git(other, "commit", "-q", "--allow-empty", "-m", "Colleague")
    git(other, "push", "-q", "origin", "main")                # the hub moved on: diverged
    report = refine(user)
    [o] = [o for p in report["passes"] for o in p["outcomes"]]
    assert o["result"] == "merged" and "diverged" in o["detail"]
    assert log_subjects(hub)[:2] == ["Task work", "Colleague"]
    assert "My private draft" not in log_subjects(hub)
    assert git(user, "rev-parse", "main") == mine                # the user's branch untouched
    assert "diverged" in report["passes"][0]["note"]
    assert status_of(user, tid) == "merged"


def test_config_set_refuses_a_target_branch_that_does_not_exist(brepo):
    before = (brepo / ".brat" / "config.toml").read_text()
    proc = brat(brepo, "config", "set", "refinery.target_branch", "mian", check=False)
    assert proc.returncode == 2 and "mian" in proc.err and "main" in proc.err
    assert (brepo / ".brat" / "config.toml").read_text() == before
    git(brepo, "branch", "trunk")
    assert brat_json(brepo, "config", "set", "refinery.target_branch", "trunk")["value"] == "trunk"


def test_init_on_master_with_a_stale_main_targets_master(tmp_path):
    from helpers import make_repo
    repo = make_repo(tmp_path / "m")
    git(repo, "branch", "-m", "master")
    git(repo, "branch", "main")                               # old, nobody works on it
    git(repo, "commit", "-q", "--allow-empty", "-m", "on master")
    brat(repo, "init")
    assert brat_json(repo, "config", "get", "refinery.target_branch")["value"] == "master"


def test_work_done_while_the_target_branch_is_missing_waits_for_review_with_a_warning(
        repo, tmp_path):
    from witnesskit import make_bench
    bench = make_bench(repo, tmp_path)
    cfg = repo / ".brat" / "config.toml"
    cfg.write_text(cfg.read_text().replace('target_branch = "main"', 'target_branch = "mian"'))
    t = bench.task(bench.convoy(), "Write it", "write it.txt x", "commit add it", "done ok")
    proc = bench.brat("witness", "run", "--once")
    assert "refinery.target_branch" in proc.err and "mian" in proc.err
    assert bench.show(t)["status"] == "needs-review"


def test_a_task_in_review_whose_branch_no_clone_here_has_is_flagged_and_ordered_last(queue):
    repo, cid = queue
    from bratkit import move, task
    first = request(repo, cid, "First", {"one.txt": "1\n"})
    lost = task(repo, cid, "Branch elsewhere")
    move(repo, lost, "running", "needs-review")               # its branch is on another clone
    second = request(repo, cid, "Second", {"two.txt": "2\n"})
    st = brat_json(repo, "refinery", "status")
    assert [q["task"] for q in st["queue"]] == [first, second]
    assert list(st["unreachable"]) == [lost] and f"brat/{lost}" in st["unreachable"][lost]
    from git_brat.brat import board as model
    from git_brat.brat.cli.refinery import load_config
    from git_brat.brat.refinery.queue import queue_order
    g = model.open_grite(str(repo))
    assert queue_order(g, load_config(g)) == [first, second, lost]


def _hub_refinery(hub) -> int | None:
    from refinerykit import alive
    try:
        pid = int((hub / "brat" / "refinery.pid").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    return pid if alive(pid) else None


def _until(pred, seconds: float) -> bool:
    import time
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(0.3)
    return False


def test_a_witness_synced_with_a_hub_pushes_the_branch_it_finished_and_the_hub_lands_it(
        tmp_path):
    import os
    import signal
    from witnesskit import make_bench
    hub = seeded_hub(tmp_path)
    brat(hub, "init", "--hub")
    brat(hub, "config", "set", "hub.land_unchecked", "true")   # (its admin's choice: no check)
    user = clone(str(hub), tmp_path / "user", init=False)
    bench = make_bench(user, tmp_path)
    run(["git", "grite", "sync"], user)
    t = bench.task(bench.convoy(), "Pushed", "write p.txt p", "commit add p", "done ok")
    try:
        bench.brat("witness", "run", "--once")
        assert git(hub, "rev-parse", f"refs/heads/brat/{t}") == git(user, "rev-parse", f"brat/{t}")
        assert git(hub, "rev-parse", "main") == git(user, "rev-parse", "origin/main")  # unreviewed
        bench.brat("task", "approve", t)
        run(["git", "grite", "sync"], user)   # the approval reaches the hub: its hook lands it
        assert _until(lambda: run(["git", "cat-file", "-e", "main:p.txt"], hub,
                                  check=False).returncode == 0, 90), "the hub never merged it"
        assert _until(lambda: _hub_refinery(hub) is None, 30)
    finally:
        pid = _hub_refinery(hub)
        if pid:
            os.kill(pid, signal.SIGTERM)
            _until(lambda: _hub_refinery(hub) is None, 30)
    prompt = bench.runs()[0]["prompt"]
    assert "Do not switch branches, push" not in prompt and "the witness publishes this" in prompt


@pytest.mark.parametrize("dirty", [False, True])
def test_an_agent_that_moves_the_target_itself_is_an_intervention_and_the_checkout_stays_true(
        brepo, dirty):
    import json
    repo = brepo
    git(repo, "add", ".brat")
    git(repo, "commit", "-qm", "brat")
    script = ("echo m > m.txt; git add m.txt; git commit -qm 'straight to main'; "
              "git update-ref refs/heads/main HEAD; git brat task done -m done")
    brat(repo, "config", "set", "engines.mover.command", json.dumps(["sh", "-c", script,
                                                                        "{prompt}"]))
    brat(repo, "config", "set", "witness.engine", "mover")
    # Unconfined: a sandboxed agent cannot move main at all (tests/brat/sandbox/ proves it);
    # this is the guard for agents that run without one.
    brat(repo, "config", "set", "witness.sandbox", "none")
    git(repo, "commit", "-qam", "engine")
    before = git(repo, "rev-parse", "main")
    if dirty:
        (repo / "m.txt").write_text("mine\n")                # in the way of the agent's file
    status_before = run(["git", "status", "--porcelain"], repo).out
    tid = brat(repo, "task", "create", "--convoy", convoy(repo), "Mover").out.strip()
    brat(repo, "witness", "run", "--once")
    assert status_of(repo, tid) == "blocked"
    [item] = [i for i in brat_json(repo, "status")["interventions"] if i["task"] == tid]
    assert item["kind"] == "needs-human" and "moved main itself" in item["detail"]
    assert item["command"] == f"git brat refinery retry {tid[:7]}"
    assert run(["git", "status", "--porcelain"], repo).out == status_before   # no phantom
    agent = git(repo, "rev-parse", f"brat/{tid}")
    if dirty:
        assert git(repo, "rev-parse", "main") == before and "taken back" in item["detail"]
        assert (repo / "m.txt").read_text() == "mine\n"
    else:
        assert git(repo, "rev-parse", "main") == agent and (repo / "m.txt").read_text() == "m\n"


def test_an_agent_that_merges_a_target_someone_else_moved_is_not_taken_for_moving_it(brepo):
    import json
    repo = brepo
    git(repo, "add", ".brat")
    git(repo, "commit", "-qm", "brat")
    git(repo, "checkout", "-q", "-b", "work")
    # While the agent works, a colleague lands on main; the agent merges main into its branch.
    script = ("tree=$(git rev-parse main^{tree}); "
              "c=$(GIT_AUTHOR_NAME=Colleague GIT_AUTHOR_EMAIL=c@example.com "
              "git commit-tree $tree -p main -m 'Colleague'); git update-ref refs/heads/main $c; "
              "echo z > z.txt; git add z.txt; git commit -qm z; git merge -q --no-edit main; "
              "git brat task done -m ok")
    brat(repo, "config", "set", "engines.merger.command", json.dumps(["sh", "-c", script,
                                                                         "{prompt}"]))
    brat(repo, "config", "set", "witness.engine", "merger")
    # Unconfined: the agent stands in for the colleague moving main, which a sandbox refuses.
    brat(repo, "config", "set", "witness.sandbox", "none")
    tid = brat(repo, "task", "create", "--convoy", convoy(repo), "Merger").out.strip()
    brat(repo, "witness", "run", "--once")
    assert status_of(repo, tid) == "needs-review"
    assert not [i for i in brat_json(repo, "status")["interventions"] if i["task"] == tid]


def _two_synced_clones(tmp_path):
    """A hub and two clones of it, each with `git brat init` done and its log synced; A works
    on another branch than the target."""
    hub = seeded_hub(tmp_path)
    a = clone(str(hub), tmp_path / "a", init=False)
    b = clone(str(hub), tmp_path / "b", init=False)
    for repo in (a, b):
        brat(repo, "init")
        run(["git", "grite", "sync"], repo)
    git(a, "checkout", "-q", "-b", "work")
    return hub, a, b


def test_one_clones_refinery_lands_what_another_clones_witness_finished(tmp_path):
    hub, a, b = _two_synced_clones(tmp_path)
    tid = request(b, convoy(b), "Done on B", {"b.txt": "b\n"})
    git(b, "push", "-q", "origin", f"brat/{tid}")              # as B's witness does
    run(["git", "grite", "sync"], b)
    report = refine(a)                                          # A fetched nothing by hand
    assert outcomes(report) == {tid: "merged"}
    assert git(hub, "show", "main:b.txt") == "b"


def test_a_refinery_whose_hub_is_down_lands_nothing_and_pushes_once_it_answers(tmp_path):
    hub = seeded_hub(tmp_path)
    user = clone(str(hub), tmp_path / "user", init=False)
    brat(user, "init")
    git(user, "checkout", "-q", "-b", "work")
    tid = request(user, convoy(user), "Outage work", {"o.txt": "o\n"})
    configure(user, check="true")
    before = git(user, "rev-parse", "main")
    hub.rename(tmp_path / "hub-away.git")                      # the hub stops answering
    report = refine(user)
    assert outcomes(report) == {tid: "waiting"}
    [o] = [o for p in report["passes"] for o in p["outcomes"]]
    assert "push to origin failed" in o["detail"] and "next pass" in o["detail"]
    assert git(user, "rev-parse", "main") == before            # nothing landed here alone
    assert status_of(user, tid) == "needs-review"
    assert not task_json(user, tid).get("needs_human")          # an outage needs no human
    (tmp_path / "hub-away.git").rename(hub)
    report = refine(user)
    assert outcomes(report) == {tid: "merged"} and check_runs(report) == 0
    assert git(hub, "show", "main:o.txt") == "o"
    assert status_of(user, tid) == "merged"


def _reply_races_a_landing(tmp_path, title: str, files: dict, target_moves: bool = False):
    """B's human replies to a task in review while A's refinery lands it, neither having seen
    the other's move (the reply is stamped later, so replay takes it over "merged"). With
    target_moves, main moved on first and the landing is a rebase. (hub, a, b, task), with
    the landing done on A and nothing synced since."""
    hub, a, b = _two_synced_clones(tmp_path)
    tid = request(a, convoy(a), title, files)
    git(a, "push", "-q", "origin", f"brat/{tid}")
    if target_moves:
        commit_on(a, "main", {"other.txt": "meanwhile\n"}, "Meanwhile")
        git(a, "push", "-q", "origin", "main")
    run(["git", "grite", "sync"], a)
    run(["git", "grite", "sync"], b)
    brat(b, "task", "reply", tid, "-m", "one more thing")
    assert outcomes(refine(a)) == {tid: "merged"}
    return hub, a, b, tid


def _synced_after_the_race(a, b, tid) -> None:
    run(["git", "grite", "sync"], b)
    run(["git", "grite", "sync"], a)
    assert status_of(a, tid) == "queued"                       # the race as replay decides it


def _recorded_merged(a, tid) -> None:
    report = refine(a)
    [o] = [o for p in report["passes"] for o in p["outcomes"]]
    assert o["task"] == tid and o["result"] == "merged" and "another clone" in o["detail"]
    assert status_of(a, tid) == "merged"


def test_a_landing_a_reply_from_another_clone_overtook_is_recorded_merged(tmp_path):
    hub, a, b, tid = _reply_races_a_landing(tmp_path, "Raced", {"r.txt": "r\n"})
    _synced_after_the_race(a, b, tid)
    _recorded_merged(a, tid)
    run(["git", "grite", "sync"], a)
    run(["git", "grite", "sync"], b)
    assert status_of(b, tid) == "merged"
    assert git(hub, "log", "--format=%s", "main").splitlines().count("Raced") == 1


def test_a_rebased_landing_a_reply_overtook_is_recorded_merged_once_the_branch_holds_it(tmp_path):
    """The chaos schedule (2, 12): the target had moved, so the landing was a rebase at a
    commit the task's branch never had; a session that resumed the task after the reply then
    had the branch at that landed commit. All of it is on the target: recorded merged (it was
    left "queued", and run again until it failed as done without any commit)."""
    hub, a, b, tid = _reply_races_a_landing(tmp_path, "Rebased", {"q.txt": "q\n"},
                                            target_moves=True)
    landed = git(hub, "rev-parse", "main")
    assert git(a, "rev-parse", f"brat/{tid}") != landed          # a rebase: a new commit
    git(a, "branch", "-f", f"brat/{tid}", landed)                # (as a resumed session left it)
    git(a, "push", "-q", "-f", "origin", f"brat/{tid}")
    _synced_after_the_race(a, b, tid)
    _recorded_merged(a, tid)
    assert git(hub, "log", "--format=%s", "main").splitlines().count("Rebased") == 1


def test_new_work_on_a_landed_tasks_branch_is_not_recorded_merged(tmp_path):
    """A commit on the branch that is not on the target is a new round of review."""
    _hub, a, b, tid = _reply_races_a_landing(tmp_path, "More", {"m.txt": "m\n"})
    commit_on(a, f"brat/{tid}", {"m.txt": "m, and more\n"}, "More work")
    _synced_after_the_race(a, b, tid)
    refine(a)
    assert status_of(a, tid) == "queued"


def test_a_forged_landing_naming_a_branch_not_a_commit_forces_nothing(queue):
    """A merge record from the log claiming a blocked task "landed at main": the name is never
    handed to git (it would resolve, and be on the target), so the task stays as it is."""
    import gritekit
    from git_brat.grite.model import events as ev
    repo, cid = queue
    tid = request(repo, cid, "Held", {"h.txt": "h\n"})
    brat(repo, "task", "update", tid, "--status", "blocked", "-m", "wait for me")
    forged = ev.make_event(ev.new_entity_id(), "f" * 16, 1 << 20, 1, ev.Create("merge", {
        "task": tid, "status": "merged", "merged_commit": "main",
        "head": git(repo, "rev-parse", f"brat/{tid}")}))
    gritekit.forge_log(repo, "f" * 16, [forged])
    refine(repo)
    assert status_of(repo, tid) == "blocked"
