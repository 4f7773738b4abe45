"""Sessions: the record of one engine run on one task, and what an agent says from inside it."""

from __future__ import annotations

import os
from datetime import datetime
from typing import Any

import msgspec

from git_brat import process
from git_brat.brat import board as model
from git_brat.brat import layout
from git_brat.brat import review
from git_brat.brat import spend
from git_brat.brat import tasks
from git_brat.brat.board import SESSION, TASK, Board, status_of
from git_brat.grite.model import events as ev
from git_brat.grite import locks
from git_brat.errors import Conflict, GriteError, NotFound, UsageError
from git_brat.grite.issues import check_text, summary
from git_brat.grite.log.wal import Draft
from git_brat.grite.repo import Grite
from git_brat.grite.model.state import Entity, State, iso

LIVE = ("starting", "running")
ENDED = model.SESSION_ENDED
FAILED = ("failed", "timed-out")


def resource(tid: str) -> str:
    """The lease a session holds on its task: exactly one session anywhere runs a task."""
    return f"task:{tid}"


def holder_id(sid: str) -> str:
    return f"session:{sid}"


def witness_gone(store, s: Entity, host: str | None = None) -> int:
    """The pid of the session's witness when this clone started it on this host and it is
    gone, else 0.

    Recovery and status ask this one question: on its own host a dead witness is known at
    once, without waiting for its lease to run out. The pid comes from this clone's own local
    record, never from the log (a record from the log may name anyone's process)."""
    local = read_local(store, s.id, s.get("task", ""))
    witness = process_of(local, "witness") if local is not None else None
    here = host or process.hostname()
    if witness is not None and witness.host == here and not process.same_process(witness):
        return witness.pid
    return 0


def branch_for(tid: str) -> str:
    return f"brat/{tid}"


def log_path(g: Grite, sid: str) -> str:
    """Where a session's log is shown to be: "" for an id that can name no file (a hostile
    record is shown without a log rather than stop a listing)."""
    try:
        return layout.session_log(g.store, sid)
    except UsageError:
        return ""


class SessionDetail(msgspec.Struct):
    id: str
    task: str
    status: str
    engine: str
    engine_version: str
    engine_session: str        # the engine's own conversation id ("" if it has none)
    resumed: str               # the conversation this session continued ("" for a fresh one)
    argv: list[str]            # with the prompt shown as <prompt>
    pid: int
    host: str
    worktree: str
    branch: str
    base: str
    head: str
    commits: int               # commits on the branch not on the target, at the end
    attempt: int
    started_at: datetime
    ended_at: datetime | None
    exit_code: int | None
    reason: str                # why it ended
    salvaged: str              # commit the witness made of work left uncommitted ("" if none)
    log: str
    output_tail: str
    kept: list[str] = []       # refs its commits that no branch held were kept on
    sandbox: str = ""          # what it ran in: bwrap or none ("" before sandboxes existed)
    confinement: str = ""      # what its sandbox confined: capabilities, namespaces, network
    spent: spend.Spent | None = None   # what it reported spending (None: nothing recorded)


def detail(g: Grite, e: Entity) -> SessionDetail:
    ended = e.get("ended_at")
    return SessionDetail(
        e.id, e.get("task", ""), e.get("status", ""), e.get("engine", ""),
        e.get("engine_version", ""), e.get("engine_session", ""), e.get("resumed", ""),
        list(e.get("argv", [])), e.get("pid", 0), e.get("host", ""), e.get("worktree", ""),
        e.get("branch", ""), e.get("base", ""), e.get("head", ""), e.get("commits", 0),
        e.get("attempt", 1), iso(e.created_at), iso(ended) if ended else None, e.get("exit_code"),
        e.get("reason", ""), e.get("salvaged", ""), log_path(g, e.id), e.get("output_tail", ""),
        [k for k in (e.get("kept") if isinstance(e.get("kept"), list) else [])
         if isinstance(k, str)],
        e.get("sandbox") if e.get("sandbox") in ("bwrap", "none") else "",
        _confinement(e.get("confinement")),
        spend.view([e]) if spend.of_session(e) is not None else None)


def _confinement(value) -> str:
    """The session's word on its sandbox: plain text, one short line (the log is anyone's)."""
    if not isinstance(value, str):
        return ""
    return "".join(c for c in value[:300] if c.isprintable())


def of_task(board: Board, tid: str) -> list[Entity]:
    """The task's sessions, oldest first."""
    return sorted(board.state.of_group(SESSION, tid), key=model.age_key)


def all_sessions(board: Board, statuses: tuple[str, ...] | None = None) -> list[Entity]:
    """Sessions in statuses (None: any, cold ones included), oldest first."""
    if statuses is None:
        pool = board.state.of_kind(SESSION)
    elif set(statuses) & set(ENDED):
        pool = board.hot(SESSION, ENDED)
    else:   # live ones only: the index leaves every ended session out, however new
        pool = board.state.of_kind(SESSION, ENDED, model.NOT_SETTLED)
    return sorted((s for s in pool if statuses is None or s.get("status") in statuses),
                  key=model.age_key)


def find(g: Grite, ref: str) -> Entity:
    return g.resolve(ref, SESSION)


# -- which session is this? ----------------------------------------------------------

def current(g: Grite, state: State) -> Entity:
    """The session this command runs in: $BRAT_SESSION, else the session whose work tree the
    current directory is in (any subdirectory of it)."""
    sid = os.environ.get("BRAT_SESSION", "")
    if sid:
        ent = state.entities.get(sid)
        if ent is None or ent.kind != SESSION:
            raise NotFound(f"BRAT_SESSION={sid[:12]} names no session in this repository")
        return ent
    top = g.store.toplevel()
    root = os.path.realpath(layout.worktrees(g.store))
    here = os.path.realpath(top) if top else ""
    if here.startswith(root + os.sep):   # session work trees are made there and nowhere else
        # Named by its task; whose it is, this clone's own records say (a record in the log
        # may name any work tree).
        tid = os.path.relpath(here, root).split(os.sep)[0]
        mine = [s for s in state.of_kind(SESSION, ENDED, g.cold_before)
                if s.get("task") == tid and read_local(g.store, s.id, tid) is not None]
        if mine:
            return max(mine, key=model.age_key)
    raise UsageError("no task given, and this is not a session's work tree: name the task, or "
                     "run this inside the work tree a witness session made "
                     "(.git/brat/worktrees/<task>)")


def task_of(g: Grite, state: State, ref: str | None) -> tuple[str, Entity | None]:
    """(task id, the session speaking for it or None): from ref, or from the session here."""
    try:
        sess = current(g, state)
    except UsageError:
        if ref is None:
            raise
        sess = None
    if ref is None:
        return sess.get("task", ""), sess
    tid = g.resolve(ref, TASK).id
    return tid, sess if sess is not None and sess.get("task") == tid else None


def _lost(g: Grite, sess: Entity, why: str) -> Conflict:
    tid = sess.get("task", "")
    lease = locks.current(g, resource(tid))
    now = ""
    if lease is not None and lease.holder.id != holder_id(sess.id):
        who = lease.holder.session or lease.holder.id
        now = f": its lease passed to session {who[:7]} (token {lease.token})"
    elif lease is not None:
        now = f": its lease is {locks.judge(lease, process.now_ms(), 0)} (token {lease.token})"
    return Conflict(f"rejected: session {sess.id[:7]} no longer holds task {tid[:7]}{now}; "
                    f"nothing was written (its commits on {branch_for(tid)} are kept) [{why}]")


def fenced(g: Grite, sess: Entity, build, text: str) -> None:
    """Append as the session, fenced with its lease token: a revived old agent is refused here,
    and if its lease moves on before the write lands, replay rejects the write."""
    tid = sess.get("task", "")
    st = locks.settings(g.store)
    if st.remote:
        try:
            locks.status(g, st, resource(tid))   # mirror the lock remote's record first
        except Exception:
            pass   # unreachable: judge by what this clone knows (replay fences it anyway)
    if sess.get("status") not in LIVE:
        raise _lost(g, sess, f"the session has ended: {sess.get('status')}")
    try:
        locks.append_fenced(g, resource(tid), build, text, holder_id=holder_id(sess.id))
    except (Conflict, NotFound) as exc:
        raise _lost(g, sess, exc.message) from None


# -- what an agent says ---------------------------------------------------------------

def report_done(g: Grite, sess: Entity, message: str) -> None:
    tid = sess.get("task", "")
    if message:
        check_text(message, "message", one_line=False)

    def build() -> list[Draft]:
        out = [Draft(tid, ev.SetFields({"done_by": sess.id, "done_message": message,
                                        "via": sess.id}))]
        if message:
            out.append(Draft(tid, ev.Comment(f"done: {message}", via=sess.id)))
        return out
    fenced(g, sess, build, summary("task.done", tid))


def report_block(g: Grite, sess: Entity, message: str) -> None:
    tid = sess.get("task", "")
    check_text(message, "message", one_line=False)

    def build() -> list[Draft]:
        board = model.board(g)
        return [tasks.move(board, tid, "blocked", message.strip().splitlines()[0][:200],
                           blocked_by=sess.id, via=sess.id),
                Draft(tid, ev.Comment(f"blocked: {message}", via=sess.id))]
    fenced(g, sess, build, summary("task.block", tid))


def comment(g: Grite, tid: str, sess: Entity | None, message: str) -> None:
    if sess is None:
        tasks.comment(g, tid, message)
        return
    check_text(message, "comment", one_line=False)
    fenced(g, sess, [Draft(tid, ev.Comment(message, via=sess.id))], summary("task.comment", tid))


REPLY_FROM = ("needs-review", "failed", "blocked")


def reply(g: Grite, ref: str, message: str, notes: list[str] = ()) -> str:
    """A human's answer to an attempt (request changes): recorded, any approval withdrawn, and
    the task re-queued to continue on its branch. The head it answered is kept: a session that
    comes back with that same head changed nothing (see witness.verdict)."""
    tid = g.resolve(ref, TASK).id
    message = review.reply_text(check_text(message, "reply", one_line=False),
                                review.parse_notes(list(notes)))
    rid = ev.new_entity_id()[:16]

    def build() -> list[Draft]:
        board = model.board(g)
        old = status_of(board.tasks[tid])
        if old not in REPLY_FROM:
            raise Conflict(f"refused: task {tid[:7]} is {old}; a reply re-queues a task that is "
                           f"{', '.join(REPLY_FROM)}")
        head = review.head_under_review(board, g.store, tid)
        out = [Draft(tid, ev.Comment(f"reply: {message}")),
               tasks.move(board, tid, "queued", "a human replied", reply=message, reply_id=rid,
                          failures=0, retry_after=0, reply_head=head, approved_head="")]
        for m in board.state.of_group(model.MERGE, tid):
            if m.get("status") in ("queued", ""):
                out.append(Draft(m.id, ev.SetFields({"status": "superseded",
                                                     "reason": "the task was re-queued by a reply"})))
        return out
    g.append(build, summary("task.reply", tid))
    return tid


def request_stop(g: Grite, sess: Entity, by: str) -> None:
    if sess.get("status") not in LIVE:
        raise Conflict(f"session {sess.id[:7]} has already ended ({sess.get('status')})")
    g.append([Draft(sess.id, ev.SetFields({"stop_requested": by}))],
             summary("session.stop", sess.id))


def pending_reply(task: Entity, sessions: list[Entity]) -> tuple[str, str]:
    """(reply id, text) of a reply no session has taken up yet, or ("", "")."""
    rid = task.get("reply_id", "")
    if not rid or any(s.get("reply_id") == rid for s in sessions):
        return "", ""
    return rid, task.get("reply", "")


# -- this clone's own records: what recovery and the deacon may act on -------------------------

class LocalRecord(msgspec.Struct, kw_only=True):
    """What this clone wrote when it started a session: the only facts signals, commits and
    file reads are based on. A session record from the log is written by whoever can push: it
    may name any host, pid, start time or path, so none of those is ever acted on."""
    session: str
    task: str
    worktree: str              # layout.worktree(task) when it was made, checked on reading
    host: str
    witness_pid: int
    witness_start: int
    pid: int = 0               # the agent's (setup's, then the engine's) process group leader
    pid_start: int = 0
    ended: bool = False        # its end was recorded by its own witness


def write_local(store, rec: LocalRecord) -> None:
    from git_brat.files import atomic_write
    os.makedirs(layout.session_dir(store, rec.session), exist_ok=True)
    atomic_write(layout.session_record(store, rec.session), msgspec.json.encode(rec))


def read_local(store, sid: str, tid: str) -> LocalRecord | None:
    """This clone's record of session sid on task tid; None when it has none (the session ran
    elsewhere, or the record in the log is not one this clone wrote)."""
    try:
        path = layout.session_record(store, sid)
        want = layout.worktree(store, tid)
        with open(path, "rb") as f:
            rec = msgspec.json.decode(f.read(), type=LocalRecord)
    except (UsageError, OSError, msgspec.DecodeError, msgspec.ValidationError):
        return None
    if rec.session != sid or rec.task != tid or rec.worktree != want:
        return None
    return rec


def process_of(rec: LocalRecord, which: str) -> process.Proc | None:
    """The recorded witness or agent as a process to check or signal; None without a start
    time (a pid alone may since name anyone's process: it is never signalled)."""
    pid, start = (rec.witness_pid, rec.witness_start) if which == "witness" else \
        (rec.pid, rec.pid_start)
    if pid <= 1 or not start:
        return None
    return process.Proc(pid, start, rec.host)


class Kept(msgspec.Struct):
    commit: str
    ref: str                   # the branch it moved (refs/heads/brat/<task>) or a kept ref


def keep_commits(store, tid: str, path: str) -> list[Kept]:
    """Before a task's work tree goes: every commit reachable from its HEAD or HEAD's reflog
    that no branch holds is kept: brat/<task> moves onto it when it descends from the branch
    (the agent committed on a detached HEAD), else it stays under refs/brat/kept/<task>/<n>."""
    from git_brat.git import worktree as git_worktree
    if not os.path.isdir(path):
        return []
    tips = git_worktree.unheld_tips(store.common_dir, git_worktree.reflog_heads(path))
    out: list[Kept] = []
    branch = f"refs/heads/{branch_for(tid)}"
    n = len(store.refs.under(f"refs/brat/kept/{tid}/".encode()))
    for tip in tips:
        cur = store.refs.branch_tip(branch_for(tid))
        if cur and store.objects.is_ancestor(cur, tip) and \
                git_worktree.set_ref(store.common_dir, branch, tip, cur):
            out.append(Kept(tip, branch))
            continue
        while not git_worktree.set_ref(store.common_dir, layout.kept_ref(tid, n), tip, ""):
            n += 1
            if n > 10000:
                break
        else:
            out.append(Kept(tip, layout.kept_ref(tid, n)))
            n += 1
    return out


def adopt_head(store, tid: str, path: str) -> str:
    """An agent that committed on a branch of its own or a detached HEAD, starting from
    brat/<task>: the task's branch moves onto that work (the commit, or "")."""
    from git_brat.git import worktree as git_worktree
    branch = branch_for(tid)
    if not os.path.isdir(path) or git_worktree.on_branch(path) == branch:
        return ""
    try:
        head = git_worktree.head(path)
    except GriteError:
        return ""
    cur = store.refs.branch_tip(branch)
    if not cur or head == cur or not store.objects.is_ancestor(cur, head):
        return ""
    return head if git_worktree.set_ref(store.common_dir, f"refs/heads/{branch}", head, cur) \
        else ""


def remove_worktree(store, tid: str) -> list[Kept]:
    """Remove task tid's work tree (forced: its work is committed or not wanted), keeping first
    every commit only it holds. The removal is marked before it starts and unmarked once done,
    so a removal cut short (Ctrl-C, a power cut) is known and finished, never taken for work."""
    import shutil
    from git_brat.git import worktree as git_worktree
    path, mark = layout.worktree(store, tid), layout.removal_mark(store, tid)
    os.makedirs(os.path.dirname(mark), exist_ok=True)
    with open(mark, "w") as f:
        f.write(path + "\n")
        f.flush()
        os.fsync(f.fileno())
    kept = keep_commits(store, tid, path)
    git_worktree.remove(store.common_dir, path)
    if os.path.islink(path):
        os.unlink(path)
    elif os.path.isdir(path):   # git no longer knows it (its admin files went first)
        shutil.rmtree(path)
    git_worktree.prune(store.common_dir)
    os.unlink(mark)
    return kept


def removal_pending(store, tid: str) -> bool:
    """Whether a removal of task tid's work tree started and never finished."""
    try:
        return os.path.exists(layout.removal_mark(store, tid))
    except UsageError:
        return False


def fields_of(e: Entity, *names: str) -> dict[str, Any]:
    return {n: e.get(n) for n in names}


__all__ = ["SessionDetail", "detail", "current", "task_of", "report_done", "report_block",
           "comment", "reply", "request_stop", "of_task", "resource", "holder_id", "branch_for",
           "log_path", "LIVE", "ENDED", "FAILED", "LocalRecord", "write_local", "read_local",
           "process_of", "Kept", "keep_commits", "adopt_head", "remove_worktree",
           "removal_pending"]
