"""The refinery's check runs: a batch's tip, and the target alone when a batch fails (a red
target), each in the refinery's work tree with its output in a local log (0600)."""

from __future__ import annotations

import os
import time

from git_brat import process, redact
from git_brat.brat import board as model
from git_brat.brat import layout
from git_brat.brat.refinery import queue as rq
from git_brat.brat.refinery import red, report
from git_brat.brat.refinery.check import check_plan, run_check
from git_brat.brat.refinery.queue import Move, Request
from git_brat.files import open_private, private_dir
from git_brat.git import worktree
from git_brat.grite.repo import Grite

TAIL_LINES, TAIL_CHARS = 40, 4000   # of a failed check's output, recorded in the log
EXCERPT_WINDOW = 8                   # times TAIL_CHARS of the output end redacted for it


def excerpt(output: bytes) -> str:
    """What the log records of a failed check's output (it syncs to every clone): its last
    TAIL_LINES lines, at most TAIL_CHARS, credentials redacted. Redacted before the cut (a cut
    can split a key so that its shape no longer shows), over a window some times the excerpt
    (not all of a check's output, which may be megabytes). The whole output stays in the
    merge's local log, 0600."""
    text = redact.text(output[-TAIL_CHARS * EXCERPT_WINDOW:].decode("utf-8", "replace"))
    return "\n".join(text.splitlines()[-TAIL_LINES:])[-TAIL_CHARS:]


def worktree_path(g: Grite) -> str:
    return layout.refinery_worktree(g.store)


def merge_log(g: Grite, mid: str) -> str:
    return layout.merge_log(g.store, mid)


class Checks:
    """Mixin of Refinery: needs self.g, self.cfg, self.rc, self.store, self.target, self.report,
    self.write, self.reset, self.base_tip, self.check_pid_path, self._check, self.red_at."""

    def check(self, tip: str, reqs: list[Request]) -> tuple[bool, str]:
        """Run refinery.check in the worktree at tip: (passed, the output's tail)."""
        if not self.rc.check.strip():
            return True, ""
        logs = [merge_log(self.g, r.merge) for r in reqs]
        self.write([Move(r.task, None, r.merge, merge_fields={
            "status": "checking", "check_started_at": process.now_ms(), "checked_commit": tip})
            for r in reqs], "check")
        code, output, run = self._checked(tip, logs[0], ", ".join(r.task[:7] for r in reqs))
        for other in logs[1:]:
            with open_private(other) as f:
                f.write(run)
        return self._verdict(tip, code, output)

    def _checked(self, tip: str, log: str, what: str) -> tuple[int | str, bytes, bytes]:
        """The check run at tip, its output appended to log (0600): (exit code or "timeout",
        its output, the whole run as logged)."""
        if worktree.head(worktree_path(self.g)) != tip:
            worktree.reset(worktree_path(self.g), tip)
        self.report.check_runs += 1
        private_dir(os.path.dirname(log))   # check output may hold secrets: 0600 in 0700
        t0 = process.now_ms()
        header = (f"== check `{self.rc.check}` on {tip[:12]} for {what} at "
                  f"{time.strftime('%H:%M:%S')} ==\n").encode()
        before = self._branches_and_tags()
        with open_private(log) as f:
            f.write(header)
            f.flush()
            start_at = f.tell()
            code = self._run_check(f)
        self._drop_check_refs(before, tip)
        with open(log, "rb") as f:
            f.seek(start_at)
            output = f.read()
        footer = f"== exit {code} after {(process.now_ms() - t0) / 1000:.1f}s ==\n".encode()
        with open_private(log) as f:
            f.write(footer)
        return code, output, header + output + footer

    def _verdict(self, tip: str, code: int | str, output: bytes) -> tuple[bool, str]:
        if code == 0:
            return True, ""
        tail, exit_code = excerpt(output), None if code == "timeout" else code
        tests = report.names(output)
        head = report.headline(self.rc.check, exit_code, tip, tests, tail)
        return False, report.Failure.of(f"{head}\n{tail}", exit_code, tests, tip)

    # -- the target on its own -------------------------------------------------------------

    def target_red(self, base: str) -> str | None:
        """The target's own failure at base (checked alone, once per commit and check), or
        None when it passes: then the requests' work is what fails."""
        check = self.rc.check
        known = red.verdict(self.store, base, check)
        if known is None:
            code, output, _run = self._checked(base, red.log_path(self.store, base),
                                               f"{self.target} alone")
            passed, failure = self._verdict(base, code, output)
            red.remember(self.store, base, check, passed)
            if passed:
                return None
            failure = redact.text(str(failure))
            self.write([], "red", extra=red.found_drafts(
                model.board(self.g, refresh=True), self.target, base, check, {
                    "result": failure.partition("\n")[0], "output_tail":
                    failure.partition("\n")[2], "failing_tests": report.names(output),
                    "exit_code": None if code == "timeout" else code}))
        elif known:
            return None
        found = red.red_target(model.board(self.g, refresh=True), self.target)
        return found.result if found is not None and found.commit == base else \
            f"{self.target} fails `{check}` on its own at {base[:12]}"

    def target_passed(self, tip: str) -> None:
        """The target passes its check at tip (it did alone, or work landed on it through the
        check): a red record of it is closed."""
        if not self.rc.check.strip():
            return
        red.remember(self.store, tip, self.rc.check, True)
        drafts = red.passed_drafts(model.board(self.g, refresh=True), self.target, tip)
        if drafts:
            self.write([], "green", extra=drafts)

    def look_at_red(self) -> None:
        """At a pass's start, a target named red is looked at again when it moved or the
        check changed: passing, its record closes and the held requests are due again."""
        self.red_at = None
        found = red.red_target(model.board(self.g, refresh=True), self.target)
        local = self.store.objects.rev(f"refs/heads/{self.target}")
        if found is None or local is None or not self.rc.check.strip():
            return
        base = self.base_tip(local)
        # Only this clone's own verdict holds work back: anyone who pushes writes the log, and
        # a record saying "main is red" is checked here before any request waits for it.
        if found.commit == base and found.check == self.rc.check and \
                red.verdict(self.store, base, self.rc.check) is False:
            self.red_at = base
            return
        self.reset(base)
        if self.target_red(base) is None:
            self.target_passed(base)
        else:
            self.red_at = base

    def _branches_and_tags(self) -> dict[bytes, bytes]:
        out = self.store.refs.under(b"refs/heads/")
        out.update(self.store.refs.under(b"refs/tags/"))
        return out

    def _drop_check_refs(self, before: dict[bytes, bytes], tip: str) -> None:
        """The check runs in the refinery's work tree, which shares the user's refs: a branch
        or tag it made there (one holding the commit it checked, which exists nowhere else
        yet) is removed, and a branch it checked out is let go (the tree is detached again)."""
        path = worktree_path(self.g)
        here = next((wt for wt in worktree.listing(self.store.common_dir)
                     if os.path.realpath(wt.get("worktree", "")) == os.path.realpath(path)), {})
        held = here.get("branch")
        if held:
            worktree.reset(path, tip)
        target = self.store.objects.rev(f"refs/heads/{self.target}")
        checked_is_new = target is None or not self.store.objects.is_ancestor(tip, target)
        for name, sha in self._branches_and_tags().items():
            if name in before or name.startswith(b"refs/heads/" + rq.BRANCH_PREFIX.encode()):
                continue   # (a task branch made meanwhile is a witness's)
            made_here = held is not None and name == held.encode()
            if made_here or (checked_is_new and self.store.objects.is_ancestor(tip, sha.decode())):
                self.store.refs.delete_if(name, sha)

    def _run_check(self, log) -> int | str:
        def started(proc) -> None:
            self._check = proc
        try:
            tree = worktree_path(self.g)
            return run_check(self.rc.check, tree, self.rc.check_timeout, log,
                             self.check_pid_path(), started, self.renew,
                             check_plan(self.store, self.cfg, tree))
        finally:
            self._check = None


__all__ = ["Checks", "excerpt", "merge_log", "worktree_path", "TAIL_LINES", "TAIL_CHARS"]
