"""The refinery's batch plan, decided without I/O: which requests are due now, which land
together, and how a batch whose check failed is split to find the culprits."""

from __future__ import annotations

from typing import Any, Mapping, TypeVar

from git_brat.brat.refinery.queue import Request

R = TypeVar("R")


def due(reqs: list[Request], merges: Mapping[str, Mapping[str, Any]], now: int,
        red: str | None = None) -> list[Request]:
    """The requests to work on now, in the queue's order: all but a merge that errored and is
    still backing off (its next_attempt_at is later than now), and one held for the target red
    at commit `red` (checked again once the target moved or passes)."""
    out = []
    for r in reqs:
        m = merges.get(r.merge)
        if m is not None and m.get("status") == "error" and m.get("next_attempt_at", 0) > now:
            continue
        if red and m is not None and m.get("status") == "held" and m.get("held_on") == red \
                and m.get("head") == r.head:
            continue
        out.append(r)
    return out


def next_batch(due_now: list[Request], tried: set[str], size: int) -> list[Request]:
    """What lands together next: the first `size` due requests this pass has not tried yet."""
    return [r for r in due_now if r.merge not in tried][:size]


def halves(reqs: list[R]) -> tuple[list[R], list[R]]:
    """A failed batch is split in two, in queue order, the left half the larger one."""
    half = (len(reqs) + 1) // 2
    return reqs[:half], reqs[half:]


def right_half_result(left_failed: bool, whole_output: str | None) -> str | None:
    """The check output the right half is known to fail with, without checking it again: when the
    whole batch failed and its left half passed, the failure is in the right half."""
    return None if left_failed else whole_output


__all__ = ["due", "next_batch", "halves", "right_half_result"]
