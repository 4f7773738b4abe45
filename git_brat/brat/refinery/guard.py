"""A session's end as the merge queue sees it: its branch published, the target not moved by it."""

from __future__ import annotations

import os
from typing import Callable

import msgspec

from git_brat.brat.board import MERGE
from git_brat.errors import GriteError
from git_brat.git import merge, worktree
from git_brat.git.store import Store
from git_brat.grite.repo import Grite

PUSH_TIMEOUT = 60.0
# The end of the author email the witness gives every agent (brat/witness/session.py).
AGENT_EMAIL_SUFFIX = ".agent@git-brat.invalid"


class TargetMove(msgspec.Struct):
    """The target branch moved, during a session, onto that session's own commits."""
    target: str
    old: str                       # where it was (the session's base)
    new: str                       # where the agent put it
    followed: list[str] = []       # checkouts of the target brought along (index and files)
    undone: bool = False           # the move was taken back (a checkout could not follow)
    detail: str = ""


def _agent_made(store: Store, sha: str) -> bool:
    """A commit authored in a session's work tree (the witness gives agents that identity)."""
    try:
        author = store.objects.read_commit(sha.encode()).author
    except GriteError:
        return False
    return author.rstrip().rpartition("<")[2].rstrip(">").endswith(AGENT_EMAIL_SUFFIX)


def moved_by_session(g: Grite, target: str, tip_at_start: str, base: str, head: str,
                     session_tree: str = "") -> TargetMove | None:
    """Whether the target moved during the session (from tip_at_start; "": not known, not
    judged) onto the session's own work: a commit of its branch beyond its base, authored in a
    session's work tree, that the refinery did not land. (A branch that merged the target
    meanwhile holds the target too, but then the target moved by the refinery's hand or a
    person's, or not at all.) Then every checkout of the target (the user's) is made
    consistent: its index and files follow the move when they are clean, else the move is
    taken back, leaving the work on the branch."""
    store = g.store
    ref = f"refs/heads/{target}"
    new = store.refs.branch_tip(target)
    if not new or not tip_at_start or new == tip_at_start or not base or not head or \
            new == base or not store.objects.is_ancestor(new, head) or \
            store.objects.is_ancestor(new, base) or not _agent_made(store, new):
        return None
    if any(m.get("merged_commit") == new for m in g.state().of_kind(MERGE)):
        return None
    move = TargetMove(target, base, new)
    own = os.path.realpath(session_tree) if session_tree else ""
    for wt in worktree.listing(store.common_dir):
        path = wt.get("worktree", "")
        if wt.get("branch") != ref or "bare" in wt or os.path.realpath(path) == own:
            continue
        if merge.follow_ref_move(path, base, new).ok:
            move.followed.append(path)
        elif store.refs.cas(ref.encode(), new.encode(), base.encode(),
                            f"brat: an agent moved {target}; taken back".encode()):
            move.undone = True
            break
    short = new[:12]
    if move.undone:
        move.detail = (f"the agent moved {target} itself (to {short}, its own work); it was "
                       f"taken back because {target} is checked out with local changes. The "
                       f"work is on its branch: retry it to merge it through the queue")
    else:
        where = f"; {', '.join(move.followed)} updated to match" if move.followed else ""
        move.detail = (f"the agent moved {target} itself to {short} (its own work, not "
                       f"checked by the refinery){where}. Review {target}, then retry the task "
                       f"to record it, or reset {target} to {base[:12]}")
    return move


def intervention(verdict, move: TargetMove, tid: str):
    """A session's verdict (witness.verdict.Verdict) when its agent moved the target: not a
    merge request but a blocked task a human decides on (keep it: retry; or reset the target)."""
    if not verdict.merge:
        return verdict
    return msgspec.structs.replace(verdict, task_to="blocked", merge=False,
                                   task_reason=move.detail, task_fields={
                                       **verdict.task_fields, "needs_human": move.detail,
                                       "resolve_command": f"git brat refinery retry {tid[:7]}"})


def push_task_branch(g: Grite, remote: str, branch: str, head: str,
                     say: Callable[[str], None]) -> bool:
    """A finished task's branch pushed to the remote this clone syncs with, after the log that
    asks for its merge (a hub's refinery merges it as it arrives; another clone's can only
    merge what it can fetch); fast-forward only, so a branch moved there is not overwritten.
    Whether it was pushed; a failure is said, as a warning."""
    from git_brat.grite.sync import exchange as sync
    if remote not in sync.synced_remotes(g.store):
        return False
    ok, why = g.store.remote.push_task_branch(remote, head, branch, PUSH_TIMEOUT)
    if not ok:
        say(f"warning: could not push {branch} to {remote}: {why}")
    return ok


__all__ = ["TargetMove", "moved_by_session", "intervention", "push_task_branch"]
