"""The refinery: lands merge requests on the target branch through a check, in batches, by CAS."""

from __future__ import annotations

import os
import subprocess
import time

import msgspec

from git_brat import process
from git_brat.brat import board as model
from git_brat.brat import layout
from git_brat.brat.refinery import plan
from git_brat.brat.refinery import queue as rq
from git_brat.brat.config import Config
from git_brat.brat.tasks import Updated
from git_brat.brat.board import Board
from git_brat.brat.refinery.check import kill
from git_brat.brat.refinery.checking import Checks, merge_log, worktree_path
from git_brat.brat.refinery.outcomes import Outcome, Outcomes
from git_brat.brat.refinery.queue import Move, Request
from git_brat.grite.model import events as ev
from git_brat.git import merge, worktree
from git_brat.git.objects import safe_subject
from git_brat.git.run import environment
from git_brat.grite import locks
from git_brat.errors import Conflict, GriteError
from git_brat.grite.repo import Grite

MAX_REDO = 5                 # target moved under us this many times in one pass: try later
LEASE_TTL = 120.0
# Who commits a merge when git has no identity of its own (a hub run by a daemon).
REFINERY_IDENT = ("git-brat refinery", "refinery@git-brat.invalid")


SUBJECT_MAX = 100             # characters of a task's title in a squash or merge subject


def subject_title(title: str) -> str:
    """A task's title as a commit subject: its first line, every control or hidden character
    shown as an escape (a title is anyone's text; `git log` prints subjects raw), capped."""
    line = safe_subject((title or "").strip().splitlines()[0] if (title or "").strip() else "")
    return line if len(line) <= SUBJECT_MAX else line[:SUBJECT_MAX - 1].rstrip() + "\u2026"


class Stopped(Exception):
    """SIGTERM (refinery stop) while a pass was under way."""


class TargetRed(Exception):
    """The target fails the check on its own: the batch waits, none of its requests blamed."""


class PassReport(msgspec.Struct):
    target: str
    outcomes: list[Outcome] = []
    check_runs: int = 0
    batches: int = 0
    redone: int = 0          # merges redone because the target moved meanwhile
    note: str = ""


class Refinery(Outcomes, Checks):
    """One pass at a time over the queue, under the `refinery:<repo>` lease."""

    def __init__(self, g: Grite, cfg: Config):
        self.g, self.cfg, self.rc = g, cfg, cfg.refinery
        self.store = g.store
        self.target = self.rc.target_branch
        self.resource = rq.lease_name(self.store, self.rc.remote)
        self.holder = f"refinery@{process.hostname()}:{os.getpid()}"
        self.settings = locks.settings(self.store, ttl=LEASE_TTL)
        self.report = PassReport(self.target)
        self._renewed = 0.0
        self._check: subprocess.Popen | None = None
        self.wait_pids: list[int] = []   # git commands to let finish before touching a checkout
        self.requeued: set[str] = set()  # merges left out because their branch moved
        self.red_at: str | None = None   # the target commit found red (its requests wait)
        self.round_base: str | None = None   # the target commit this round stacks onto

    # -- the lease -------------------------------------------------------------------

    def acquire(self) -> None:
        """Take the lease; a holder on this host whose process is gone (SIGKILL) is taken over."""
        h = locks.holder_for(self.g, self.holder)
        try:
            locks.acquire(self.g, self.resource, self.settings, h)
        except locks.LeaseHeld as exc:
            dead = exc.lease.holder
            if dead.host != process.hostname() or not dead.pid or process.alive(dead.pid):
                raise
            locks.acquire(self.g, self.resource, self.settings, h, force=True)
            self.kill_orphaned_check()
        self._renewed = time.monotonic()

    def check_pid_path(self) -> str:
        return layout.refinery_check(self.g.store)

    def kill_orphaned_check(self) -> None:
        """The check a killed refinery left running (its own process group) is stopped."""
        check = process.load_pid_file(self.check_pid_path())
        if check is not None:   # (its group, if its leader is that process or gone: never a
            process.stop_recorded_group(check.proc, grace=0)   # reused pid's)

    def renew(self, force: bool = False) -> None:
        if force or time.monotonic() - self._renewed > LEASE_TTL / 4:
            locks.renew(self.g, self.resource, self.settings, locks.holder_for(self.g, self.holder))
            self._renewed = time.monotonic()

    def release(self) -> None:
        try:
            locks.release(self.g, self.resource, self.settings, locks.holder_for(self.g, self.holder))
        except GriteError:
            pass   # expired or taken over meanwhile: nothing of ours to release

    def write(self, moves: list[Move], what: str, **kw) -> bool:
        self.renew()
        return rq.write(self.g, moves, what, self.resource, self.holder, **kw)

    # -- the pass ---------------------------------------------------------------------

    def remote(self) -> str | None:
        """The remote the target is pushed to, when pushing applies."""
        if self.store.bare or not self.rc.push or self.rc.remote not in self.store.remotes():
            return None
        return self.rc.remote

    def queue(self) -> list[Request]:
        """The requests due now (open, not backing off), every one with a merge entity."""
        self.g.state(refresh=True)
        reqs = rq.requests(self.g, self.cfg)
        fresh = [r for r in reqs if not r.merge]
        if fresh:
            drafts = []
            for r in fresh:
                r.merge = ev.new_entity_id()
                drafts += rq.merge_drafts(r, self.target)
            self.renew()
            locks.append_fenced(self.g, self.resource, drafts,
                                f"brat: refinery.request {len(fresh)} merge request(s)",
                                holder_id=self.holder)
        merges = {e.id: e for e in self.g.state(refresh=True).of_kind(model.MERGE)}
        return plan.due(reqs, merges, process.now_ms(), self.red_at)

    def recover(self) -> None:
        """Merges a refinery left half done (it was killed): back to the queue, or failed
        once they used up their attempts. Only the lease holder runs this, so none is live."""
        state = self.g.state(refresh=True)
        board = Board(state)
        moves = []
        for tid, m in rq.open_merges(state).items():
            t = board.tasks.get(tid)
            if t is None or model.status_of(t) != "merging" or m.get("status") not in (
                    "merging", "checking"):
                continue
            spent = int(m.get("attempts", 1)) >= self.rc.max_attempts
            why = "the refinery stopped before this merge finished"
            moves.append(Move(tid, "failed" if spent else "needs-review", m.id, merge_fields={
                "status": "failed" if spent else "queued", "result": why, "finished_at": process.now_ms()},
                reason=why, skip_if_not=("merging",)))
            self.report.outcomes.append(Outcome(tid, m.id, "failed" if spent else "recovered", why))
        moves += self.overtaken(state)
        if moves:
            self.write(moves, "recover")

    def run_pass(self) -> PassReport:
        """Drain the queue as it stands: batch after batch until nothing is due."""
        self.report = PassReport(self.target)
        self.recover()
        self.fetch_task_branches()
        self.look_at_red()
        tried: set[str] = set()
        for _ in range(1000):   # bounded: every batch removes its requests from the queue
            batch = plan.next_batch(self.queue(), tried, self.rc.batch)
            if not batch:
                break
            tried.update(r.merge for r in batch)
            self.report.batches += 1
            self.process(batch)
            tried -= self.requeued   # its branch moved during the check: checked again
            self.requeued = set()
        if self.report.outcomes:
            self.publish()
        return self.report

    def fetch_task_branches(self) -> None:
        """The task branches other clones' witnesses pushed to refinery.remote, as that
        remote's copies (refs/remotes/<remote>/brat/*): one refinery merges for every clone,
        so it must see their work, and their logs (which tasks wait), not only this clone's.
        Offline: what is here is used."""
        from git_brat.grite.sync import exchange as sync
        remote = self.rc.remote
        if self.store.bare or remote not in self.store.remotes():
            return
        if sync.is_synced(self.store, remote):
            try:
                sync.sync(self.g, remote, push=False)
            except GriteError as exc:
                self.report.note = f"could not fetch the log from {remote}: {exc.message}"
        self.store.remote.fetch(remote, [f"+refs/heads/{rq.BRANCH_PREFIX}*:refs/remotes/"
                                         f"{remote}/{rq.BRANCH_PREFIX}*"],
                                environment("transport"), self.settings.timeout)

    def publish(self) -> None:
        """Publish what this pass recorded on the remote it syncs with, so every clone sees
        the outcomes after a fetch (a hub's own log is fetched by its clones as it is)."""
        from git_brat.grite.sync import exchange as sync
        remote = self.rc.remote
        if self.store.bare or remote not in self.store.remotes() or not sync.is_synced(
                self.store, remote):
            return
        try:
            pub = sync.publish(self.g, remote)
            if pub.status == "failed":
                self.report.note = f"could not publish to {remote}: {pub.error}"
        except GriteError as exc:
            self.report.note = f"could not publish to {remote}: {exc.message}"

    def process(self, batch: list[Request]) -> None:
        """One batch: stack, check (bisecting on failure), land by CAS; redo if the target moved."""
        started = process.now_ms()
        live = self.start(batch, started)
        if not live:
            return
        try:
            moves, rebuild = 0, False
            # bounded: each round the target moved (at most MAX_REDO + 1) or a request left
            for _round in range(MAX_REDO + 2 + len(live)):
                local = self.store.objects.rev(f"refs/heads/{self.target}")
                if local is None:
                    raise GriteError(f"target branch {self.target} does not exist")
                base = self.base_tip(local)
                tip = self.already_checked(live, base) if not rebuild else None
                if tip is not None:    # it waited for the user's checkout: nothing changed since
                    good = live
                else:
                    self.reset(base)
                    live = self.stack_all(live, started)
                    if not live:
                        return
                    self.round_base = base
                    try:
                        tip, good, bad = self.bisect(base, live, built=self.first_tip())
                    except TargetRed as exc:
                        self.held(live, base, str(exc), started)
                        return
                    for r, out in bad:
                        self.failed(r, out, started)
                    if not good:
                        return
                # What was checked is what lands: a request whose task a human moved or whose
                # branch gained commits meanwhile leaves, and the rest is built again without it.
                stale = self.moved_meanwhile(good)
                if stale:
                    self.left_out(stale, good, started)
                    live, rebuild = [r for r in good if r.merge not in stale], True
                    if not live:
                        return
                    continue
                verdict, detail = self.land(tip, local)
                if verdict == "landed":
                    self.merged(good, tip, detail, started)
                    return
                if verdict in ("waiting", "unreachable"):
                    self.waiting(good, detail, started, tip, base,
                                 human=verdict == "waiting")
                    return
                if verdict == "diverged":   # and the push failed: nowhere to land it
                    self.errored(good, detail, started)
                    return
                live, rebuild = good, True   # the target moved: do it again on the new tip
                moves += 1
                if moves > MAX_REDO:
                    break
                self.report.redone += 1
            self.errored(live, f"{self.target} kept moving during {MAX_REDO + 1} attempts",
                         started)
        except (Stopped, KeyboardInterrupt):
            self.put_back(live, "refinery stopped", started)
            raise
        except GriteError as exc:
            self.errored(live, exc.message, started)

    # -- steps ------------------------------------------------------------------------

    def already_checked(self, reqs: list[Request], base: str) -> str | None:
        """The commit a waiting batch was built and checked as, if it would be built the same
        way now (same heads, same base): landing it needs no second check run."""
        merges = {e.id: e for e in self.g.state().of_kind(model.MERGE)}
        tips = set()
        for r in reqs:
            m = merges.get(r.merge)
            if r.status != "waiting" or m is None or m.get("waited_on") != base \
                    or m.get("waited_head") != r.head \
                    or m.get("waited_batch") != [x.merge for x in reqs]:
                return None
            tips.add(m.get("waited_commit"))
        return tips.pop() if len(tips) == 1 and None not in tips else None

    def moved_meanwhile(self, reqs: list[Request]) -> dict[str, tuple[str, str]]:
        """merge id -> (what moved, why), for each request that no longer is what was built and
        checked: its "task" left merging (a human moved it) or its "branch" is not at the
        checked head any more."""
        tasks = model.board(self.g, refresh=True).tasks
        out = {}
        for r in reqs:
            t = tasks.get(r.task)
            st = model.status_of(t) if t is not None else "gone"
            if st != "merging":
                out[r.merge] = ("task", f"moved to {st} during its check; left out")
                continue
            found = rq.find_branch(self.store, r.branch, r.head)
            if found is None:
                out[r.merge] = ("branch", f"{r.branch} was deleted during its check; left out")
            elif found[1] != r.head:
                out[r.merge] = ("branch", f"{r.branch} moved to {found[1][:12]} during its check "
                                          f"(checked {r.head[:12]}); queued to check the new head")
        return out

    def start(self, batch: list[Request], started: int) -> list[Request]:
        ids = [r.merge for r in batch]
        moves = [Move(r.task, "merging", r.merge, merge_fields={
            "status": "merging", "attempts": r.attempts + 1, "started_at": started, "head": r.head,
            "batch": ids, "log": merge_log(self.g, r.merge)},
            skip_if_not=("needs-review",)) for r in batch]
        self.write(moves, "start")
        tasks = model.board(self.g, refresh=True).tasks
        return [r for r in batch if model.status_of(tasks[r.task]) == "merging"]

    def base_tip(self, local: str) -> str:
        """What the merge is built on: the remote's target when the refinery pushes there (so
        nothing of the user's that the user did not push goes along), else the local one."""
        remote = self.remote()
        if remote is None:
            return local
        theirs = self.store.remote.fetch_branch(remote, self.target, self.settings.timeout)
        if theirs is None:
            return local   # unreachable, or no such branch there yet: land() says which
        if theirs != local and not self.store.objects.is_ancestor(local, theirs):
            mine = self.store.objects.count(theirs, local)
            state = "is ahead of" if self.store.objects.is_ancestor(theirs, local) else \
                "has diverged from"
            self.report.note = (f"{self.target} here {state} {remote}/{self.target} ({mine} "
                                f"commit(s) not pushed, left out of what the refinery pushes)")
        return theirs

    def reset(self, tip: str) -> None:
        path = worktree_path(self.g)
        if not os.path.exists(os.path.join(path, ".git")):
            if os.path.exists(path):
                import shutil
                shutil.rmtree(path)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            worktree.add(self.store.common_dir, path, start=tip)
        worktree.reset(path, tip)

    def apply(self, r: Request) -> tuple[bool, list[str]]:
        path, policy = worktree_path(self.g), self.rc.merge_policy
        msg = f"{subject_title(r.title)} (brat task {r.task[:7]})"
        if policy == "squash":
            return merge.apply_squash(path, r.head, msg, REFINERY_IDENT)
        if policy == "merge":
            return merge.apply_merge(path, r.head, f"Merge {r.branch}: {msg}", REFINERY_IDENT)
        return merge.apply_rebase(path, r.head, REFINERY_IDENT, f"Merge {r.branch}: {msg}")

    def stack_all(self, reqs: list[Request], started: int) -> list[Request]:
        """Apply each request onto the worktree in order; conflicting ones leave the batch."""
        out = []
        for r in reqs:
            ok, files = self.apply(r)
            if ok:
                out.append(r)
            else:
                self.conflict(r, files, started)
        return out

    def stack(self, base: str, reqs: list[Request]) -> tuple[str, list[tuple[Request, str]]]:
        self.reset(base)
        bad = []
        for r in reqs:
            ok, files = self.apply(r)
            if not ok:
                bad.append((r, "conflict:" + ", ".join(files)))
        return worktree.head(worktree_path(self.g)), bad

    def bisect(self, base: str, reqs: list[Request], failed: str | None = None,
               built: str | None = None) -> tuple[str, list[Request], list[tuple[Request, str]]]:
        """(tip with the good ones stacked on base, good, [(bad, check output)]).

        `failed`: the output of a check of exactly these requests on base that failed already.
        """
        out = failed
        if out is None:
            if built is None:
                tip, clashes = self.stack(base, reqs)
                if clashes:   # only possible without an earlier request: bad on its own
                    bad_ids = {r.merge for r, _ in clashes}
                    rest = [r for r in reqs if r.merge not in bad_ids]
                    tip, good, bad = self.bisect(base, rest) if rest else (base, [], [])
                    return tip, good, bad + clashes
            else:
                tip = built
            passed, out = self.check(tip, reqs)
            if passed:
                return tip, reqs, []
            why = self.target_red(base) if base == self.round_base else None
            if why is not None:
                self.red_at = base
                raise TargetRed(why)
        if len(reqs) == 1:
            return base, [], [(reqs[0], out)]
        left, right = plan.halves(reqs)
        tip_l, good_l, bad_l = self.bisect(base, left)
        tip_r, good_r, bad_r = self.bisect(tip_l, right,
                                           failed=plan.right_half_result(bool(bad_l), out))
        return tip_r, good_l + good_r, bad_l + bad_r

    def first_tip(self) -> str:
        return worktree.head(worktree_path(self.g))

    # -- landing ------------------------------------------------------------------------

    def land(self, new: str, local: str) -> tuple[str, str]:
        """Move the target to new: ("landed", note) / ("moved", why) / ("waiting", why) /
        ("unreachable", why): the remote it pushes to did not take it."""
        note, pushed = "", False
        remote = self.remote()
        if remote:
            ok, why = self.store.remote.push_branch(remote, new, self.target,
                                                    self.settings.timeout)
            if not ok:
                theirs = self.store.remote.fetch_branch(remote, self.target,
                                                        self.settings.timeout)
                if theirs is not None and not self.store.objects.is_ancestor(theirs, new):
                    return "moved", f"push to {remote} rejected: {why}"
                # Landing here alone would record "merged" for work the other clones never
                # get, on a local branch that then diverges from the remote's: it waits,
                # checked, and the next pass pushes it (no second check if nothing moved).
                return "unreachable", (f"push to {remote} failed ({why}); it waits, checked, "
                                       f"for the next pass to push it")
            else:
                note, pushed = f"pushed to {remote}", True
        verdict, why = self._land_locally(new, local)
        if verdict != "landed" and pushed:
            # It is on the remote: landed. This clone's branch catches up with a pull.
            return "landed", f"{note}; local {self.target} not brought forward: {why}"
        return verdict, why if verdict != "landed" else note

    def _land_locally(self, new: str, local: str) -> tuple[str, str]:
        ref = f"refs/heads/{self.target}"
        if not self.store.objects.is_ancestor(local, new):
            # The local target holds commits of the user's the merge was not built on (it was
            # built on the remote's): moving it would drop them from the branch.
            return "diverged", (f"{self.target} here has diverged from the remote's (it has "
                                f"commits the remote lacks); `git pull` brings them together")
        for wt in worktree.listing(self.store.common_dir):
            if wt.get("branch") == ref and "bare" not in wt:
                process.wait_for_exit(self.wait_pids)   # the git command whose hook started us
                res = merge.ff_checkout(wt["worktree"], new)
                if res.ok:
                    return "landed", ""
                if self.store.objects.rev(ref) != local:
                    return "moved", f"{self.target} moved"
                files = [ln.strip() for ln in res.err.splitlines() if ln.startswith("\t")]
                why = f"local changes to {', '.join(files)} collide" if files else res.error_line()
                return "waiting", (f"{self.target} is checked out at {wt['worktree']} and git "
                                   f"refuses to fast-forward it: {why}; commit or stash "
                                   f"those changes, then run the refinery again")
        if self.store.refs.cas(ref.encode(), local.encode(), new.encode(),
                               f"brat refinery: {self.target} -> {new[:12]}".encode()):
            return "landed", ""
        return "moved", f"{self.target} moved"

    def cleanup(self) -> None:
        """A hub's worktree is temporary; a checkout keeps its own for the next pass."""
        if self.store.bare and os.path.exists(worktree_path(self.g)):
            worktree.remove(self.store.common_dir, worktree_path(self.g))

    def kill_check(self) -> None:
        if self._check is not None and self._check.poll() is None:
            kill(self._check)


def retry(g: Grite, ref: str) -> Updated:
    """A blocked or failed task whose branch a human fixed goes straight back to review, its
    merge attempts counted afresh (one event, validated at the tip, recorded as forced)."""
    tid = g.resolve(ref, model.TASK).id
    st = model.status_of(g.resolve(tid, model.TASK))
    if st not in ("blocked", "failed"):
        raise Conflict(f"refused: task {tid[:7]} is {st}; only a blocked or failed task is "
                       f"retried (a task in needs-review is already in the queue)")
    if rq.find_branch(g.store, rq.task_branch(tid)) is None:
        raise Conflict(f"refused: task {tid[:7]} has no branch {rq.task_branch(tid)} to merge")
    rq.write(g, [Move(tid, "needs-review", task_fields={"merge_failures": 0}, force=True,
                      reason="retried by hand: back to the merge queue",
                      skip_if_not=("blocked", "failed"))], "retry")
    e = g.resolve(tid, model.TASK)
    return Updated(tid, st, model.status_of(e), True, e.fields["status"][3])


__all__ = ["Refinery", "PassReport", "Outcome", "Stopped", "retry", "worktree_path", "merge_log"]
