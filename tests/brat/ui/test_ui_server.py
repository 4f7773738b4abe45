"""`git brat ui` over HTTP: the guard at the door, the API against the CLI's --json, live events."""

from __future__ import annotations

import http.client
import json
import os
import re
import subprocess
import sys
import time

import pytest

import boardkit
from bratkit import convoy, demo_project, task
from helpers import ROOT, brat, brat_json, git, make_repo, run, status, wal_tip

SCRIPT = "<script>alert('pwned')</script>"


def _demo_repo(path):
    demo_project(path)
    git(path, "add", ".brat")
    git(path, "commit", "-qm", "git-brat configuration")
    return path


@pytest.fixture(scope="module")
def seeded(tmp_path_factory):
    """A repository with a convoy, a task done by a session (needs-review), a task whose
    title is a script (blocked by the scripted engine), and a board serving it."""
    from git_brat.brat.demo import project as demo_project
    repo = _demo_repo(tmp_path_factory.mktemp("ui") / "repo")
    c = convoy(repo, "Fix textstats")
    fix = demo_project.FIXES[0]
    done = task(repo, c, fix.title, "-b", fix.body)
    hostile = task(repo, c, SCRIPT)
    queued = task(repo, c, "Write the changelog", "--needs", done)
    brat(repo, "witness", "run", "--once", "--engine", "demo", "--max-sessions", "2")
    board = boardkit.start(repo)
    yield {"repo": repo, "board": board, "convoy": c, "done": done, "hostile": hostile,
           "queued": queued}
    board.stop()


def test_the_board_prints_its_address_with_a_token_and_listens_on_loopback(seeded):
    b = seeded["board"]
    assert set(b.shown) == {"url", "port", "pid"}
    assert boardkit.host_port(b.url) == ("127.0.0.1", b.port)
    assert len(b.token) >= 24 and b.url == f"http://127.0.0.1:{b.port}/?token={b.token}"
    assert status(seeded["repo"]) == ""   # the board wrote nothing into the work tree


@pytest.mark.parametrize("path", ["/", "/needs-you", "/api/v1/status", "/events",
                                  "/static/board.js"])
def test_without_the_token_every_request_is_refused(seeded, path):
    b = seeded["board"]
    code, _h, body = b.request("GET", path, cookie=False)
    assert code == 403 and b"token" in body
    code, _h, _b = b.request("GET", path + "?token=" + "x" * len(b.token), cookie=False)
    assert code == 403


def test_the_token_in_the_address_becomes_a_cookie_and_leaves_the_address(seeded):
    b = seeded["board"]
    code, headers, _b = b.request("GET", f"/needs-you?token={b.token}", cookie=False)
    # The CSRF token rides in the fragment, which the browser keeps and sends to no server.
    # The page moves under the board's root, the secret path its cookie is scoped to.
    assert code == 303 and headers["location"] == f"{b.root}/needs-you#brat-csrf={b.csrf}"
    assert re.fullmatch(r"/b-[0-9a-f]{32}", b.root) and b.token not in b.root
    cookie = headers["set-cookie"]
    assert cookie.startswith(f"brat_ui_{b.port}=") and b.token not in cookie
    assert f"Path={b.root};" in cookie + ";"
    assert "HttpOnly" in cookie and "SameSite=lax" in cookie.replace("Lax", "lax")


@pytest.mark.parametrize("host", ["evil.example:{port}", "attacker.test", "127.0.0.1:1"])
def test_a_host_header_other_than_the_served_one_is_refused(seeded, host):
    """DNS rebinding: a page on evil.example resolving to 127.0.0.1 sends its own Host."""
    b = seeded["board"]
    code, _h, _b = b.request("GET", "/api/v1/status", headers={"Host": host.format(port=b.port)})
    assert code == 421
    code, _h, _b = b.request("GET", "/api/v1/status",
                             headers={"Host": f"localhost:{b.port}"})
    assert code == 200


def test_a_cross_origin_or_tokenless_post_is_refused_and_writes_nothing(seeded):
    b, repo = seeded["board"], seeded["repo"]
    before = wal_tip(repo)
    path = f"/api/v1/tasks/{seeded['queued']}/block"
    for headers in ({"Origin": "http://evil.example", "X-CSRF-Token": b.csrf},   # other origin
                    {"X-CSRF-Token": b.csrf},                                  # no origin
                    {"Origin": b.base},                                        # no CSRF token
                    {"Origin": b.base, "X-CSRF-Token": "0" * 64}):             # a wrong one
        code, _h, out = b.request("POST", path, {"message": "no"}, headers)
        assert code == 403, (headers, out)
        assert b"access-control" not in json.dumps(_h).lower().encode()
    assert wal_tip(repo) == before
    # No CORS: a preflight gets no permission either.
    code, headers, _b = b.request("OPTIONS", path, headers={
        "Origin": "http://evil.example", "Access-Control-Request-Method": "POST"})
    assert not any(k.startswith("access-control-") for k in headers)


def test_a_title_holding_a_script_is_text_on_every_page(seeded):
    b = seeded["board"]
    for path in ("/", "/needs-you", f"/task/{seeded['hostile']}", "/sessions", "/queue"):
        code, headers, page = b.request("GET", path)
        assert code == 200, path
        assert b"<script>alert" not in page, path
        # No script runs but the one the page names with this render's nonce.
        nonce = page.split(f'<script src="{b.root}/static/board.js" nonce="'.encode(), 1)[1].split(b'"', 1)[0]
        assert f"script-src 'nonce-{nonce.decode()}';" in headers["content-security-policy"]
    _c, _h, page = b.request("GET", f"/task/{seeded['hostile']}")
    assert b"&lt;script&gt;alert(&#x27;pwned&#x27;)&lt;/script&gt;" in page


def _same(api, cli, drop=()):
    def clean(x):
        if isinstance(x, dict):
            return {k: clean(v) for k, v in x.items() if k not in drop}
        if isinstance(x, list):
            return [clean(v) for v in x]
        return x
    assert clean(api) == clean(cli)


def test_the_api_returns_what_the_cli_prints_with_json(seeded):
    b, repo = seeded["board"], seeded["repo"]
    done, c = seeded["done"], seeded["convoy"]
    sid = brat_json(repo, "session", "list", "--all")[0]["id"]
    pairs = [
        ("/api/v1/tasks", ["task", "list"], ()),
        (f"/api/v1/tasks?convoy={c}&status=blocked", ["task", "list", "--convoy", c, "--status",
                                                       "blocked"], ()),
        (f"/api/v1/tasks/{done[:8]}", ["task", "show", done], ()),
        ("/api/v1/convoys", ["convoy", "list"], ()),
        (f"/api/v1/convoys/{c}", ["convoy", "show", c], ()),
        ("/api/v1/sessions?all=1", ["session", "list", "--all"], ()),
        (f"/api/v1/sessions?task={done}", ["session", "list", "--task", done], ()),
        (f"/api/v1/sessions/{sid}", ["session", "show", sid], ()),
        ("/api/v1/status", ["status"], ("generated_at", "remaining", "expires_at")),
        ("/api/v1/refinery", ["refinery", "status"], ("waiting", "elapsed")),
        ("/api/v1/mayor", ["mayor", "status"], ()),
        ("/api/v1/mayor/log", ["mayor", "log"], ()),
    ]
    for path, argv, drop in pairs:
        _same(b.get_json(path), brat_json(repo, *argv), drop)
    # Errors carry the command's message and exit code.
    code, _h, out = b.request("GET", "/api/v1/tasks/ffffffff")
    proc = brat(repo, "task", "show", "ffffffff", check=False)
    err = json.loads(out)
    assert code == 404 and err["exit_code"] == proc.returncode == 3
    assert err["error"] in proc.err


def test_actions_are_the_commands_and_their_refusals(seeded):
    b, repo, queued = seeded["board"], seeded["repo"], seeded["queued"]
    # The state machine refuses the same moves, with the same words, and writes nothing.
    before = wal_tip(repo)
    code, out = b.post(f"/api/v1/tasks/{queued}/requeue")
    cli = brat(repo, "task", "update", queued, "--status", "queued", check=False)
    assert code == 409 and out["exit_code"] == cli.returncode == 5 and out["error"] in cli.err
    assert wal_tip(repo) == before
    code, out = b.post(f"/api/v1/tasks/{queued}/reply", {"message": "go on"})
    cli = brat(repo, "task", "reply", queued, "-m", "go on", check=False)
    assert code == 409 and out["error"] in cli.err
    assert wal_tip(repo) == before
    # A block said on the board is a block: recorded with its reason, shown by the CLI.
    code, out = b.post(f"/api/v1/tasks/{queued}/block", {"message": "wait for the release"})
    assert code == 200 and out["status"] == "blocked"
    shown = brat_json(repo, "task", "show", queued)
    assert shown["status"] == "blocked" and shown["reason"] == "wait for the release"
    # A reply with comments on diff lines: one comment, the task re-queued with it.
    code, out = b.post(f"/api/v1/tasks/{queued}/reply", {
        "message": "ok, go", "notes": [{"path": "CHANGES", "line": 3, "text": "say why"}]})
    assert code == 200 and out["status"] == "queued"
    assert out["comments"][-1]["body"] == "reply: ok, go\n\nNotes on the diff:\n- CHANGES:3: say why"
    code, out = b.post(f"/api/v1/tasks/{queued}/drop", {"message": "not needed"})
    assert code == 200 and brat_json(repo, "task", "show", queued)["status"] == "dropped"
    assert status(repo) == ""


def test_a_task_page_shows_its_diff_against_the_target(seeded):
    b = seeded["board"]
    d = b.get_json(f"/api/v1/tasks/{seeded['done']}/diff")
    assert d["branch"] == f"brat/{seeded['done']}" and d["target"] == "main"
    assert d["files"] and all(f["diff"].startswith("diff --git ") for f in d["files"])
    added = [ln for f in d["files"] for ln in f["diff"].splitlines() if ln.startswith("+")]
    assert added
    _c, _h, page = b.request("GET", f"/task/{seeded['done']}")
    assert b'class="diff"' in page
    # A diff line is named by its number in the new file, as a reviewer would cite it.
    from git_brat.brat.demo import project as demo_project
    fix = demo_project.FIXES[0]
    text = git(seeded["repo"], "show", f"brat/{seeded['done']}:{fix.path}")
    n = next(i for i, ln in enumerate(text.splitlines(), 1) if fix.new in ln)
    row = page[page.index(b"+    return " + fix.new.encode()) - 400:]
    assert f'data-path="{fix.path}" data-line="{n}"'.encode() in row[:400]


def test_a_session_log_is_served_from_any_offset(seeded):
    b, repo = seeded["board"], seeded["repo"]
    sid = brat_json(repo, "session", "list", "--task", seeded["done"])[0]["id"]
    whole = brat(repo, "session", "log", sid).out
    got = b.get_json(f"/api/v1/sessions/{sid}/log")
    assert got["text"] == whole and got["offset"] == len(whole.encode()) and not got["live"]
    tail = b.get_json(f"/api/v1/sessions/{sid}/log?from=10")
    assert tail["text"] == whole.encode()[10:].decode()


def test_a_write_by_the_cli_is_pushed_to_the_board_within_a_second(seeded):
    b, repo = seeded["board"], seeded["repo"]
    conn = http.client.HTTPConnection("127.0.0.1", b.port, timeout=10)
    try:
        conn.request("GET", b.root + "/events",
                     headers={"Host": f"127.0.0.1:{b.port}", "Cookie": b.cookie})
        resp = conn.getresponse()
        assert resp.status == 200 and resp.getheader("content-type").startswith("text/event-stream")
        assert resp.readline().startswith(b"retry:")
        time.sleep(0.5)   # the stream has seen the current tip
        brat(repo, "task", "comment", seeded["done"], "-m", "looks good")
        wrote = time.monotonic()
        line = b""
        while not line.startswith(b"event: change"):
            line = resp.readline()
        assert time.monotonic() - wrote < 1.5
    finally:
        conn.close()


def test_a_host_other_than_loopback_is_warned_about(tmp_path):
    repo = make_repo(tmp_path / "r")
    brat(repo, "init")
    proc = subprocess.Popen(["git", "brat", "ui", "--no-open", "--json", "--host", "127.0.0.2"],
                            cwd=repo, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    board = None
    try:
        shown = json.loads(proc.stdout.readline())
        board = boardkit.Board(proc, shown)
        assert shown["url"].startswith("http://127.0.0.2:")
        conn = http.client.HTTPConnection("127.0.0.2", board.port, timeout=10)
        conn.request("GET", "/api/v1/tasks", headers={"X-Brat-Token": board.token})
        assert conn.getresponse().status == 200
        conn.close()
    finally:
        if board is not None:
            board.stop()
        else:
            proc.kill()
            proc.wait(10)
    assert "warning: serving on 127.0.0.2" in board.stderr


def test_detach_then_ui_again_reprints_the_running_board_then_stop(tmp_path):
    repo = make_repo(tmp_path / "r")
    brat(repo, "init")
    (repo / "sub").mkdir()
    before = status(repo)
    shown = brat_json(repo / "sub", "ui", "--detach", "--no-open")
    try:
        assert set(shown) == {"url", "port", "pid"}
        # Asked again (from anywhere in the repository), it says where the running board is.
        assert brat_json(repo, "ui", "--detach", "--no-open") == shown
        assert brat_json(repo / "sub", "ui", "--no-open") == shown
        assert brat(repo, "ui", "--no-open").out.strip() == shown["url"]
        board = boardkit.Board(None, shown)
        assert board.get_json("/api/v1/tasks") == []
    finally:
        out = brat_json(repo, "ui", "stop")
    assert out == {"stopped": True, "pid": shown["pid"]}
    from git_brat.process import alive
    assert not alive(shown["pid"])
    proc = brat(repo, "ui", "stop", check=False)
    assert proc.returncode == 3 and "no board runs" in proc.err
    assert status(repo) == before


def test_other_commands_never_import_the_web_stack(brepo):
    """starlette and uvicorn are the board's alone: `git brat status` does not load them."""
    code = ("import sys\n"
            "from git_brat.brat.cli import cli\n"
            "try:\n    cli.main(['status', '--json'], prog_name='git-brat')\n"
            "except SystemExit:\n    pass\n"
            "import git_brat.brat.cli.ui, git_brat.brat.ui.data, git_brat.brat.ui.html\n"
            "web = sorted(m for m in sys.modules\n"
            "             if m.split('.')[0] in ('starlette', 'uvicorn', 'anyio'))\n"
            "print(json.dumps(web), file=sys.stderr)\n").replace("import sys", "import sys, json")
    proc = run([sys.executable, "-c", code], brepo, env={"PYTHONPATH": str(ROOT)})
    assert json.loads(proc.err.strip().splitlines()[-1]) == []


def test_in_a_bare_hub_the_board_shows_everything_pushed_and_changes_nothing(tmp_path):
    from sync_helpers import clone, seeded_hub
    from helpers import grite
    hub = seeded_hub(tmp_path)
    brat(hub, "init", "--hub")
    user = clone(str(hub), tmp_path / "user", init=False)
    brat(user, "init")
    c = convoy(user, "Pushed work")
    tid = task(user, c, SCRIPT)
    grite(user, "sync")
    board = boardkit.start(hub)
    try:
        assert [t["id"] for t in board.get_json("/api/v1/tasks")] == [tid]
        _c, _h, page = board.request("GET", "/")
        assert b"read-only" in page and b"&lt;script&gt;" in page and b"<script>alert" not in page
        before = git(hub, "for-each-ref", "refs/grite/")
        code, out = board.post(f"/api/v1/tasks/{tid}/block", {"message": "from the hub"})
        assert code == 409 and "read-only" in out["error"]
        # No action is offered: not on a task, not to create, start or push.
        for path in ("/", f"/task/{tid}"):
            _c, _h, page = board.request("GET", path)
            assert b"data-action=" not in page, path
        assert b"no action is open to this task now" in board.request("GET", f"/task/{tid}")[2]
        for action in ("tasks", "convoys", "witness/start", "refinery/pass", "sync/push"):
            code, out = board.post(f"/api/v1/{action}", {"title": "from the hub"})
            assert code == 409 and "read-only" in out["error"], action
        assert git(hub, "for-each-ref", "refs/grite/") == before
    finally:
        board.stop()


def test_what_is_not_yet_pushed_shows_with_a_push_that_publishes_it(tmp_path):
    from sync_helpers import clone, seeded_hub
    from helpers import grite
    hub = seeded_hub(tmp_path)
    mine = clone(str(hub), tmp_path / "mine", init=False)
    brat(mine, "init")
    c = convoy(mine, "Shared")
    grite(mine, "sync")
    board = boardkit.start(mine)
    try:
        def roles() -> bytes:
            return board.request("GET", "/")[2].split(b'id="roles"', 1)[1].split(b"</section>", 1)[0]
        assert b"everything is pushed to origin" in roles()
        # A reply made here stays here until pushed, and the board says so.
        code, _out = board.post("/api/v1/tasks", {"convoy": c, "title": "Made here"})
        assert code == 200
        assert b"1 change(s) not yet pushed to origin" in roles()
        assert f'data-action="{board.root}/api/v1/sync/push"'.encode() in roles()
        code, out = board.post("/api/v1/sync/push")
        assert code == 200 and out["ok"] and out["remotes"][0]["status"] == "pushed"
        assert b"everything is pushed to origin" in roles()
        assert git(hub, "for-each-ref", "refs/grite/replicas/") != ""
    finally:
        board.stop()


def test_the_board_filters_by_convoy_state_engine_and_label(seeded):
    b, done, hostile, queued = seeded["board"], seeded["done"], seeded["hostile"], seeded["queued"]

    def cards(query):
        _c, _h, page = b.request("GET", "/?" + query)
        return {t for t in (done, hostile, queued) if f'data-task="{t}"'.encode() in page}
    everything = cards("")   # (the actions test may have dropped `queued` already)
    assert {done, hostile} <= everything
    assert cards("state=needs-review") == {done}
    assert cards("engine=demo") == {done, hostile}          # the tasks a demo session ran
    assert cards("engine=claude") == set()
    assert cards(f"convoy={seeded['convoy'][:7]}") == everything
    assert cards("label=nothing-has-it") == set()


def test_a_change_synced_from_another_clone_is_pushed_to_the_board(tmp_path):
    from sync_helpers import clone, seeded_hub
    from helpers import grite
    hub = seeded_hub(tmp_path)
    mine = clone(str(hub), tmp_path / "mine", init=False)
    brat(mine, "init")
    theirs = clone(str(hub), tmp_path / "theirs", init=False)
    brat(theirs, "init")
    c = convoy(mine, "Shared")
    grite(mine, "sync")
    grite(theirs, "sync")
    board = boardkit.start(mine)
    conn = http.client.HTTPConnection("127.0.0.1", board.port, timeout=20)
    try:
        conn.request("GET", board.root + "/events", headers={"Host": f"127.0.0.1:{board.port}",
                                                             "Cookie": board.cookie})
        resp = conn.getresponse()
        assert resp.readline().startswith(b"retry:")
        time.sleep(0.5)
        tid = task(theirs, c, "Made on another machine")
        grite(theirs, "sync")
        assert tid not in {t["id"] for t in board.get_json("/api/v1/tasks")}
        grite(mine, "sync")
        line = b""
        while not line.startswith(b"event: change"):
            line = resp.readline()
        assert tid in {t["id"] for t in board.get_json("/api/v1/tasks")}
    finally:
        conn.close()
        board.stop()


def test_stopping_a_session_from_the_board_is_session_stop(tmp_path):
    """The witness stops the agent, keeps its work and blocks the task, as for the command."""
    from git_brat.brat.demo import project as demo_project
    repo = _demo_repo(tmp_path / "repo")
    fix = demo_project.FIXES[0]
    tid = task(repo, convoy(repo, "Stop me"), fix.title, "-b", fix.body)
    witness = subprocess.Popen(["git", "brat", "witness", "run", "--once", "--engine", "demo"],
                               cwd=repo, env={**os.environ, "BRAT_DEMO_DELAY": "60"},
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    board = None
    try:
        deadline = time.monotonic() + 60
        live = []
        while time.monotonic() < deadline:
            live = [s for s in brat_json(repo, "session", "list") if s["status"] == "running"]
            if live and "editing" in brat(repo, "session", "log", live[0]["id"]).out:
                break
            time.sleep(0.3)
        assert live, "the session did not start"
        board = boardkit.start(repo)
        code, out = board.post(f"/api/v1/tasks/{tid}/stop")
        assert code == 200 and out["session"] == live[0]["id"]
        assert witness.wait(60) == 0
        shown = brat_json(repo, "session", "show", live[0]["id"])
        assert shown["status"] not in ("starting", "running")
        assert brat_json(repo, "task", "show", tid)["status"] == "blocked"
        code, out = board.post(f"/api/v1/tasks/{tid}/stop")
        assert code == 409 and "no live session" in out["error"]
    finally:
        if witness.poll() is None:
            witness.kill()
            witness.wait(30)
        if board is not None:
            board.stop()


def test_bound_to_every_address_the_board_answers_to_ip_addresses_only():
    """0.0.0.0: the Host a browser sends is an address (a name could be rebound to us)."""
    from git_brat.brat.ui.server import Guard
    anywhere, loopback = Guard("t" * 32, "0.0.0.0", 8123), Guard("t" * 32, "127.0.0.1", 8123)
    assert anywhere.host_ok("192.168.1.5:8123") and anywhere.host_ok("[fe80::1]:8123")
    assert not anywhere.host_ok("evil.example:8123") and not anywhere.host_ok("192.168.1.5:80")
    assert loopback.host_ok("localhost:8123") and loopback.host_ok("127.0.0.1:8123")
    assert not loopback.host_ok("192.168.1.5:8123") and not loopback.host_ok("127.0.0.1")
