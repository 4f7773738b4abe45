"""Figures for the web board (issue 28): `git brat ui` at 1k and 10k tasks, live, many browsers.

1. Time to a rendered board: the server's HTML for `/` (HTTP, median of 5), and Chromium
   loading it until every column is drawn (median of 3), at 1k and 10k tasks on the board.
2. Latency from a CLI write to the browser showing it: `git brat task create` returns, then
   the new card appears on an open board without a reload (median and max of 10).
3. The server's memory (VmRSS) serving nobody, then with 10 browsers connected (each page
   holding its live-update stream).
4. The CLI's import time with the board in the package: `git brat --version` and
   `git brat status` against the import floor (the web stack is imported by `ui` only).

The tasks are written with `git fast-import` as recent, unsettled work in convoys of ten
(queued, running, needs-review, blocked, failed spread over them), so all of them are on the board.

Usage: python bench/bench_board.py [--quick | --after-write]   (--quick: 1k tasks only, fewer
runs; --after-write: only the first render after a CLI write at 10k tasks, with the floor)
"""

from __future__ import annotations

import http.client
import json
import os
import select
import shutil
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

from benchlib import ROOT, env, fast_import, fast_import_commit, floor, new_repo, report, time_cmd

BRAT = str(ROOT / "bin" / "git-brat")
STATES = ["queued", "queued", "queued", "running", "needs-review", "needs-review", "blocked",
          "failed", "queued", "queued"]


def brat(repo: Path, *args: str) -> str:
    return subprocess.run([BRAT, *args], cwd=repo, env=env(), check=True,
                          stdout=subprocess.PIPE).stdout.decode().strip()


def board_repo(tasks: int) -> Path:
    from git_brat.grite.model import events as ev
    from git_brat.grite.repo import Grite
    repo = new_repo(f"board{tasks}")
    brat(repo, "init")
    g = Grite.open(str(repo))
    actor, replica = g.identity.actor.id, g.identity.replica.id
    parent = g.store.refs.read(b"refs/grite/wal").decode()
    now = int(time.time() * 1000) - tasks * 10
    lines, lamport = [], 10_000
    for i in range(0, tasks, 10):
        cid = ev.new_entity_id()
        drafts = [(cid, ev.Create("convoy", {"title": f"Convoy {i // 10}", "body": ""}))]
        for k in range(10):
            fields = {"title": f"Task {i + k}: fix the thing", "body": "fix it", "convoy": cid,
                      "priority": k % 5, "status": STATES[k]}
            drafts.append((ev.new_entity_id(), ev.Create("task", fields)))
        events = []
        for entity, op in drafts:
            lamport += 1
            events.append(ev.make_event(entity, actor, lamport, now + lamport, op))
        blob = ev.encode_batch(ev.Batch(ev.FORMAT_VERSION, replica, lamport, events))
        lines.append(fast_import_commit("refs/grite/wal", blob, f"brat: bench {i}",
                                        now // 1000, parent if i == 0 else None))
    fast_import(repo, lines)
    subprocess.run(["git", "grite", "rebuild"], cwd=repo, env=env(), check=True,
                   stdout=subprocess.DEVNULL)
    return repo


class Board:
    def __init__(self, repo: Path):
        self.proc = subprocess.Popen([BRAT, "ui", "--no-open", "--json"], cwd=repo, env=env(),
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        ready, _, _ = select.select([self.proc.stdout], [], [], 60)
        if not ready:
            self.proc.kill()
            raise RuntimeError("the board did not start")
        shown = json.loads(self.proc.stdout.readline())
        self.url, self.port, self.pid = shown["url"], shown["port"], shown["pid"]
        self.token = self.url.split("token=")[1]

    def get(self, path: str) -> bytes:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)
        conn.request("GET", path, headers={"Host": f"127.0.0.1:{self.port}", "X-Brat-Token": self.token})
        body = conn.getresponse().read()
        conn.close()
        return body

    def rss_mb(self) -> float:
        with open(f"/proc/{self.pid}/status") as f:
            kb = next(int(ln.split()[1]) for ln in f if ln.startswith("VmRSS:"))
        return kb / 1024

    def stop(self) -> None:
        os.kill(self.pid, signal.SIGTERM)
        self.proc.wait(30)


def chromium():
    from playwright.sync_api import sync_playwright
    path = shutil.which("chromium")
    if path is None:
        return None, None
    p = sync_playwright().start()
    args = ["--no-sandbox"] if os.geteuid() == 0 else []
    return p, p.chromium.launch(executable_path=path, args=args)


def rendered(browser, board: Board, runs: int) -> float:
    times = []
    for i in range(runs):
        ctx = browser.new_context()
        page = ctx.new_page()
        t0 = time.perf_counter()
        page.goto(board.url.replace("/?", f"/?bench=c{i}&"), wait_until="load")   # fresh render
        page.wait_for_selector(".column[data-state=failed]")
        times.append(time.perf_counter() - t0)
        ctx.close()
    return statistics.median(times)


def after_write(tasks: int, runs: int) -> None:
    """The first render after a CLI write at this many tasks, against the import floor measured
    in the same run (the machine is shared: the ratio is what compares across runs)."""
    repo = board_repo(tasks)
    board = Board(repo)
    try:
        board.get("/")
        base = floor(runs)
        report("  import floor (dulwich, msgspec, click)", base)
        same = statistics.median([_timed(lambda i=i: board.get(f"/?same={i}")) for i in range(runs)])
        report(f"  GET / at {tasks} tasks, a fresh render at the same tip", same,
               note=f"{same / base:.2f}x floor")
        cid = brat(repo, "convoy", "create", "Moved")
        after = []
        for i in range(runs):
            brat(repo, "task", "create", "--convoy", cid, f"Moved {i}")
            after.append(_timed(lambda i=i: board.get(f"/?after={i}")))
        med = statistics.median(after)
        report(f"  GET / at {tasks} tasks, after a CLI write (median of {runs})", med,
               note=f"{med / base:.2f}x floor; max {max(after) * 1000:.0f} ms")
    finally:
        board.stop()


def main() -> None:
    quick = "--quick" in sys.argv
    if "--after-write" in sys.argv:   # the one figure, at 10k tasks: before/after comparisons
        return after_write(10000, 7)
    sizes = [1000] if quick else [1000, 10000]
    p, browser = chromium()
    print("Time to a rendered board")
    kept = None    # the 1k board: the latency and memory figures are taken on it
    for n in sizes:
        repo = board_repo(n)
        board = Board(repo)
        try:
            report(f"  GET / at {n} tasks, the first request (every task read)",
                   _timed(lambda: board.get("/")))
            # A query the page ignores makes each request a fresh render at the same log tip:
            # what a filter or a search costs (the tasks read once serve them all).
            html = statistics.median(
                [_timed(lambda i=i: board.get(f"/?bench={i}")) for i in range(3 if quick else 5)])
            report(f"  GET / at {n} tasks, a fresh render at the same tip "
                   f"({len(board.get('/')) // 1024} KiB)", html)
            report(f"  GET /?q=... at {n} tasks (a search over titles, ids, bodies)",
                   statistics.median([_timed(lambda i=i: board.get(f"/?q=thing+{i}"))
                                      for i in range(3)]))
            cid = brat(repo, "convoy", "create", "Moved")
            after = []
            for i in range(3):
                brat(repo, "task", "create", "--convoy", cid, f"Moved {i}")
                after.append(_timed(lambda i=i: board.get(f"/?after={i}")))
            report(f"  GET / at {n} tasks, after a CLI write (the log moved: every task read)",
                   statistics.median(after))
            if browser is not None:
                report(f"  Chromium: load until every column is drawn, {n} tasks",
                       rendered(browser, board, 2 if quick else 3))
                latency(browser, repo, board, 5 if quick else 10, f"{n} tasks")
        finally:
            if kept is None:
                kept = (repo, board)
            else:
                board.stop()
    repo, board = kept
    try:
        if browser is not None:
            print("Server memory (1k tasks)")
            cid = brat(repo, "convoy", "create", "Ten")
            time.sleep(1)
            report("  VmRSS, no browser connected", board.rss_mb(), " MiB")
            ctxs = []
            for _ in range(10):
                c = browser.new_context()
                pg = c.new_page()
                pg.goto(board.url)
                pg.locator("#live.on").wait_for()
                ctxs.append(c)
            brat(repo, "task", "create", "--convoy", cid, "Seen by ten")   # each redraws
            time.sleep(3)
            report("  VmRSS, 10 browsers connected (after a change)", board.rss_mb(), " MiB")
            for c in ctxs:
                c.close()
    finally:
        board.stop()
        if browser is not None:
            browser.close()
            p.stop()
    print("CLI import time (the web stack is the board's alone)")
    runs = 5 if quick else 15
    report("  import floor (dulwich, msgspec, click)", floor(runs))
    report("  git brat --version", time_cmd([BRAT, "--version"], ROOT, runs))
    report("  git brat status (1k tasks)", time_cmd([BRAT, "status"], repo, runs))


def latency(browser, repo: Path, board: Board, runs: int, what: str) -> None:
    """A `git brat task create` returns, then its card shows on an open board, no reload."""
    cid = brat(repo, "convoy", "create", "Live")
    ctx = browser.new_context()
    page = ctx.new_page()
    page.goto(board.url.replace("/?", f"/?convoy={cid}&"))   # the new cards' convoy
    page.locator("#live.on").wait_for()
    lat = []
    for i in range(runs):
        brat(repo, "task", "create", "--convoy", cid, f"Live {i}")
        t0 = time.perf_counter()
        page.locator(".card", has_text=f"Live {i}").wait_for(timeout=30000)
        lat.append(time.perf_counter() - t0)
    report(f"  CLI returns -> card shown, {what} (median)", statistics.median(lat))
    report(f"  CLI returns -> card shown, {what} (max)", max(lat))
    ctx.close()


def _timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


if __name__ == "__main__":
    main()
