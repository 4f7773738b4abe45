"""The refinery's batch plan as a table: what is due, what lands together, how a failed batch splits."""

from __future__ import annotations

import pytest

from git_brat.brat.refinery import plan
from git_brat.brat.refinery.queue import Request

NOW = 50_000


def req(name: str) -> Request:
    return Request(task=f"t{name}", title=name, merge=f"m{name}", branch=f"brat/t{name}",
                   ref=f"refs/heads/brat/t{name}", head="h", base="b", priority=2, effective=2,
                   since=0, attempts=0, status="queued")


def names(reqs) -> str:
    return "".join(r.title for r in reqs)


# (queue, merge records by name, due now)
DUE = [
    ("abc", {}, "abc"),
    ("abc", {"b": {"status": "error", "next_attempt_at": NOW + 1}}, "ac"),
    ("abc", {"b": {"status": "error", "next_attempt_at": NOW}}, "abc"),
    ("abc", {"b": {"status": "error"}}, "abc"),
    ("abc", {"a": {"status": "waiting", "next_attempt_at": NOW + 9}}, "abc"),
    ("abc", {"a": {"status": "error", "next_attempt_at": NOW + 5},
             "c": {"status": "error", "next_attempt_at": NOW + 5}}, "b"),
    ("", {}, ""),
]


@pytest.mark.parametrize("queue,merges,expected", DUE)
def test_a_merge_that_errored_waits_out_its_backoff_and_the_rest_keep_their_order(queue, merges,
                                                                                  expected):
    got = plan.due([req(n) for n in queue], {f"m{k}": v for k, v in merges.items()}, NOW)
    assert names(got) == expected


# (due, tried this pass, batch size, next batch)
BATCHES = [
    ("abcde", "", 2, "ab"),
    ("abcde", "ab", 2, "cd"),
    ("abcde", "abcd", 2, "e"),
    ("abcde", "abcde", 2, ""),
    ("abcde", "", 10, "abcde"),
    ("abcde", "c", 3, "abd"),
    ("abcde", "", 1, "a"),
]


@pytest.mark.parametrize("due,tried,size,expected", BATCHES)
def test_the_next_batch_is_the_first_untried_requests_up_to_the_batch_size(due, tried, size,
                                                                           expected):
    got = plan.next_batch([req(n) for n in due], {f"m{n}" for n in tried}, size)
    assert names(got) == expected


@pytest.mark.parametrize("batch,left,right", [
    ("ab", "a", "b"), ("abc", "ab", "c"), ("abcd", "ab", "cd"), ("abcde", "abc", "de"),
    ("a", "a", ""),
])
def test_a_failed_batch_splits_in_queue_order_the_left_half_the_larger(batch, left, right):
    got_left, got_right = plan.halves(list(batch))
    assert ("".join(got_left), "".join(got_right)) == (left, right)


@pytest.mark.parametrize("left_failed,whole,expected", [
    (False, "tests failed", "tests failed"),   # the left half passed: the right one is to blame
    (True, "tests failed", None),              # both halves may hold a culprit: check the right
    (False, None, None),                       # nothing known about the whole: check the right
])
def test_the_right_half_inherits_the_failure_only_when_the_left_half_passed(left_failed, whole,
                                                                            expected):
    assert plan.right_half_result(left_failed, whole) == expected
