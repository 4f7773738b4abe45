"""How a session ended, decided without I/O: the session's status, where its task goes, and
whether its branch goes to the merge queue."""

from __future__ import annotations

from typing import Any, Literal

import msgspec

from git_brat.brat.config import Witness as Policy

# Why the witness stopped a session ("" when the agent exited by itself).
StopReason = Literal["", "timeout", "done", "blocked", "moved", "stop-requested", "lease-lost",
                     "witness", "budget"]


class Facts(msgspec.Struct, kw_only=True, frozen=True):
    """What is known once a session's process is gone (read from it and from the log's tip)."""
    session: str
    branch: str
    stop_reason: StopReason = ""
    setup_failed: str = ""         # setup (or starting the engine) failed: why
    exit_code: int | None = None   # None: it never ran, or was never waited for
    engine_error: str | None = None   # the engine's result said it failed: its message
    timeout: float = 0.0           # seconds it was given (for the message)
    commits: int = 0               # on its branch, ahead of the target
    task_status: str = "running"
    task_session: str = ""         # the session the task says runs it
    done: bool = False             # the agent said `git brat task done`
    task_reason: str = ""          # the reason given with the task's current status
    failures: int = 0              # the task's failed attempts before this one
    stop_requested_by: str = ""
    witness_stopping: str = ""     # why the witness itself stops ("interrupted", "stopped")
    tail: str = ""                 # the last lines of its output
    now: int = 0                   # ms
    head: str = ""                 # its branch's tip at the end
    reply_head: str = ""           # the head a human's reply (request changes) answered
    over_budget: str = ""          # why the task may spend no more (its budget, its convoy's)


class Verdict(msgspec.Struct, frozen=True):
    status: str                    # the session's end: done, failed, timed-out, blocked, stopped, ended
    reason: str
    task_to: str = ""              # where the task moves ("": it stays where it is)
    task_reason: str = ""
    task_fields: dict[str, Any] = {}   # set with the move, in the same event
    merge: bool = False            # its branch goes to the merge queue


def failure(f: Facts) -> str:
    """Why the session failed, or "" when nothing went wrong."""
    if f.setup_failed:
        return f.setup_failed
    if f.stop_reason == "timeout":
        return f"timed out after {f.timeout:g}s (its process group was stopped)"
    if f.exit_code is None:
        return ""
    rc = f.exit_code
    if rc != 0 and f.stop_reason not in ("done", "blocked", "moved"):
        return f"the engine exited {rc}" if rc > 0 else f"the engine was killed by signal {-rc}"
    if f.engine_error is not None:
        return f"the engine reported an error: {f.engine_error[:300]}"
    return ""


def retry(f: Facts, policy: Policy, why: str) -> tuple[str, str, dict[str, Any]]:
    """(to, reason, fields) of a failed attempt: queued again after a backoff while retries are
    left, failed after the last."""
    failures = f.failures + 1
    text = f"{why}\n\nlast output:\n{f.tail}"[-6000:]
    if failures <= policy.max_retries:
        delay = min(policy.backoff * 2 ** (failures - 1), policy.backoff_max)
        return "queued", f"attempt {failures} failed: {why}; retry in {delay:g}s", {
            "failures": failures, "retry_after": f.now + int(delay * 1000),
            "last_failure": text, "last_failure_at": f.now}
    return "failed", f"{why} (after {failures} attempt(s))", {
        "failures": failures, "last_failure": text, "last_failure_at": f.now}


def decide(f: Facts, policy: Policy) -> Verdict:
    """The session's end and its task's move, from the facts at the tip the event swaps against."""
    ours = f.task_status == "running" and f.task_session == f.session
    why = failure(f)
    if f.stop_reason == "lease-lost":
        return Verdict("failed", "its lease was lost (another session took the task)")
    if not ours:
        if f.task_status == "blocked":
            return Verdict("blocked", f"the agent blocked the task: {f.task_reason}")
        return Verdict("ended", f"the task was moved to {f.task_status} while it ran")
    if f.stop_reason == "witness":
        return Verdict("stopped", f"the witness was {f.witness_stopping or 'stopped'}", "queued",
                       f"session {f.session[:7]} stopped with the witness; it resumes on {f.branch}")
    if f.stop_reason == "stop-requested":
        by = f.stop_requested_by or "a user"
        return Verdict("stopped", f"stopped by {by}", "blocked",
                       f"session {f.session[:7]} was stopped by {by}")
    # Stopped at its budget, unless it had finished by itself as it was stopped (exit 0: its
    # last report, claude's result, comes as it exits): then its end is judged as any other.
    stopped = f.stop_reason == "budget" and f.exit_code != 0
    if stopped or (f.over_budget and not f.commits and not f.done):
        # Spent: never retried on its own, a human decides (raise the budget, or drop it).
        reason = f"stopped at its budget: {f.over_budget}" if stopped else \
            f"{why or 'it ended without a commit'}; {f.over_budget}"
        return Verdict("stopped" if stopped else "failed", reason, "blocked", reason,
                       {"needs_human": f.over_budget})
    if why and not (f.done and f.commits):
        to, reason, fields = retry(f, policy, why)
        return Verdict("timed-out" if f.stop_reason == "timeout" else "failed", why, to, reason,
                       fields)
    if f.reply_head and f.head == f.reply_head:
        # Back with the very commit the human asked to change: it must not return to review
        # (where an approval of an older look, or auto review, would land it) as if it had.
        reason = f"it changed nothing after your reply ({f.branch} is still at {f.head[:12]})"
        return Verdict("ended", reason, "blocked",
                       f"the agent's session after your reply made no new commit: reply again "
                       f"(`git brat task reply`), or drop the task")
    if f.commits:
        reason = f"{f.commits} commit(s) on {f.branch}"
        return Verdict("done", reason, "needs-review", reason,
                       {"failures": 0, "last_failure": ""}, merge=True)
    if f.done:
        reason = "reported done without any commit"
        if policy.allow_empty_done:
            return Verdict("done", reason, "needs-review", reason)
        return Verdict("failed", reason, "failed", reason + " (witness.allow_empty_done is false)")
    why = "the engine exited without a commit and without `git brat task done`"
    to, reason, fields = retry(f, policy, why)
    return Verdict("failed", why, to, reason, fields)


def failed_tasks(ended) -> int:
    """Tasks whose last session of a witness run (its SessionEnd list) failed."""
    from git_brat.brat.sessions import FAILED
    last: dict = {}
    for e in ended:
        last[e.task] = e
    return sum(1 for e in last.values() if e.status in FAILED or e.task_status == "failed")


__all__ = ["Facts", "Verdict", "StopReason", "failure", "retry", "decide", "failed_tasks"]
