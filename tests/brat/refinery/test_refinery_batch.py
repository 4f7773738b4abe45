"""Batching (one check for N requests, bisection on failure) and fair ordering with aging."""

from __future__ import annotations

import random
import time

import pytest

from bratkit import convoy, status_of
from helpers import brat, brat_json, git
from refinerykit import (check_runs, configure, log_subjects, outcomes, processed,
                         quick_requests, refine)


@pytest.fixture
def queue(brepo, tmp_path):
    git(brepo, "checkout", "-q", "-b", "work")
    counter = tmp_path / "check-runs"
    configure(brepo, check=f"echo run >> {counter}; test ! -e bad.txt", batch=8)
    return brepo, convoy(brepo, "Batch"), counter


def test_eight_passing_requests_land_with_one_check_run(queue):
    repo, cid, counter = queue
    tids = quick_requests(repo, cid, [(f"Part {i}", {f"p{i}.txt": f"{i}\n"}, 2)
                                      for i in range(8)])
    from refinerykit import commit_on
    commit_on(repo, f"brat/{tids[3]}", {"p3.txt": "3b\n"}, "Part 3, second commit")
    for t in tids:   # Part 3's new head needs a new approval (and each keeps its place)
        brat(repo, "task", "approve", t)
    before = git(repo, "rev-parse", "main")
    report = refine(repo)
    assert outcomes(report) == {t: "merged" for t in tids}
    assert check_runs(report) == 1 and counter.read_text().count("run") == 1
    subjects = list(reversed(log_subjects(repo, f"{before}..main")))
    assert subjects == ["Part 0", "Part 1", "Part 2", "Part 3", "Part 3, second commit",
                        "Part 4", "Part 5", "Part 6", "Part 7"]
    commits = {brat_json(repo, "refinery", "status")["recent"][i]["commit"] for i in range(8)}
    assert commits == {git(repo, "rev-parse", "main")}          # one compare-and-swap


def test_one_bad_request_among_eight_is_bisected_out_and_seven_land(queue):
    repo, cid, counter = queue
    specs = [(f"Part {i}", {f"p{i}.txt": f"{i}\n"}, 2) for i in range(8)]
    specs[5] = ("Part 5 (bad)", {"bad.txt": "breaks the check\n"}, 2)
    tids = quick_requests(repo, cid, specs)
    before = git(repo, "rev-parse", "main")
    report = refine(repo)
    res = outcomes(report)
    assert res[tids[5]] == "requeued"
    assert all(res[t] == "merged" for i, t in enumerate(tids) if i != 5)
    runs = check_runs(report)
    assert 2 <= runs <= 7 and counter.read_text().count("run") == runs
    assert git(repo, "cat-file", "-e", "main:bad.txt", check=False) == ""
    assert git(repo, "ls-tree", "--name-only", "main").split().count("bad.txt") == 0
    subjects = list(reversed(log_subjects(repo, f"{before}..main")))
    assert subjects == [f"Part {i}" for i in range(8) if i != 5]
    assert status_of(repo, tids[5]) == "queued"


def test_twenty_requests_of_mixed_priority_go_by_priority_then_age(brepo):
    git(brepo, "checkout", "-q", "-b", "work")
    configure(brepo, aging=0)
    cid = convoy(brepo)
    rng = random.Random(7)
    specs = [(f"R{i:02d}", {f"r{i}.txt": f"{i}\n"}, rng.choice([0, 1, 2, 3, 4])) for i in range(20)]
    tids = quick_requests(brepo, cid, specs)
    queue = [q["task"] for q in brat_json(brepo, "refinery", "status")["queue"]]
    expected = [t for _, t in sorted(enumerate(tids), key=lambda it: (specs[it[0]][2], it[0]))]
    assert queue == expected
    report = refine(brepo)
    assert processed(report) == expected
    assert list(reversed(log_subjects(brepo)))[1:] == [specs[tids.index(t)][0] for t in expected]


def test_aging_lets_old_low_priority_requests_past_newer_urgent_ones(brepo):
    git(brepo, "checkout", "-q", "-b", "work")
    configure(brepo, aging=1)
    cid = convoy(brepo)
    low = quick_requests(brepo, cid, [(f"Low {i}", {f"l{i}.txt": "l\n"}, 4) for i in range(10)])
    time.sleep(6)    # the low ones have waited five aging periods: they now rank above p0
    urgent = quick_requests(brepo, cid, [(f"Urgent {i}", {f"u{i}.txt": "u\n"}, 0)
                                         for i in range(10)])
    queue = brat_json(brepo, "refinery", "status")["queue"]
    assert {q["task"] for q in queue[:10]} == set(low)
    assert all(q["effective_priority"] < 0 for q in queue[:10])
    order = processed(refine(brepo))
    assert set(order[:10]) == set(low) and set(order[10:]) == set(urgent)
