"""The board in a real browser: hostile titles stay text, other sites cannot act, CLI writes show live."""

from __future__ import annotations

import os
import time

import pytest

import boardkit
from bratkit import convoy, task
from helpers import brat, brat_json, wal_tip

SCRIPT = "<script>window.__pwned = 1; alert('pwned')</script>"
IMG = "<img src=x onerror=\"window.__pwned = 2; alert('img')\">"


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    from helpers import make_repo
    repo = make_repo(tmp_path_factory.mktemp("guard") / "repo")
    brat(repo, "init")
    c = convoy(repo, IMG)
    hostile = task(repo, c, SCRIPT, "-b", IMG)
    brat(repo, "task", "comment", hostile, "-m", SCRIPT)
    brat(repo, "task", "block", hostile, "-m", IMG)
    board = boardkit.start(repo)
    yield {"repo": repo, "board": board, "convoy": c, "hostile": hostile}
    board.stop()


def test_hostile_titles_are_inert_in_the_browser(served, browser, artifacts):
    b = served["board"]
    ctx = browser.new_context()
    page = ctx.new_page()
    dialogs = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    try:
        for path in ("/", "/needs-you", f"/task/{served['hostile']}"):
            page.goto(b.url.replace("/?", f"{path}?"))
            page.wait_for_load_state("networkidle")
            name = path.strip("/").split("/")[0] or "board"
            page.screenshot(path=os.path.join(artifacts, f"guard-{name}.png"), full_page=True)
            assert page.evaluate("window.__pwned") is None, path
            # Every script on the page is the board's own file; none came from the log.
            srcs = page.evaluate("[...document.scripts].map(s => s.src)")
            assert srcs and all(s.endswith("/static/board.js") for s in srcs), (path, srcs)
            assert page.evaluate("document.querySelectorAll('img').length") == 0, path
        assert SCRIPT in page.inner_text("h2.task-title")
        assert IMG in page.inner_text("main")
        assert dialogs == []
    finally:
        ctx.close()


def test_without_the_token_the_browser_gets_nothing(served, browser):
    b = served["board"]
    ctx = browser.new_context()
    try:
        page = ctx.new_page()
        for where in (b.at("/"), b.base + "/"):
            resp = page.goto(where)
            assert resp.status == 403 and SCRIPT not in page.content()
    finally:
        ctx.close()


def test_another_site_open_in_the_same_browser_cannot_act(served, browser):
    """A page from elsewhere posts to the board while the user is logged in to it."""
    b, repo = served["board"], served["repo"]
    ctx = browser.new_context()
    try:
        page = ctx.new_page()
        page.goto(b.url)                       # the user's own visit: the cookie is set
        assert page.locator("h1").inner_text() == "Board"
        # (the worst case: the other site knows the board's root)
        target = b.at(f"/api/v1/tasks/{served['hostile']}/drop")
        evil = (f"<form id=f method=post action='{target}' enctype='text/plain'>"
                "<input name='{\"message\":\"' value='x\"}'></form>"
                f"<script>fetch('{target}', {{method: 'POST', credentials: 'include', "
                "mode: 'no-cors', body: '{}'}); document.getElementById('f').submit();</script>")
        ctx.route("http://evil.test/**", lambda route: route.fulfill(
            status=200, content_type="text/html", body=evil))
        before = wal_tip(repo)
        other = ctx.new_page()
        other.goto("http://evil.test/")
        other.wait_for_url(f"{b.base}/**", timeout=5000)   # the form went to the board...
        # ...and was turned away: the cookie (Lax) stays home, and the Origin is not ours.
        assert '{"error":' in other.content()
        assert wal_tip(repo) == before
        assert brat_json(repo, "task", "show", served["hostile"])["status"] == "blocked"
    finally:
        ctx.close()


def test_a_change_made_with_the_cli_appears_without_a_reload(served, browser, artifacts):
    b, repo = served["board"], served["repo"]
    ctx = browser.new_context()
    try:
        page = ctx.new_page()
        page.goto(b.url)
        page.locator("#live.on").wait_for()
        page.evaluate("window.__same_page = true")
        brat(repo, "task", "create", "--convoy", served["convoy"], "Added from the terminal")
        start = time.monotonic()
        page.locator(".column[data-state=queued] .card", has_text="Added from the terminal") \
            .wait_for(timeout=5000)
        took = time.monotonic() - start
        assert page.evaluate("window.__same_page") is True     # no reload happened
        assert took < 2.0, took
        page.screenshot(path=os.path.join(artifacts, "live-board.png"), full_page=True)
    finally:
        ctx.close()
