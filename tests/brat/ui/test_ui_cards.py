"""A card says what the records say, and nothing they do not: a pause, a cost, the agent's word."""

from __future__ import annotations

from git_brat.brat.ui import data, html
from git_brat.grite.model.state import Entity


def _session(**fields) -> Entity:
    return Entity("s" * 32, "session", True, fields={k: (v, 1, "a", "e") for k, v in fields.items()})


def _card(**kw) -> str:
    base = dict(id="t" * 32, title="A task", status="running", convoy="c" * 32, priority=2,
                ready=False, engine="claude", labels=[], needs=[])
    return html.card(data.Card(**{**base, **kw}))


def test_a_card_shows_a_pause_and_a_cost_only_where_the_session_records_them():
    assert data.cost_of(_session(status="running")) == ""
    assert data.cost_of(_session(status="running", cost_usd=1.204)) == "$1.20"
    # A forged cost that is not a number, or is absurd, is not shown as one.
    for forged in ("$5", [1], True, -3, 10 ** 12):
        assert data.cost_of(_session(cost_usd=forged)) == "", forged
    plain = _card()
    assert "cost" not in plain and "liveness" not in plain and "elapsed" not in plain
    shown = _card(liveness="paused", cost="$1.20", running_for=3725.0)
    assert '<span class="liveness paused">paused</span>' in shown
    assert '<span class="cost">$1.20</span>' in shown and '<span class="elapsed">1h02m</span>' in shown


def test_the_agents_last_word_is_its_latest_comment_not_the_humans_reply():
    t = Entity("t" * 32, "task", True, fields={"status": ("blocked", 3, "a", "e3"),
                                               "reason": ("which database?", 3, "a", "e3")})
    assert data.last_message(t) == "which database?"        # its question, with the block
    t.comments = {"e1": (1, "a", 1, "blocked: which database?\nsqlite or postgres"),
                  "e2": (2, "a", 2, "reply: sqlite")}
    assert data.last_message(t) == "blocked: which database?\nsqlite or postgres"
    card = _card(message="<b>which</b> database?")
    assert '<p class="msg">&lt;b&gt;which&lt;/b&gt; database?</p>' in card
