"""What the refinery records for each merge request it finished with (each one event)."""

from __future__ import annotations

import os

import msgspec

from git_brat import process, redact
from git_brat.brat import board as model
from git_brat.brat import layout
from git_brat.brat.refinery import queue as rq
from git_brat.brat.refinery import red
from git_brat.brat.board import Board
from git_brat.brat.refinery.queue import Move, Request
from git_brat.brat.refinery.report import Failure
from git_brat.errors import Conflict, GriteError

BACKOFF, BACKOFF_MAX = 10.0, 600.0   # seconds after an attempt that hit an error


class Outcome(msgspec.Struct):
    task: str
    merge: str
    result: str              # merged / failed / requeued / conflict / blocked / waiting / error
                             # / held (the target fails its check on its own)
                             # / left-out (its task was moved by hand during its check)
    detail: str = ""
    commit: str = ""
    log: str = ""            # the check's whole output: a local file (0600), never synced


def check_fields(output: str) -> dict:
    """What a merge entity records of a failed check run (report.check_report reads them)."""
    if not isinstance(output, Failure):
        return {}
    return {"exit_code": output.exit, "failing_tests": list(output.tests),
            "checked_commit": output.commit}


def backoff(attempts: int) -> float:
    return min(BACKOFF_MAX, BACKOFF * 2 ** max(0, attempts - 1))


class Outcomes:
    """Mixin of Refinery: needs self.write, self.g, self.rc, self.target, self.report."""

    def _done(self, r: Request, result: str, detail: str = "", commit: str = "",
              log: str = "") -> None:
        self.report.outcomes.append(Outcome(r.task, r.merge, result, detail, commit, log))

    def _times(self, started: int) -> dict:
        end = process.now_ms()
        return {"finished_at": end, "duration": round((end - started) / 1000, 3)}

    def merged(self, good: list[Request], tip: str, note: str, started: int) -> None:
        short = tip[:12]
        detail = f"landed on {self.target} at {short}" + (f"; {note}" if note else "")
        mf = {"status": "merged", "merged_commit": tip, "result": detail, **self._times(started)}
        try:
            self.write([Move(r.task, "merged", r.merge, merge_fields=mf) for r in good], "merged")
        except Conflict:
            # A human moved a task between the last look and the landing: its work is on the
            # target now, so that is what is recorded (as forced, with the reason), never nothing.
            tasks = model.board(self.g, refresh=True).tasks
            self.write([Move(r.task, "merged", r.merge, merge_fields=mf,
                             force=model.status_of(tasks[r.task]) != "merging",
                             reason=f"landed on {self.target} at {short} while it was moved")
                        for r in good if r.task in tasks], "merged")
        for r in good:
            self._done(r, "merged", detail, tip)
        self.target_passed(tip)

    def held(self, reqs: list[Request], base: str, why: str, started: int) -> None:
        """The target is red at base: the requests go back to the queue held on it, their
        attempt not counted and no failure recorded (their work was never the question)."""
        said = f"{self.target} is red ({why}); checked again once it passes"
        text = f"held: {said}"
        self.write([Move(r.task, "needs-review", r.merge, merge_fields={
            "status": "held", "held_on": base, "attempts": r.attempts, "result": text,
            **self._times(started)}, reason=f"held: {self.target} is red",
            skip_if_not=("merging",)) for r in reqs], "held")
        for r in reqs:
            self._done(r, "held", said)

    def overtaken(self, state) -> list[Move]:
        """Tasks whose change landed while a move from another clone overtook them.

        A human's reply or drop on another clone, made while this refinery was landing the
        task and not yet fetched here, stamps a move from the status it saw; replay then takes
        the human's move and rejects the refinery's "merged". The work is on the target all the
        same, and a task that is not merged would be run again and fail as "done without any
        commit". So the landing is recorded again, forced and saying why, once its commit is
        on the target and the task's branch still holds only what landed (new work on the
        branch is a new round of review, left alone); never while a session runs it.
        """
        tasks = Board(state).tasks
        landed: dict[str, object] = {}
        for m in state.of_kind(model.MERGE):
            if m.get("status") == "merged" and m.get("task") in tasks and (
                    m.get("task") not in landed or model.age_key(m) > model.age_key(landed[m.get("task")])):
                landed[m.get("task")] = m
        tips = [self.store.objects.rev(f"refs/heads/{self.target}")]
        remote = self.remote()
        if remote:
            tips.append(self.store.objects.rev(f"refs/remotes/{remote}/{self.target}"))
        def on_target(sha: str) -> bool:
            return any(tip and self.store.objects.is_ancestor(sha, tip) for tip in tips)
        moves = []
        for tid, m in landed.items():
            t = tasks[tid]
            status, commit = model.status_of(t), m.get("merged_commit")
            # The log names the commit: only a full commit id this clone holds is looked up
            # (a name like "main" would be resolved by git, and always be "on the target").
            if status in ("merged", "running", "merging") or not isinstance(commit, str) \
                    or not rq.FULL_SHA.fullmatch(commit) or not self.store.objects.is_commit(commit):
                continue
            if not on_target(commit):
                continue
            found = rq.find_branch(self.store, t.get("branch") or f"{rq.BRANCH_PREFIX}{tid}",
                                   m.get("head") or "")
            # Only what landed: the head it was landed at, or (policy rebase) the rebased
            # commits the branch was moved to, all on the target. A commit on it that is not
            # is new work to review, left alone.
            if found is not None and found[1] != m.get("head") and not on_target(found[1]):
                continue
            why = (f"its change landed on {self.target} at {commit[:12]} while another clone "
                   f"moved it to {status}; recorded merged, as it is on {self.target} (more "
                   f"work asked for meanwhile needs a new task)")
            moves.append(Move(tid, "merged", m.id, force=True, reason=why,
                              skip_if_not=(status,)))
            self.report.outcomes.append(Outcome(tid, m.id, "merged", why, commit))
        return moves

    def failed(self, r: Request, output: str, started: int) -> None:
        # It syncs: an excerpt, redacted; the whole output stays in the merge's local log (0600).
        run = check_fields(output)
        output = redact.text(str(output))
        log = layout.merge_log(self.g.store, r.merge)
        log = log if os.path.exists(log) else ""
        if output.startswith("conflict:"):
            self.conflict(r, output[len("conflict:"):].split(", "), started)
            return
        tree = self._tree(run.get("checked_commit", ""))
        again = bool(tree) and self._task_field(r, "failed_tree") == tree
        count = self._failures(r) + (0 if again else 1)   # the same commits again: no attempt
        give_up = self.rc.on_fail == "fail" or count >= self.rc.max_attempts
        head = output.splitlines()[0] if output else "check failed"
        if run and self.round_base and red.verdict(self.store, self.round_base,
                                                   self.rc.check) is True:
            output += (f"\n({self.target} passes this check on its own at "
                       f"{self.round_base[:12]}: the failure comes with this work)")
        mf = {"status": "failed", "result": head, **self._times(started), **run}
        if run:
            mf["output_tail"] = output.partition("\n")[2]
        counted = (lambda _b, _m: {}) if again else rq.failures_plus_one
        task_fields = {"last_failure": output, **({"failed_tree": tree} if tree else {})}
        if give_up:
            why = head if self.rc.on_fail == "fail" else \
                f"{head} (attempt {count} of {self.rc.max_attempts})"
            self.write([Move(r.task, "failed", r.merge, task_fields, mf, reason=why)],
                       "failed", fields_at_tip=counted)
            self._done(r, "failed", why, log=log)
        else:
            mf["status"] = "requeued"
            why = "check failed; requeued with its output" + (
                " (the same commits as its last failed check: not a new attempt)" if again else "")
            self.write([Move(r.task, "queued", r.merge, task_fields, mf, reason=why)],
                       "requeue", fields_at_tip=counted)
            self._done(r, "requeued", head, log=log)

    def conflict(self, r: Request, files: list[str], started: int) -> None:
        text = (f"merge conflict in: {', '.join(files)}; rebase {r.branch} onto {self.target}")
        mf = {"status": "conflict", "conflicts": files, "result": text, **self._times(started)}
        if self.rc.on_conflict == "block":
            mf["status"] = "blocked"
            self.write([Move(r.task, "blocked", r.merge, {
                "last_failure": text, "needs_human": text + " by hand, then retry it",
                "resolve": "refinery-retry"}, mf, reason=text)],
                "block", fields_at_tip=rq.failures_plus_one)
            self._done(r, "blocked", text)
        elif self._failures(r) + 1 >= self.rc.max_attempts:
            self.write([Move(r.task, "failed", r.merge, {"last_failure": text}, mf,
                             reason=f"{text} (attempt {self._failures(r) + 1} of "
                                    f"{self.rc.max_attempts})")],
                       "failed", fields_at_tip=rq.failures_plus_one)
            self._done(r, "failed", text)
        else:
            self.write([Move(r.task, "queued", r.merge, {"last_failure": text}, mf,
                             reason="merge conflict; requeued for a rebase")],
                       "requeue", fields_at_tip=rq.failures_plus_one)
            self._done(r, "conflict", text)

    def waiting(self, good: list[Request], why: str, started: int, tip: str = "",
                base: str = "", human: bool = True) -> None:
        """Checked, not landed: for a human (a checkout git will not move) or for the remote
        to answer; either way the next pass lands what was checked if nothing moved."""
        ids = [r.merge for r in good]
        self.write([Move(r.task, "needs-review", r.merge, {
            "needs_human": why, "resolve": "refinery-run"} if human else {},
            {"status": "waiting", "result": why, "waited_commit": tip, "waited_on": base,
             "waited_head": r.head, "waited_batch": ids, **self._times(started)}, reason=why)
            for r in good], "wait")
        for r in good:
            self._done(r, "waiting", why)

    def left_out(self, stale: dict[str, tuple[str, str]], reqs: list[Request],
                 started: int) -> None:
        """Requests that changed while they were checked (see Refinery.moved_meanwhile): a task
        a human moved keeps the status they gave it (its merge request is superseded); one whose
        branch moved goes back to the queue with its new head, to be checked again."""
        moves = []
        for r in reqs:
            if r.merge not in stale:
                continue
            what, why = stale[r.merge]
            if what == "task":
                moves.append(Move(r.task, None, r.merge, merge_fields={
                    "status": "superseded", "left_out": True, "result": why,
                    **self._times(started)}))
                self._done(r, "left-out", why)
                continue
            found = rq.find_branch(self.store, r.branch, r.head)
            moves.append(Move(r.task, "needs-review", r.merge, merge_fields={
                "status": "queued", "result": why, "head": found[1] if found else r.head,
                **self._times(started)}, reason=why, skip_if_not=("merging",)))
            self._done(r, "requeued", why)
            self.requeued.add(r.merge)
        if moves:
            self.write(moves, "left-out")

    def errored(self, reqs: list[Request], why: str, started: int) -> None:
        state = self.g.state(refresh=True)
        merges = {e.id: e for e in state.of_kind(model.MERGE)}
        tasks = Board(state).tasks
        moves = []
        for r in reqs:
            if r.task not in tasks or model.status_of(tasks[r.task]) != "merging":
                continue   # its outcome was recorded before the error
            attempts = int(merges[r.merge].get("attempts", 1)) if r.merge in merges else 1
            final = attempts >= self.rc.max_attempts
            moves.append(Move(r.task, "failed" if final else "needs-review", r.merge,
                              merge_fields={"status": "failed" if final else "error",
                                            "result": why, **self._times(started),
                                            "next_attempt_at":
                                                process.now_ms() + int(backoff(attempts) * 1000)},
                              reason=why, skip_if_not=("merging",)))
            self._done(r, "failed" if final else "error", why)
        try:
            self.write(moves, "error")
        except GriteError:
            pass

    def put_back(self, reqs: list[Request], why: str, started: int) -> None:
        try:
            self.write([Move(r.task, "needs-review", r.merge, merge_fields={
                "status": "queued", "result": why, **self._times(started)},
                skip_if_not=("merging",)) for r in reqs], "stop")
        except GriteError:
            pass

    def _failures(self, r: Request) -> int:
        return int(self._task_field(r, "merge_failures") or 0)

    def _task_field(self, r: Request, name: str):
        t = model.board(self.g).tasks.get(r.task)
        return t.get(name) if t is not None else None

    def _tree(self, commit: str) -> str:
        """The tree a checked commit holds ("" when unknown): the same commits build the same
        tree, and a check of it again tells nothing new."""
        try:
            return self.store.objects.read_commit(commit.encode()).tree.decode() if commit else ""
        except GriteError:
            return ""


__all__ = ["Outcomes", "Outcome", "backoff"]
