"""Hostile records on the board (issue 34, t07 and t10): a pusher's own events put markup and
values of the wrong type in every field; the board shows them as text on every page and API
route, its script posts only the forms it rendered, its cookie never reaches another
port, and a detached board's files keep the token to their owner."""

from __future__ import annotations

import contextlib
import http.server
import json
import os
import re
import stat
import threading

import pytest

import boardkit
from bratkit import convoy, task
from helpers import brat, brat_json, make_repo, wal_tip

PAGES = ("/", "/needs-you", "/sessions", "/queue", "/mayor")
API = ("/api/v1/status", "/api/v1/tasks", "/api/v1/convoys", "/api/v1/sessions?all=1",
       "/api/v1/refinery", "/api/v1/mayor", "/api/v1/mayor/log")
TASK_API = ("/api/v1/tasks/{id}", "/api/v1/tasks/{id}/diff")
# Views built on the ready order (brat.board), which compares priorities: until replay
# refuses a priority that is not a number, they may only say they could not be drawn (an
# answer, not a crash); every other view shows the hostile values.
SORTS_BY_PRIORITY = ("/needs-you", "/api/v1/status")


def _injected_form(victim: str) -> str:
    """t07's priority: closes the card's markup and opens a form the board's script posted."""
    return (f'2</small></a><form data-action="/api/v1/tasks/{victim}/drop" id=injform>'
            '<input type=hidden name=message value="dropped"><button id=inj>details</button>'
            '</form><a><small>')


def _refresh(port: int) -> str:
    return f'2<meta http-equiv=refresh content="0;url=http://127.0.0.1:{port}/away">'


def _forge(repo, tid: str, fields: dict, labels: list = ()) -> None:
    """Write the fields as the repository's own writer would (a pusher with a valid key):
    no command lets these types through, the log does."""
    from git_brat.grite.log.wal import Draft
    from git_brat.grite.model import events as ev
    from gritekit import pusher_append
    drafts = [Draft(tid, ev.SetFields(fields))]
    drafts += [Draft(tid, ev.AddTo("labels", x)) for x in labels]
    pusher_append(repo, drafts)


class Elsewhere:
    """Another server on another port of 127.0.0.1: what requests and cookies reach it."""

    def __init__(self):
        self.hits: list[tuple[str, str | None]] = []
        hits = self.hits

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                hits.append((self.path, self.headers.get("Cookie")))
                self.send_response(200)
                self.end_headers()
                self.wfile.write(b"elsewhere")

            def log_message(self, *_a):
                pass

        self.server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(10)


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    repo = make_repo(tmp_path_factory.mktemp("hostile") / "repo")
    brat(repo, "init")
    c = convoy(repo, "release")
    victim = task(repo, c, "ship the release")
    brat(repo, "task", "update", victim, "--status", "blocked", "-m", "waiting for sign-off")
    elsewhere = Elsewhere()
    forged = {
        "form": task(repo, c, "tidy the changelog"),
        "refresh": task(repo, c, "tidy the readme"),
        "types": task(repo, c, "tidy the docs"),
    }
    # Markup in text fields (replay keeps them: text is text), and values of the wrong type
    # (replay rejects the whole event: the board must not crash on either).
    _forge(repo, forged["form"], {"title": _injected_form(victim)},
           ["<img src=x id=label-img>", "step"])
    _forge(repo, forged["refresh"], {"title": _refresh(elsewhere.port),
                                     "body": _refresh(elsewhere.port)})
    _forge(repo, forged["types"], {"priority": ["<b>x</b>", {"k": None}], "title": 2 ** 64 - 1,
                                   "body": "\x00\x1b[31m<svg id=svg-body>", "step": {"<i>": 1},
                                   "reason": ["<b>why</b>"]})
    board = boardkit.start(repo)
    yield {"repo": repo, "board": board, "victim": victim, "forged": forged, "elsewhere": elsewhere}
    board.stop()
    elsewhere.close()


@contextlib.contextmanager
def signed_in(browser, board):
    """A page of a fresh browser context that opened the board's address: (page, the URLs it
    has posted to)."""
    ctx = browser.new_context()
    posts: list[str] = []
    try:
        page = ctx.new_page()
        page.on("request", lambda r: posts.append(r.url) if r.method == "POST" else None)
        page.goto(board.url)
        yield page, posts
    finally:
        ctx.close()


def _every_page(h) -> list[str]:
    return [*PAGES, f"/task/{h['victim']}", *(f"/task/{t}" for t in h["forged"].values())]


def test_every_page_and_api_route_serves_hostile_values_as_text(hostile):
    b = hostile["board"]
    for path in _every_page(hostile):
        code, _h, page = b.request("GET", path)
        text = page.decode()
        assert code == 200, (path, code)
        assert path in SORTS_BY_PRIORITY or "could not be drawn" not in text, path
        assert not re.search(r"<(form|meta|img|svg|b|i)\b[^>]*(inj|refresh|label-img|svg-body)",
                             text, re.I), path
        assert "<form" not in text.split("<main", 1)[1].replace('<form class="action', "") \
            .replace('<form class="filters"', ""), path
        assert "\x00" not in text and "\x1b" not in text, path
    _c, _h, page = b.request("GET", "/")
    assert b"&lt;form data-action=" in page   # shown, as text
    tid = hostile["forged"]["types"]
    for path in (*API, *(p.format(id=t) for p in TASK_API for t in (tid, hostile["victim"]))):
        code, headers, body = b.request("GET", path)
        assert code == 200 or path in SORTS_BY_PRIORITY and code == 500, (path, code, body[:300])
        assert headers["content-type"] == "application/json"
        assert code == 200 or "could not be drawn" in json.loads(body)["error"]
    shown = b.get_json(f"/api/v1/tasks/{tid}")
    assert shown["priority"] == 2 and shown["title"] == "tidy the docs"   # rejected by replay


def test_in_the_browser_nothing_injected_acts_and_nothing_navigates(hostile, browser):
    b, repo, away = hostile["board"], hostile["repo"], hostile["elsewhere"]
    with signed_in(browser, b) as (page, posts):
        for path in _every_page(hostile):
            page.goto(b.at(path))
            page.wait_for_timeout(300)
            assert page.url == b.at(path), (path, page.url)     # no refresh took it away
            assert page.evaluate("document.querySelectorAll('#inj, #injform, #label-img, "
                                 "#svg-body, meta[http-equiv]').length") == 0, path
        page.goto(b.at("/"))
        assert "<form data-action" in page.inner_text(f".card[data-task='{hostile['forged']['form']}']")
        page.wait_for_timeout(1200)
        assert page.url == b.at("/") and away.hits == []
        assert posts == []
    assert brat_json(repo, "task", "show", hostile["victim"])["status"] == "blocked"


def test_a_form_the_server_did_not_render_is_never_posted_by_the_board(hostile, browser):
    """Were markup to slip past escaping, the board's script would still not post it: it acts
    on the forms carrying its render's nonce only (t07 dropped a task with one click)."""
    b, repo = hostile["board"], hostile["repo"]
    victim = hostile["victim"]
    before = wal_tip(repo)
    with signed_in(browser, b) as (page, posts):
        page.locator("#live.on").wait_for()
        page.evaluate("""(victim) => {
            const box = document.querySelector('#columns .card small');
            box.insertAdjacentHTML('beforeend', `<form data-action="/api/v1/tasks/${victim}/drop"
              data-nonce="guess"><input type=hidden name=message value=dropped>
              <button id=inj>details</button></form>`);
            box.insertAdjacentHTML('beforeend', `<form data-action="/api/v1/tasks/${victim}/drop">
              <input type=hidden name=message value=dropped><button id=inj2>more</button></form>`);
        }""", victim)
        page.click("#inj")
        page.click("#inj2")
        page.wait_for_timeout(1500)
        assert posts == []
        # The board's own forms still act after a live redraw re-stamped them.
        queued = hostile["forged"]["refresh"]
        page.goto(b.at(f"/task/{queued}"))
        page.locator("#live.on").wait_for()
        brat(repo, "task", "comment", queued, "-m", "a redraw")
        page.locator("body[data-version]").wait_for(state="attached", timeout=10000)
        page.fill("form.block input[name=message]", "still waiting")
        page.click("form.block button")
        page.locator("output[data-result].ok").wait_for(timeout=10000)
    assert [p.split("/api/v1/")[1] for p in posts] == [f"tasks/{queued}/block"]
    assert wal_tip(repo) != before
    assert brat_json(repo, "task", "show", victim)["status"] == "blocked"
    shown = brat_json(repo, "task", "show", queued)
    assert shown["status"] == "blocked" and shown["reason"] == "still waiting"


def test_another_port_never_receives_the_boards_cookie(hostile, browser):
    """127.0.0.1's cookies go to every port of it (t10), unless scoped by path: the board's
    pages and its cookie live under a secret root, so another server is sent nothing at any
    path it can name, and the board takes its cookie only under that root."""
    b, repo, victim = hostile["board"], hostile["repo"], hostile["victim"]
    other = Elsewhere()
    guess = "/b-" + "0" * 32
    try:
        with signed_in(browser, b) as (page, _posts):
            assert page.url.startswith(b.base + b.root + "/")   # the pages live under it
            for path in ("/", "/task/x", "/api/v1/tasks", guess + "/", "/b-/"):
                page.goto(f"http://127.0.0.1:{other.port}{path}")
            cookies = page.context.cookies()
    finally:
        other.close()
    asked = [p for p, _c in other.hits if p != "/favicon.ico"]
    assert len(asked) == 5 and all(cookie is None for _p, cookie in other.hits), other.hits
    [kept] = [c for c in cookies if c["name"] == f"brat_ui_{b.port}"]
    assert kept["path"] == b.root and kept["httpOnly"] and kept["sameSite"] == "Lax"
    cookie = f"{kept['name']}={kept['value']}"
    assert b.token not in cookie
    for path in ("/", "/api/v1/tasks", guess + "/", b.root + "x/"):   # outside the root: nothing
        code, _h, body = b.request("GET", path, headers={"Cookie": cookie}, cookie=False)
        assert code == 403 and b"ship the release" not in body, path
    # Were the cookie taken anyway (the browser's store read), it reads and changes nothing.
    before = wal_tip(repo)
    code, _h, page = b.request("GET", b.root + "/", headers={"Cookie": cookie}, cookie=False)
    assert code == 200
    value = kept["value"]
    candidates = set(re.findall(rb"[0-9a-f]{64}|[A-Za-z0-9_-]{24,}", page)) | {value.encode()}
    attempts = [{"Cookie": cookie, "Origin": b.base, "X-CSRF-Token": c.decode()} for c in candidates]
    attempts.append({"X-Brat-Token": value, "Origin": b.base, "X-CSRF-Token": value})
    for headers in attempts:     # whatever the page held
        code, _h, _out = b.request("POST", f"{b.root}/api/v1/tasks/{victim}/drop",
                                   {"message": "dropped"}, headers, cookie=False)
        assert code == 403, headers
    code, _h, _b = b.request("GET", f"/?token={value}", cookie=False)
    assert code == 403
    assert wal_tip(repo) == before
    assert brat_json(repo, "task", "show", victim)["status"] == "blocked"


def test_a_detached_boards_files_are_its_owners_and_no_log_or_argv_holds_its_token(tmp_path, browser):
    from git_brat.brat.ui import serve
    repo = make_repo(tmp_path / "r")
    brat(repo, "init")
    log = repo / ".git" / "brat" / "ui.log"
    log.write_text("an older board's line\n")
    os.chmod(log, 0o644)             # as an older git-brat left it
    # A browser to open (its arguments are in /proc, for every local user to read).
    opened = tmp_path / "opened"
    recorder = tmp_path / "browser"
    recorder.write_text(f'#!/bin/sh\nprintf "%s\\n" "$@" >> {opened}\n')
    recorder.chmod(0o755)
    old = os.umask(0o022)
    try:
        shown = brat_json(repo, "ui", "--detach",
                          env={"DISPLAY": ":99", "BROWSER": f"{recorder} %s"})
    finally:
        os.umask(old)
    token = shown["url"].split("token=", 1)[1]
    try:
        board = boardkit.Board(None, shown)
        assert board.get_json("/api/v1/tasks") == []
        with open(f"/proc/{shown['pid']}/cmdline", "rb") as f:
            argv = f.read()
        state = stat.S_IMODE((repo / ".git" / "brat" / "ui.json").stat().st_mode)
        opener = repo / ".git" / "brat" / "ui-open.html"
        assert opened.read_text() == f"file://{opener}\n"
        assert stat.S_IMODE(opener.stat().st_mode) == 0o600 and token in opener.read_text()
        ctx = browser.new_context()
        try:             # the file the browser was given opens the board, signed in
            page = ctx.new_page()
            page.goto(f"file://{opener}")
            page.locator("#live.on").wait_for()
            assert page.url == f"http://127.0.0.1:{shown['port']}{board.root}/"
            assert page.locator("h1").inner_text() == "Board"
            assert page.evaluate("localStorage.getItem('brat-csrf')") is not None
        finally:
            ctx.close()
    finally:
        brat(repo, "ui", "stop")
    assert stat.S_IMODE(log.stat().st_mode) == 0o600
    text = log.read_text()
    assert token not in text and f"127.0.0.1:{shown['port']}" in text
    assert token.encode() not in argv
    assert serve.without_token(shown["url"]) == f"http://127.0.0.1:{shown['port']}/"
    assert state == 0o600
    assert not opener.exists()       # gone with the board


def test_a_link_from_elsewhere_cannot_replace_the_right_to_act(hostile, browser):
    """Another port's page may send the user to the board with a fragment of its choosing: the
    board keeps the CSRF token only from its own redirect, so its forms still act."""
    b, repo = hostile["board"], hostile["repo"]
    target = hostile["forged"]["types"]
    with signed_in(browser, b) as (page, _posts):
        page.goto(b.at(f"/task/{target}#brat-csrf={'0' * 64}"))
        assert page.url == b.at(f"/task/{target}")     # the fragment left the address
        page.fill("form.block input[name=message]", "held")
        page.click("form.block button")
        page.locator("output[data-result].ok").wait_for(timeout=10000)
    assert brat_json(repo, "task", "show", target)["reason"] == "held"
