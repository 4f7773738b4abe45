"""Browser notifications, in Chromium: opted in on the board, one is raised when what needs you
grows, naming what is new; none for what the page's own actions caused."""

from __future__ import annotations

import pytest

import boardkit
from helpers import brat

# Every Notification the page raises is kept instead of shown (the permission is granted to
# the context, as a person's click on "Allow" would).
CAPTURE = """
window.__notes = [];
window.Notification = class {
  constructor(title, options) { window.__notes.push({title, body: (options || {}).body || ""}); }
  static get permission() { return "granted"; }
  static requestPermission() { return Promise.resolve("granted"); }
};
"""


@pytest.fixture
def board(tmp_path):
    with boardkit.board_of_one_convoy(tmp_path / "repo", "Notified", "Pick the database",
                                      "Tidy the changelog") as (repo, b, (asked, mine)):
        yield repo, b, asked, mine


@pytest.fixture
def page(browser, board):
    _repo, b, _asked, _mine = board
    with boardkit.browser_page(browser, init_script=CAPTURE, permissions=["notifications"],
                               base_url=b.base) as p:
        yield p


def _open(page, board, path="/"):
    boardkit.go(page, board, path)
    page.locator("#needs-count:not(:empty)").wait_for()
    return int(page.locator("#needs-count").inner_text())


def test_a_cli_block_raises_a_notification_naming_it_and_a_board_action_raises_none(board, page):
    repo, b, asked, mine = board
    before = _open(page, b)
    page.click("#notify")
    page.locator("#notify", has_text="notifications on").wait_for()

    brat(repo, "task", "block", asked, "-m", "postgres or sqlite?")
    page.locator("#needs-count", has_text=str(before + 1)).wait_for()
    page.wait_for_function("window.__notes.length > 0")
    notes = page.evaluate("window.__notes")
    assert len(notes) == 1
    assert "blocked: Pick the database" in notes[0]["body"] and "need" in notes[0]["title"]

    # The same growth made by this page's own action is not announced to it.
    _open(page, b, f"/task/{mine}")
    assert page.locator("#notify", has_text="notifications on").count() == 1   # (kept)
    form = page.locator('form[data-action$="/block"]')
    form.locator("input[name=message]").fill("waiting for the release")
    form.locator("button").click()
    page.locator("#needs-count", has_text=str(before + 2)).wait_for()
    page.wait_for_timeout(1500)   # (a notification would follow the count's redraw at once)
    assert page.evaluate("window.__notes") == []
