"""Reading what an engine spent: cumulative engines not counted twice, cost unknown (never $0)
without a figure or a price, budgets in words, and an engine's or an agent's hostile output."""

from __future__ import annotations

import json
import os
import threading

import pytest

from git_brat.brat.engines import PRESETS, usage
from git_brat.grite.model import events as ev

TASK = "ab" * 16
ALICE = "cd" * 8


def codex_turn(n_in: int, n_out: int) -> str:
    return json.dumps({"type": "turn.completed", "usage": {"input_tokens": n_in,
                                                            "output_tokens": n_out}})


def test_a_resumed_codex_thread_counts_only_what_it_spent_itself():
    first = usage.measure(PRESETS["codex"], codex_turn(400, 80))
    second = usage.measure(PRESETS["codex"], codex_turn(900, 170))   # the thread's totals
    own = second.minus(first)
    assert (own.input, own.output) == (500, 90)
    # A total that went down is a conversation that started over: all of it is new.
    assert first.minus(second) == first


def test_a_cost_of_zero_next_to_tokens_is_unknown_and_a_sum_with_it_too():
    step = json.dumps({"type": "step_finish", "part": {"tokens": {"input": 10, "output": 2},
                                                       "cost": 0}})
    u = usage.measure(PRESETS["opencode"], step)
    assert u.tokens == 12 and u.cost_micros is None and usage.money(u.cost_micros) == "unknown"
    priced = usage.Usage(input=5, output=1, cost_micros=700, cost_source="engine",
                         reported=True)
    assert priced.plus(u).cost_micros is None            # part of it has no price
    assert priced.plus(usage.Usage()).cost_micros == 700   # nothing spent costs nothing
    table = usage.price(u, {"opencode": [2.0, 10.0]}, "", "opencode")
    assert table.cost_micros == 40 and table.cost_source == "prices"   # 10*2 + 2*10 per M


@pytest.mark.parametrize("text, amount, unit", [
    ("200k tokens", 200_000, "tokens"), ("1.5M tokens", 1_500_000, "tokens"),
    ("50000", 50_000, "tokens"), ("$2.00", 2_000_000, "usd"), ("$0.5", 500_000, "usd")])
def test_budgets_are_written_in_tokens_or_dollars(text, amount, unit):
    assert usage.parse_budget(text) == usage.Budget(amount, unit)


@pytest.mark.parametrize("text", ["lots", "-5 tokens", "$", "2 euros", "1e9"])
def test_a_budget_that_is_not_tokens_or_dollars_is_refused(text):
    with pytest.raises(ValueError):
        usage.parse_budget(text)


def test_hostile_numbers_in_an_engines_output_count_as_nothing():
    line = json.dumps({"type": "turn.completed", "usage": {
        "input_tokens": True, "output_tokens": -7, "cached_input_tokens": 1e300,
        "reasoning_output_tokens": "9"}})
    assert not usage.measure(PRESETS["codex"], line).reported
    aider = ("Tokens: 9999999999999999999k sent, 1 received. Cost: $99999999999 message\n"
             "Tokens: 1.2k sent, 30 received.")
    u = usage.measure(PRESETS["aider"], aider)
    assert (u.input, u.output, u.cost_micros) == (1200, 31, None)
    # What is recorded always fits the log's schema (an end event it refused would be lost).
    many = "\n".join(json.dumps({"type": "step_finish", "part": {"tokens": {
        "input": 9e14, "output": 9e14}, "cost": 9e14}}) for _ in range(100))
    big = usage.measure(PRESETS["opencode"], many)
    e = ev.make_event(TASK, ALICE, 1, 1, ev.SetFields({"usage": usage.to_fields(big, big)}))
    assert ev.event_problem(e) is None


def test_a_side_file_the_agent_made_a_fifo_or_a_symlink_is_not_read(tmp_path):
    """copilot's event file sits in its state directory, which a sandboxed agent may write:
    a FIFO there must not hang the witness, a symlink must not be followed out."""
    home = tmp_path / "copilot"
    conv = home / "session-state" / "conv"
    conv.mkdir(parents=True)
    os.mkfifo(conv / "events.jsonl")
    env = {"COPILOT_HOME": str(home)}
    done = threading.Event()
    result = []
    t = threading.Thread(target=lambda: (result.append(usage.measure(
        PRESETS["copilot"], "", env=env, engine_session="conv")), done.set()), daemon=True)
    t.start()
    assert done.wait(5), "reading a FIFO hung"
    assert not result[0].reported
    os.unlink(conv / "events.jsonl")
    secret = tmp_path / "elsewhere.jsonl"
    secret.write_text(json.dumps({"type": "session.usage_record", "data": {"usage": {
        "inputTokens": 5, "outputTokens": 5}}}) + "\n")
    os.symlink(secret, conv / "events.jsonl")
    assert not usage.measure(PRESETS["copilot"], "", env=env, engine_session="conv").reported
    # an id from the log never builds a path out of its directory
    assert not usage.measure(PRESETS["copilot"], "", env=env,
                             engine_session="../../../x").reported


@pytest.mark.parametrize("bad", [{"input": "lots"}, {"output": -1}, {"cost_micros": 1.5},
                                 {"reported": {"input": "x"}}, "100 tokens"])
def test_a_forged_usage_record_is_rejected_at_replay(bad):
    e = ev.make_event(TASK, ALICE, 1, 1, ev.SetFields({"usage": bad}))
    assert "usage" in (ev.event_problem(e) or "")


def _session(sid: str, spent: usage.Usage, engine_session: str = "", cumulative=None):
    from git_brat.grite.model.state import Entity
    fields = {"usage": (usage.to_fields(spent, cumulative), 1, ALICE, "e" * 32),
              "engine_session": (engine_session, 1, ALICE, "e" * 32)}
    return Entity(sid, "session", True, fields=fields)


def test_a_money_budget_counts_the_costs_that_are_known_and_the_view_says_unknown():
    from git_brat.brat import spend
    priced = _session("1" * 32, usage.Usage(input=100, output=10, cost_micros=30_000,
                                             cost_source="engine", reported=True))
    unpriced = _session("2" * 32, usage.Usage(input=900, output=90, reported=True))
    budget = usage.parse_budget("$0.02")
    assert budget.reached(spend.counted([priced, unpriced]))   # $0.03 known is over $0.02
    view = spend.view([priced, unpriced])
    assert view.tokens == 1100 and view.cost == "unknown" and view.unpriced == 1


def test_a_resumed_session_records_only_its_own_spending_against_the_one_it_resumed():
    from git_brat.brat import spend
    codex = PRESETS["codex"]
    first_totals = usage.measure(codex, codex_turn(400, 80))
    first = _session("1" * 32, first_totals, "thread-1", cumulative=first_totals)
    now = usage.measure(codex, codex_turn(1000, 200))
    field = spend.record(now, codex, [first], "thread-1", {"codex": [1.0, 2.0]})
    assert (field["input"], field["output"]) == (600, 120)
    assert field["reported"]["input"] == 1000          # the next resume starts from here
    assert field["cost_micros"] == 840 and field["cost_source"] == "prices"   # 600*1 + 120*2
    # a fresh conversation (not resumed) is all its own
    assert spend.record(now, codex, [first], "", {})["input"] == 1000
