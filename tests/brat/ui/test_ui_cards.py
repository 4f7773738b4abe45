"""A card says what the records say, and nothing they do not: a pause, what was spent, the
agent's word."""

from __future__ import annotations

from git_brat.brat.ui import data, html
from git_brat.grite.model.state import Entity


def _card(**kw) -> str:
    base = dict(id="t" * 32, title="A task", status="running", convoy="c" * 32, priority=2,
                ready=False, engine="claude", labels=[], needs=[])
    return html.card(data.Card(**{**base, **kw}))


def test_a_card_shows_a_pause_and_what_was_spent_only_where_the_records_say_so():
    plain = _card()
    assert "cost" not in plain and "liveness" not in plain and "elapsed" not in plain
    shown = _card(liveness="paused", cost="1.2k tokens, $0.0032", running_for=3725.0)
    assert '<span class="liveness paused">paused</span>' in shown
    assert '<span class="cost">1.2k tokens, $0.0032</span>' in shown
    assert '<span class="elapsed">1h02m</span>' in shown


def test_the_agents_last_word_is_its_latest_comment_not_the_humans_reply():
    t = Entity("t" * 32, "task", True, fields={"status": ("blocked", 3, "a", "e3"),
                                               "reason": ("which database?", 3, "a", "e3")})
    assert data.last_message(t) == "which database?"        # its question, with the block
    t.comments = {"e1": (1, "a", 1, "blocked: which database?\nsqlite or postgres"),
                  "e2": (2, "a", 2, "reply: sqlite")}
    assert data.last_message(t) == "blocked: which database?\nsqlite or postgres"
    card = _card(message="<b>which</b> database?")
    assert '<p class="msg">&lt;b&gt;which&lt;/b&gt; database?</p>' in card


def test_a_task_paused_on_a_usage_limit_says_until_when_on_its_card():
    import time
    from git_brat.brat import board as model
    until = int(time.time() * 1000) + 3_600_000
    t = Entity("t" * 32, "task", True, fields={
        "status": ("queued", 3, "a", "e3"), "paused_until": (until, 3, "a", "e3"),
        "paused_why": ("claude usage limit", 3, "a", "e3")})
    pause = model.paused_of(t)["paused"]
    assert pause.startswith("paused until ") and pause.endswith("(claude usage limit)")
    shown = _card(liveness="paused", paused=pause)
    assert f'<span class="liveness paused">{pause}</span>' in shown
    # once the reset has passed, the task is not paused any more
    assert model.paused_of(t, now_ms=until + 1) == {}
