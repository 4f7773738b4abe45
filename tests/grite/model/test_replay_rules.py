"""Replay re-checks what a writer checks: the task state machine and the bounds of an event."""

from __future__ import annotations

import itertools

import msgspec
import pytest

from git_brat.grite.model import events as ev
from git_brat.grite.model.state import canonical, replay, status_of

TASK = "7" * 32


def _task_log(*moves, actor="a1" * 8, start=1):
    """A task created queued, then each (status, extra fields) in turn at rising clocks."""
    out = [ev.make_event(TASK, actor, start, 1000, ev.Create("task", {"title": "t", "status": "queued"}))]
    prev = "queued"
    for i, (to, extra) in enumerate(moves):
        fields = {"status": to, "status_from": prev, **extra}
        out.append(ev.make_event(TASK, actor, start + i + 1, 1000 + i, ev.SetFields(fields)))
        prev = to
    return out


def test_a_queued_task_moved_straight_to_merged_stays_queued_and_the_move_is_rejected():
    forged = _task_log(("merged", {}))
    state = replay(forged)
    assert status_of(state.entities[TASK]) == "queued"
    rej = state.rejected[forged[1].id]
    assert rej.entity == TASK and "queued -> merged" in rej.reason


def test_a_force_that_lies_about_where_the_task_was_is_rejected_and_a_true_one_kept():
    log = _task_log(("running", {}))
    lie = ev.make_event(TASK, "ba" * 8, 9, 1, ev.SetFields(
        {"status": "merged", "status_from": "merging", "forced": True}))
    state = replay(log + [lie])
    assert status_of(state.entities[TASK]) == "running"
    assert "running -> merged" in state.rejected[lie.id].reason
    assert "forced" not in state.entities[TASK].fields
    true = _task_log(("running", {}), ("merged", {"forced": True}))
    state = replay(true)
    assert status_of(state.entities[TASK]) == "merged" and not state.rejected


def test_a_create_that_starts_a_task_as_merged_is_rejected():
    create = ev.make_event(TASK, "ba" * 8, 1, 1, ev.Create("task", {"title": "cc" * 8, "status": "merged"}))
    state = replay([create])
    assert status_of(state.entities[TASK]) == "queued" and create.id in state.rejected


def test_a_late_earlier_move_makes_a_rejected_later_one_legal_in_the_stored_cache_too():
    log = _task_log(("running", {}), ("needs-review", {}))
    state = replay([log[0], log[2]])          # running has not arrived: queued -> needs-review
    assert log[2].id in state.rejected
    state.apply(log[1])
    assert status_of(state.entities[TASK]) == "needs-review" and not state.rejected
    # The legal path: the same state, nothing rejected, in every arrival order.
    log += _task_log(("running", {}), ("needs-review", {}), ("merging", {}), ("merged", {}))[3:]
    states = {canonical(replay(list(order))) for order in itertools.permutations(log)}
    assert len(states) == 1
    final = replay(log)
    assert status_of(final.entities[TASK]) == "merged" and not final.rejected


@pytest.mark.parametrize("lamport, ts, why", [
    ((1 << 64) - 1, 1000, "Lamport clock"),
    (5, 1 << 62, "timestamp"),
    (5, -1, "timestamp"),
])
def test_an_event_with_an_impossible_clock_is_rejected_and_leaves_the_clock_alone(lamport, ts, why):
    honest = _task_log(("running", {}))
    bad = ev.make_event(TASK, "ba" * 8, lamport, ts, ev.Comment("hi"))
    state = replay(honest + [bad])
    assert why in state.rejected[bad.id].reason
    assert state.max_lamport == 2 and not state.entities[TASK].comments
    assert canonical(replay(honest)) != canonical(state)   # (only by the rejection it lists)


def test_values_nested_too_deep_or_too_big_are_rejected():
    deep: object = "x"
    for _ in range(ev.MAX_DEPTH + 1):
        deep = [deep]
    nested = ev.make_event(TASK, "bb" * 8, 3, 1, ev.SetFields({"title": deep}))
    big = ev.make_event(TASK, "bb" * 8, 4, 1, ev.Comment("A" * (ev.MAX_EVENT_BYTES + 1)))
    state = replay(_task_log() + [nested, big])
    assert "nested" in state.rejected[nested.id].reason
    assert "bytes" in state.rejected[big.id].reason
    assert state.entities[TASK].get("title") == "t"


def _raw_batch(depth: int) -> bytes:
    val = b"\x91" * depth + b"\xa1x"
    op = b"\x92" + msgspec.msgpack.encode("s") + b"\x81" + msgspec.msgpack.encode("title") + val
    event = b"\x96" + b"".join(msgspec.msgpack.encode(x) for x in ["e" * 32, TASK, "x", 9, 0]) + op
    return b"\x94" + b"".join(msgspec.msgpack.encode(x) for x in [1, "0" * 16, 9]) + b"\x91" + event


def test_a_batch_nested_past_what_the_decoder_can_take_is_a_decode_error_not_a_crash():
    with pytest.raises(msgspec.DecodeError, match="nested too deep"):
        ev.decode_batch(_raw_batch(200_000))
    head = b"\x94" + b"".join(msgspec.msgpack.encode(x) for x in [1, "0" * 16, 9, 0])
    with pytest.raises(msgspec.DecodeError, match="nested too deep"):
        ev.decode_head(head[:-1] + b"\x91" * 200_000)


def test_a_batch_with_too_many_events_is_refused_before_it_is_decoded():
    e = ev.make_event(TASK, "cc" * 8, 1, 0, ev.Comment("hi"))
    data = ev.encode_batch(ev.Batch(1, "0" * 16, 1, [e] * (ev.MAX_BATCH_EVENTS + 1)))
    with pytest.raises(msgspec.DecodeError, match="events"):
        ev.decode_batch(data)
    many = [ev.make_event(f"{i:032x}", "cc" * 8, 1, 0, ev.Comment("hi"))
            for i in range(ev.MAX_BATCH_ENTITIES + 1)]
    with pytest.raises(msgspec.DecodeError, match="entities"):
        ev.decode_batch(ev.encode_batch(ev.Batch(1, "0" * 16, 1, many)))


S1, S2 = "51" * 16, "52" * 16


def test_a_crash_recovered_again_after_the_task_ran_once_more_does_not_undo_that_run():
    """The chaos schedule (5, 10): two clones saw session S1's lease expire; one requeued the
    task, ran S2 and took it to review; the other's requeue, decided on its older view and
    stamped later, must not send the reviewed work back to the queue (it was run twice)."""
    log = _task_log(("running", {"session": S1}), ("queued", {"ends": S1}),
                    ("running", {"session": S2}), ("needs-review", {"ends": S2}))
    stale = ev.make_event(TASK, "ba" * 8, 20, 2000, ev.SetFields(
        {"status": "queued", "status_from": "running", "ends": S1}))
    for order in itertools.permutations(log[1:] + [stale]):
        state = replay([log[0], *order])
        assert status_of(state.entities[TASK]) == "needs-review", order
        assert set(state.rejected) == {stale.id}
        assert "ends session 5151515's run, but the task is needs-review" in \
            state.rejected[stale.id].reason
        assert state.entities[TASK].get("ends") == S2   # (the last legal move's, not the stale one's)


def test_a_stale_end_of_a_run_is_refused_while_the_next_run_is_under_way():
    log = _task_log(("running", {"session": S1}), ("queued", {"ends": S1}),
                    ("running", {"session": S2}))
    stale = ev.make_event(TASK, "ba" * 8, 20, 2000, ev.SetFields(
        {"status": "blocked", "status_from": "running", "ends": S1}))
    state = replay(log + [stale])
    assert status_of(state.entities[TASK]) == "running"
    assert "its run is session 5252525's" in state.rejected[stale.id].reason
    # The same recovery twice (two clones at once) is no news: the second changes nothing.
    again = ev.make_event(TASK, "cb" * 8, 4, 2000, ev.SetFields(
        {"status": "queued", "status_from": "running", "ends": S1}))
    state = replay(log[:3] + [again])
    assert status_of(state.entities[TASK]) == "queued" and not state.rejected


def test_moves_written_before_runs_were_named_are_judged_as_before():
    old = _task_log(("running", {"session": S1}), ("queued", {}), ("running", {"session": S2}),
                    ("needs-review", {}))
    late = ev.make_event(TASK, "ba" * 8, 20, 2000, ev.SetFields(
        {"status": "queued", "status_from": "running"}))
    state = replay(old + [late])   # (needs-review -> queued is a legal move: no run is named)
    assert status_of(state.entities[TASK]) == "queued" and not state.rejected
