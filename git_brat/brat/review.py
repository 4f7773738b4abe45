"""The review gate: a finished task lands only once a human approved the very commit it would land
(or, with refinery.review = "auto" and a check set, once the check passes).

An approval names a head: new commits after it need a new one. A reply (request changes) clears
it and remembers the head it answered, so a session that comes back with that same head changed
nothing and is shown as such, never landed.
"""

from __future__ import annotations

import re

import msgspec

from git_brat import process
from git_brat.brat import board as model
from git_brat.brat import trust
from git_brat.brat.board import MERGE, TASK, Board, status_of
from git_brat.brat.config import Config
from git_brat.errors import Conflict, UsageError
from git_brat.grite.issues import check_text, summary
from git_brat.grite.log.wal import Draft
from git_brat.grite.model import events as ev
from git_brat.grite.model.state import Entity
from git_brat.grite.repo import Grite

FULL_SHA = re.compile(r"[0-9a-f]{40}")
# `path:line: text` notes on a reply (the path as the diff names it)
NOTE = re.compile(r"(?P<path>[^:\s][^:]*):(?P<line>[1-9][0-9]{0,8}):\s*(?P<text>\S.*)", re.S)
MAX_NOTES = 50


def mode(cfg: Config) -> str:
    """What decides that a finished task may land: "human" (an approval) or "auto" (the check).

    "auto" without a check would land every agent commit unread: it counts as "human"."""
    if cfg.refinery.review == "auto" and cfg.refinery.check.strip():
        return "auto"
    return "human"


def mode_warning(cfg: Config) -> str:
    """What status says when the configured mode is not the one in force ("" otherwise)."""
    if cfg.refinery.review == "auto" and not cfg.refinery.check.strip():
        return ("refinery.review = \"auto\" needs a check (refinery.check is empty): every "
                "finished task waits for `git brat task approve`")
    return ""


def head_under_review(board: Board, store, tid: str) -> str:
    """The commit a task in review would land: the copy of its branch the refinery would take
    (find_branch: commits added since the agent finished included), else the head its newest
    open merge request names ("" when neither is known)."""
    best = None
    for m in board.state.of_group(MERGE, tid):
        if m.get("status", "queued") in model.MERGE_DONE or m.get("status") == "superseded":
            continue
        if best is None or model.age_key(m) > model.age_key(best):
            best = m
    head = best.get("head", "") if best is not None else ""
    head = head if isinstance(head, str) and FULL_SHA.fullmatch(head) else ""
    branch = best.get("branch") if best is not None else None
    if not isinstance(branch, str) or not branch.startswith("brat/"):
        branch = f"brat/{tid}"
    found = find_branch(store, branch, head)
    return found[1] if found else head


def find_branch(store: Store, branch: str, want: str = "") -> tuple[str, str] | None:
    """(ref, sha) of a task branch: the local branch, else a remote's copy of it.

    `want`, the head the task was finished at: the copy that holds it is the task's work. A
    local branch that lacks it (behind it: this clone's own attempt was cut short and another
    clone finished the task; or that head was never fetched here) is not, and neither is a
    remote's copy that lacks it: None until a fetch brings it. A local branch holding it and
    more (a human added a commit) is taken, and so is one rewritten here (it holds a head this
    clone has seen, not that one)."""
    local = store.refs.read(f"refs/heads/{branch}".encode())
    mine = (f"refs/heads/{branch}", local.decode()) if local else None
    copies = [(n.decode(), sha.decode()) for n, sha in sorted(store.refs.under(b"refs/remotes/").items())
              if n.decode().count("/") >= 3 and n.decode().split("/", 3)[3] == branch]
    if want and not FULL_SHA.fullmatch(want):
        want = ""   # (from the log: only a full commit id is compared, never handed to git)
    if not want or (mine is not None and mine[1] == want):
        return mine or (copies[0] if copies else None)
    fetched = store.objects.has_object(want.encode())
    if mine is not None and fetched and (store.objects.is_ancestor(want, mine[1]) or
                                         not store.objects.is_ancestor(mine[1], want)):
        return mine
    return next((c for c in copies if c[1] == want), None) or next(
        (c for c in copies if fetched and store.objects.is_ancestor(want, c[1])), None)


def approved(task: Entity, head: str, cfg: Config) -> bool:
    """Whether task may land at head: auto review, or a human approved exactly that head."""
    if mode(cfg) == "auto":
        return True
    return bool(head) and task.get("approved_head") == head


def waiting(board: Board, store, cfg: Config) -> list[Entity]:
    """Tasks in needs-review that wait for a human's decision, oldest first."""
    if mode(cfg) == "auto":
        return []
    out = [t for t in board.tasks.values() if status_of(t) == "needs-review"
           and not approved(t, head_under_review(board, store, t.id), cfg)]
    return sorted(out, key=model.age_key)


class Decision(msgspec.Struct):
    task: str
    decision: str        # approved
    head: str


def approve(g: Grite, ref: str, note: str = "") -> Decision:
    """A human's approval of a task in review, for the head it has now: it enters the queue."""
    if trust.in_session(g.store):
        raise UsageError("an agent's session cannot approve work: approve it yourself, from "
                         "the repository's own work tree")
    tid = g.resolve(ref, TASK).id
    note = check_text(note, "approval note", one_line=False) if note else ""
    got: dict[str, str] = {}

    def build() -> list[Draft]:
        board = model.board(g)
        task = board.tasks[tid]
        if status_of(task) != "needs-review":
            raise Conflict(f"refused: task {tid[:7]} is {status_of(task)}; only a task in "
                           f"needs-review is approved (it waits for review after its agent "
                           f"finished)")
        head = head_under_review(board, g.store, tid)
        if not head:
            raise Conflict(f"refused: task {tid[:7]} has no commit to approve (no branch "
                           f"brat/{tid[:7]}… here and no merge request naming one)")
        got["head"] = head
        out = [Draft(tid, ev.SetFields({"approved_head": head, "approved_at": process.now_ms()}))]
        out.append(Draft(tid, ev.Comment(f"approved {head[:12]}" + (f": {note}" if note else ""))))
        return out

    g.append(build, summary("task.approve", tid))
    return Decision(tid, "approved", got["head"])


def parse_notes(notes: list[str]) -> list[str]:
    """`path:line: text` notes, checked: each names a place in the diff and says something."""
    if len(notes) > MAX_NOTES:
        raise UsageError(f"at most {MAX_NOTES} notes on one reply")
    out = []
    for raw in notes:
        m = NOTE.fullmatch(raw.strip())
        if not m:
            raise UsageError(f"a note is `path:line: text` (e.g. src/app.py:12: handle None), "
                             f"not {raw[:60]!r}")
        path = check_text(m["path"], "note path")
        out.append(f"{path}:{int(m['line'])}: {check_text(m['text'], 'note', one_line=False)}")
    return out


def reply_text(message: str, notes: list[str]) -> str:
    """The reply as the agent reads it: the message, then each note on its own line."""
    if not notes:
        return message
    return message + "\n\nNotes on the diff:\n" + "\n".join(f"- {n}" for n in notes)


__all__ = ["mode", "mode_warning", "head_under_review", "approved", "waiting", "approve",
           "Decision", "parse_notes", "reply_text"]
