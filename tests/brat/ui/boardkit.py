"""Helpers for the board's tests: start `git brat ui` as a process, talk HTTP to it, stop it."""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import select
import signal
import subprocess
import time
from urllib.parse import urlsplit


class Board:
    """A running `git brat ui`: its address, token, and the processes to stop."""

    def __init__(self, proc: subprocess.Popen, shown: dict):
        self.proc, self.shown = proc, shown
        self.url, self.port, self.pid = shown["url"], shown["port"], shown["pid"]
        self.base = self.url.split("/?", 1)[0]
        self.token = self.url.split("token=", 1)[1]
        self._cookie = self._csrf = self._root = ""
        self.stderr = ""

    def visit(self) -> tuple[str, str, str]:
        """The token's visit, as a browser makes it: (the cookie it sets, the CSRF token the
        redirect's fragment carries, the board's root: the path its pages and cookie live
        under)."""
        code, headers, _b = self.request("GET", f"/?token={self.token}", cookie=False)
        assert code == 303, code
        cookie = headers["set-cookie"].split(";", 1)[0]
        where, _, csrf = headers["location"].partition("#brat-csrf=")
        root = where.rstrip("/")
        assert f"Path={root}" in headers["set-cookie"], headers["set-cookie"]
        return cookie, csrf, root

    def _visited(self) -> None:
        if not self._cookie:
            self._cookie, self._csrf, self._root = self.visit()

    @property
    def cookie(self) -> str:
        self._visited()
        return self._cookie

    @property
    def root(self) -> str:
        self._visited()
        return self._root

    def at(self, path: str) -> str:
        """The address of a board path as the browser knows it (under the board's root)."""
        return self.base + self.root + path

    def request(self, method: str, path: str, body=None, headers: dict | None = None,
                cookie: bool = True, timeout: float = 60) -> tuple[int, dict, bytes]:
        """One HTTP request; Host is the served one unless headers say otherwise."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        hdrs = {"Host": f"127.0.0.1:{self.port}"}
        if cookie:   # as a browser sends it: only under the root the cookie is set for
            hdrs["Cookie"] = self.cookie
            path = self.root + path
        if body is not None and not isinstance(body, (bytes, str)):
            body = json.dumps(body)
            hdrs["Content-Type"] = "application/json"
        hdrs.update(headers or {})
        try:
            conn.request(method, path, body=body, headers=hdrs)
            resp = conn.getresponse()
            return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
        finally:
            conn.close()

    def get_json(self, path: str):
        code, _h, body = self.request("GET", path)
        assert code == 200, (path, code, body)
        return json.loads(body)

    @property
    def csrf(self) -> str:
        self._visited()
        return self._csrf

    def post(self, path: str, body: dict | None = None, **headers) -> tuple[int, dict]:
        hdrs = {"Origin": self.base, "X-CSRF-Token": self.csrf, **headers}
        code, _h, out = self.request("POST", path, body or {}, hdrs)
        return code, json.loads(out or b"{}")

    def stop(self) -> None:
        """Stop the board by its pid, then reap the `git brat` that started it."""
        try:
            os.kill(self.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        if self.proc is None:
            return
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            os.kill(self.pid, signal.SIGKILL)
            self.proc.kill()
            self.proc.wait(10)
        self.stderr = self.proc.stderr.read().decode(errors="replace") if self.proc.stderr else ""
        for f in (self.proc.stdout, self.proc.stderr):
            if f:
                f.close()


def start(repo, *args: str, timeout: float = 30) -> Board:
    """`git brat ui --no-open --json ARGS` in repo, once it has printed its address."""
    proc = subprocess.Popen(["git", "brat", "ui", "--no-open", "--json", *args], cwd=str(repo),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL)
    deadline = time.monotonic() + timeout
    line = b""
    while time.monotonic() < deadline and not line.endswith(b"\n"):
        ready, _, _ = select.select([proc.stdout], [], [], 0.2)
        if ready:
            chunk = os.read(proc.stdout.fileno(), 4096)
            if not chunk:
                break
            line += chunk
    if not line.endswith(b"\n"):
        proc.kill()
        err = proc.stderr.read().decode(errors="replace")
        proc.wait(10)
        raise AssertionError(f"git brat ui did not start: {err}")
    return Board(proc, json.loads(line))


def thousand_tasks(repo, count: int = 1000, per_convoy: int = 10) -> str:
    """count tasks in convoys of per_convoy, written as one batch by this clone's own writer,
    all waiting for one blocked task (so no witness picks them): the id of that task."""
    from git_brat.brat import tasks
    from git_brat.grite.log.wal import Draft
    from git_brat.grite.model import events as ev
    from git_brat.grite.repo import Grite
    g = Grite.open(str(repo))
    drafts, gate = [], ev.new_entity_id()
    first = ev.new_entity_id()
    drafts.append(Draft(first, ev.Create("convoy", {"title": "Filler 0", "body": ""})))
    drafts += tasks.task_drafts(gate, first, "Filler gate: everything waits for it", "", [], 2, [])
    cid = first
    for i in range(count - 1):
        if i and i % per_convoy == 0:
            cid = ev.new_entity_id()
            drafts.append(Draft(cid, ev.Create("convoy", {"title": f"Filler {i // per_convoy}",
                                                          "body": ""})))
        drafts += tasks.task_drafts(ev.new_entity_id(), cid, f"Filler task {i:04d}: tidy part {i}",
                                    f"part {i} of the filler work", [gate], i % 5, [])
    g.append(drafts, f"tests: {count} filler tasks")
    subprocess.run(["git", "brat", "task", "block", gate, "-m", "filler: waits for nothing"],
                   cwd=str(repo), check=True, stdout=subprocess.DEVNULL)
    return gate


def host_port(url: str) -> tuple[str, int]:
    parts = urlsplit(url)
    return parts.hostname, parts.port


__all__ = ["Board", "start", "host_port", "thousand_tasks"]


@contextlib.contextmanager
def board_of_one_convoy(path, title: str, *task_titles: str):
    """A fresh repository holding one convoy of these tasks, its board running:
    (repo, board, the tasks' ids); the board is stopped after."""
    from bratkit import convoy, task
    from helpers import brat, make_repo
    repo = make_repo(path)
    brat(repo, "init")
    c = convoy(repo, title)
    ids = [task(repo, c, t) for t in task_titles]
    board = start(repo)
    try:
        yield repo, board, ids
    finally:
        board.stop()


@contextlib.contextmanager
def browser_page(browser, timeout_ms: int = 20000, init_script: str = "", **context):
    """A page of a fresh browser context (closed after), waiting up to timeout_ms a step."""
    ctx = browser.new_context(**context)
    try:
        if init_script:
            ctx.add_init_script(init_script)
        page = ctx.new_page()
        page.set_default_timeout(timeout_ms)
        yield page
    finally:
        ctx.close()


def go(page, board: Board, path: str = "/") -> None:
    """Open a page of the board (signed in by its address) and wait for its live link."""
    page.goto(board.url.replace("/?", f"{path}?"))
    page.locator("#live.on").wait_for()
