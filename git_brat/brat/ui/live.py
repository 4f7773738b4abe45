"""What keeps the board's pages live: one poll of the log for every browser (Watcher), and the
count of what needs you, worked out once per log tip beside the pages (NeedsCount)."""

from __future__ import annotations

import asyncio
import threading
from typing import Callable

from starlette.concurrency import run_in_threadpool

from git_brat.brat.ui import data

POLL = 0.2            # seconds between looks at the log tips (one look serves every browser)


class NeedsCount:
    """The count on "Needs you" and in every page's title, worked out once per log tip, off
    the path of the page: a page drawn before it is known shows the last count, and the count
    landing is a change the browsers redraw for (at 10k tasks it costs as much as the page)."""

    def __init__(self, repo: data.Repo, count: Callable[[], list]):
        self.repo, self._count = repo, count
        self.lock = threading.Lock()
        self.tip, self.value, self.landed = "", None, 0
        self.items: list = []    # what is counted (control.Need), the latest first
        self.counting: set[str] = set()

    def now(self) -> tuple[int | None, list]:
        """The count and what it counts, as last worked out (a new count started if the log
        moved since)."""
        tip = self.repo.tip()
        with self.lock:
            shown = (self.value, self.items)
            if tip == self.tip:
                return shown
            start = tip not in self.counting
            self.counting.add(tip)
        if start:
            threading.Thread(target=self.count, args=(tip,), name="brat-needs-count",
                             daemon=True).start()
        return shown

    def count(self, tip: str) -> None:
        try:
            items = self._count()
        except Exception:   # noqa: BLE001 - the Needs you page says what is wrong
            items = None
        with self.lock:
            self.counting.discard(tip)
            if items is not None:
                self.tip, self.value, self.items = tip, len(items), items
                self.landed += 1

    def marker(self) -> str:
        return str(self.landed)


class Watcher:
    """One poll of the log tips for every connected browser; each waits for the next change."""

    def __init__(self, repo: data.Repo):
        self.repo, self.tip, self.version = repo, "", 0
        self.also: Callable[[], str] = lambda: ""   # more that a redraw shows (the count)
        self.cond: asyncio.Condition | None = None
        self.task: asyncio.Task | None = None
        self.listeners = 0

    async def _poll(self):
        while True:
            try:
                tip = await run_in_threadpool(lambda: f"{self.repo.tip()}/{self.also()}")
            except Exception:   # noqa: BLE001 - a ref mid-update: look again next time
                tip = self.tip
            if not self.tip:   # the first look: what the pages being served already show
                self.tip = tip
            elif tip != self.tip:
                self.tip = tip
                self.version += 1
                async with self.cond:
                    self.cond.notify_all()
            await asyncio.sleep(POLL)

    def start(self):
        if self.cond is None:
            self.cond = asyncio.Condition()
        if self.task is None or self.task.done():
            self.task = asyncio.get_running_loop().create_task(self._poll())

    async def wait(self, seen: int, timeout: float) -> int:
        self.start()
        if self.version != seen:
            return self.version
        async with self.cond:
            try:
                await asyncio.wait_for(self.cond.wait_for(lambda: self.version != seen), timeout)
            except asyncio.TimeoutError:
                pass
        return self.version


__all__ = ["NeedsCount", "Watcher", "POLL"]
