"""A decision on the task page in a real browser, while the page redraws itself: the decision's
forms sit in a live section (only the actions legal now show), so the write a decision makes
redraws the very form that posted it, and a write from elsewhere can redraw the form being typed
in. Neither loses what the person did."""

from __future__ import annotations

import re

import pytest

import boardkit
from helpers import brat, brat_json

# Holds each POST's answer back until the page has redrawn at least once after it was sent: the
# order a loaded machine gives (the write's change event overtakes the HTTP answer).
ANSWER_AFTER_REDRAW = """() => {
  const plain = window.fetch.bind(window);
  window.fetch = async (url, opts) => {
    const resp = await plain(url, opts);
    if (!opts || opts.method !== "POST") return resp;
    const seen = document.body.dataset.version || "0";
    for (let i = 0; i < 100 && (document.body.dataset.version || "0") === seen; i++) {
      await new Promise((r) => setTimeout(r, 50));
    }
    window.__redrawnFirst = (document.body.dataset.version || "0") !== seen;
    return resp;
  };
}"""


@pytest.fixture
def served(tmp_path):
    with boardkit.board_of_one_convoy(tmp_path / "repo", "Decisions",
                                      "Wait for the schema") as (repo, board, (tid,)):
        yield repo, board, tid


@pytest.fixture
def page(browser, served):
    _repo, board, tid = served
    with boardkit.browser_page(browser, 15000) as p:
        boardkit.go(p, board, f"/task/{tid}")
        yield p


def test_a_decision_whose_own_write_redraws_its_form_still_says_it_was_done(served, page):
    repo, _board, tid = served
    page.evaluate(ANSWER_AFTER_REDRAW)
    page.fill("form.block input[name=message]", "waiting on the schema")
    page.click("form.block button")
    page.locator("output[data-result].ok").wait_for()
    assert page.evaluate("window.__redrawnFirst") is True     # the race was the one it names
    assert page.inner_text("output[data-result]") == "done"
    assert page.locator("form.block").count() == 0            # blocked: no block offered now
    shown = brat_json(repo, "task", "show", tid)
    assert shown["status"] == "blocked" and shown["reason"] == "waiting on the schema"


def test_what_is_typed_in_a_decision_survives_a_redraw_from_elsewhere(served, page):
    repo, _board, tid = served
    page.fill("form.block input[name=message]", "half a sentence")
    version = page.evaluate("document.body.dataset.version || '0'")
    brat(repo, "task", "update", tid, "--status", "running")     # queued -> running, by hand
    page.locator("form.requeue").wait_for()                       # the decision was redrawn
    assert page.evaluate("document.body.dataset.version || '0'") != version
    assert page.input_value("form.block input[name=message]") == "half a sentence"


def test_a_page_drawn_before_its_count_was_known_shows_it_without_waiting_for_a_change(served,
                                                                                     browser):
    """The count of what needs you is worked out beside the page: a page drawn first has none,
    and when the count lands before the page's event stream opens, no change ever comes for
    it (seen under load: "Needs you" stayed blank)."""
    repo, board, tid = served
    brat(repo, "task", "block", tid, "-m", "which schema?")   # one thing needs you
    with boardkit.browser_page(browser, 15000) as p:
        first = {"done": False}

        def drawn_without_the_count(route):
            if first["done"]:
                return route.continue_()
            first["done"] = True
            resp = route.fetch()
            body = re.sub(r'(<span id="needs-count"[^>]*>)[^<]*<', r"\1<", resp.text())
            route.fulfill(response=resp, body=body)

        p.route("**/?*", drawn_without_the_count)
        boardkit.go(p, board)
        assert first["done"]
        p.locator("#needs-count", has_text="1").wait_for()
