"""`git brat task …`: create, list, show, move through the state machine, comment, dependencies."""

from __future__ import annotations

import os

import click
import msgspec

from git_brat.brat import review
from git_brat.brat import sessions
from git_brat.brat import board as model
from git_brat.brat import tasks
from git_brat.brat.cli.common import board, needs_text, open_grite, shorts, task_rows
from git_brat.brat.cli.common import state as cli_state
from git_brat.brat.witness import gate
from git_brat.brat import spend
from git_brat.clikit import emit, json_option, table, when
from git_brat.errors import UsageError


def _detail(g, tid: str, b=None) -> model.TaskDetail:
    b = b or board(g)
    return b.task_detail(b.tasks[tid], model.history(g, tid))


def _detail_text(g, d: model.TaskDetail, b=None) -> str:
    b = b or board(g)
    short = shorts(b)
    lines = [f"{d.id}  [{d.status}]" + ("  ready" if d.ready else ""), d.title, "",
             f"convoy:    {short.get(d.convoy, d.convoy[:7])} "
             f"({b.convoys[d.convoy].get('title', '') if d.convoy in b.convoys else '?'})",
             f"priority:  p{d.priority}"]
    if d.step:
        lines.append(f"step:      {d.step}")
    if d.needs:
        lines.append(f"needs:     {needs_text(b, d.needs, short)}")
    if d.dependents:
        lines.append(f"needed by: {needs_text(b, d.dependents, short)}")
    if d.paths:
        lines.append(f"paths:     {', '.join(d.paths)}")
    lines += [f"next:      {', '.join(d.allowed) or 'nothing (final)'}",
              f"author:    {d.author}", f"created:   {when(d.created_at)}"]
    if d.reason:
        lines.append(f"reason:    {d.reason}")
    if d.approved_head:
        lines.append(f"approved:  {d.approved_head[:12]} (lands once the merge check passes)")
    if d.spent is not None and d.spent.sessions:
        lines.append(f"spent:     {spend.text(d.spent)}")

    if d.body:
        lines += ["", d.body.rstrip()]
    if d.history:
        lines += ["", "history:"]
        for h in d.history:
            move = f"{h.from_status} -> {h.to_status}" if h.from_status else f"created {h.to_status}"
            extra = ("  FORCED" if h.forced else "") + (f"  ({h.reason})" if h.reason else "")
            lines.append(f"  {when(h.at)}  {move:<26} {h.actor}{extra}")
    for c in d.comments:
        lines += ["", f"--- {c.author}, {when(c.created_at)}", c.body]
    return "\n".join(lines)


def _gated(op: str, task_id: str | None, message: str, as_json: bool, said: str) -> bool:
    """In a sandboxed session ($BRAT_GATE set): ask the witness, which writes for the agent;
    False outside one."""
    path = os.environ.get(gate.ENV)
    if not path:
        return False
    answer = gate.ask(path, op, task_id, message)
    d = msgspec.convert(answer["detail"], model.TaskDetail)
    if as_json:
        emit(True, d, lambda: None)
    elif op == "show":
        emit(False, None, lambda: _plain_text(d))
    else:
        emit(False, None, lambda: said.format(tid=d.id[:7], sid=answer["session"][:7]))
    return True


def _plain_text(d: model.TaskDetail) -> str:
    """A task as a sandboxed agent sees it (through the witness, without the board)."""
    lines = [f"{d.id}  [{d.status}]", d.title, "", f"next:      {', '.join(d.allowed) or '-'}"]
    if d.paths:
        lines.append(f"paths:     {', '.join(d.paths)}")
    if d.body:
        lines += ["", d.body.rstrip()]
    for c in d.comments:
        lines += ["", f"--- {c.author}, {when(c.created_at)}", c.body]
    return "\n".join(lines)


def _done(g, tid: str, as_json: bool, message: str) -> None:
    if as_json:
        emit(True, _detail(g, tid), lambda: None)
    else:
        emit(False, None, lambda: message)


@click.group()
def task():
    """Create, list, show and move tasks."""


@task.command()
@click.argument("title")
@click.option("--convoy", "convoy_id", required=True, help="The convoy the task belongs to.")
@click.option("-b", "--body", default="", help="Longer description (the agent's instructions).")
@click.option("--needs", multiple=True, metavar="TASK",
              help="A task that must be merged first (repeatable).")
@click.option("--priority", type=click.IntRange(0, 4), default=model.DEFAULT_PRIORITY,
              show_default=True, help="0 is the most urgent.")
@click.option("--paths", multiple=True, metavar="GLOB",
              help="Files the task is expected to touch (repeatable).")
@json_option
def create(title, convoy_id, body, needs, priority, paths, as_json):
    """Create a queued task and print its id."""
    g = open_grite()
    tid = tasks.create_task(g, convoy_id, title, body, list(needs), priority, list(paths))
    _done(g, tid, as_json, tid)


@task.command("list")
@click.option("--convoy", "convoy_id", help="Only tasks of this convoy.")
@click.option("--status", "statuses", multiple=True, type=click.Choice(model.STATES),
              help="Only tasks in this status (repeatable).")
@click.option("--all", "everything", is_flag=True,
              help="Include tasks merged or dropped longer ago than grite.coldAfterDays.")
@json_option
def list_(convoy_id, statuses, everything, as_json):
    """Tasks, oldest first."""
    g = open_grite()
    b = board(g, everything)
    cid = g.resolve(convoy_id, model.CONVOY).id if convoy_id else None
    views = b.task_list(cid, list(statuses))
    emit(as_json, views, lambda: task_rows(views, shorts(b)))


@task.command()
@click.option("--convoy", "convoy_id", help="Only tasks of this convoy.")
@json_option
def ready(convoy_id, as_json):
    """Queued tasks whose needs are all merged, in run order (priority, then age)."""
    g = open_grite()
    b = board(g)
    cid = g.resolve(convoy_id, model.CONVOY).id if convoy_id else None
    views = [b.task_view(t) for t in b.ready(cid)]
    emit(as_json, views, lambda: task_rows(views, shorts(b), "no ready tasks"))


def _here(g, task_id):
    """(task id, speaking session) from TASK_ID, or from the session work tree we are in."""
    return sessions.task_of(g, cli_state(g), task_id)


@task.command()
@click.argument("task_id", required=False)
@json_option
def show(task_id, as_json):
    """One task: status, needs, history of transitions, comments.

    Without TASK_ID, inside a session's work tree: that session's task.
    """
    if _gated("show", task_id, "", as_json, ""):
        return
    g = open_grite()
    tid, _sess = _here(g, task_id)
    b = board(g)
    d = _detail(g, tid, b)
    emit(as_json, d, lambda: _detail_text(g, d, b))


@task.command()
@click.argument("task_id", required=False)
@click.option("-m", "--message", default="", help="What was done (recorded as a comment).")
@json_option
def done(task_id, message, as_json):
    """From an agent's session: the task is finished. The witness then sends its commits to review.

    Fenced with the session's lease: an agent whose lease has passed to another session is refused.
    """
    if _gated("done", task_id, message, as_json, "{tid}: done reported by session {sid}"):
        return
    g = open_grite()
    tid, sess = _here(g, task_id)
    if sess is None:
        raise UsageError("`task done` is said from a session's work tree; to move a task by "
                         f"hand: git brat task update {tid[:7]} --status needs-review")
    sessions.report_done(g, sess, message)
    _done(g, tid, as_json, f"{tid[:7]}: done reported by session {sess.id[:7]}")


@task.command()
@click.argument("task_id", required=False)
@click.option("-m", "--message", required=True, help="What is needed from a human.")
@json_option
def block(task_id, message, as_json):
    """Block the task with a reason (from a session: fenced with its lease)."""
    if _gated("block", task_id, message, as_json, "{tid}: blocked"):
        return
    g = open_grite()
    tid, sess = _here(g, task_id)
    if sess is None:
        tasks.update_task(g, tid, "blocked", reason=message)
    else:
        sessions.report_block(g, sess, message)
    _done(g, tid, as_json, f"{tid[:7]}: blocked")


@task.command()
@click.argument("task_id")
@click.option("-m", "--message", required=True, help="Your answer to the agent.")
@click.option("--note", "notes", multiple=True, metavar="PATH:LINE: TEXT",
              help="A note on a line of the diff (repeatable), e.g. 'src/app.py:12: handle None'.")
@json_option
def reply(task_id, message, notes, as_json):
    """Request changes (needs-review), or answer a failed or blocked attempt: re-queue the task.

    The next session continues on the same branch; an engine that can resume its conversation
    gets the message (and the notes) as its next prompt, others a fresh prompt that starts with
    it. Any approval is withdrawn; a session that comes back without a new commit is shown as
    having changed nothing, and the task is blocked for you instead of returning to review.
    """
    g = open_grite()
    tid = sessions.reply(g, task_id, message, list(notes))
    _done(g, tid, as_json, f"{tid[:7]}: re-queued with your reply")


@task.command()
@click.argument("task_id")
@click.option("-m", "--message", default="", help="A note recorded with the approval.")
@json_option
def approve(task_id, message, as_json):
    """Approve a task in review: the commit it is at now enters the merge queue.

    The approval is for that commit: new commits on the branch need a new approval. With
    refinery.review = "auto" (and a check) no approval is needed.
    """
    g = open_grite()
    d = review.approve(g, task_id, message)
    _done(g, d.task, as_json, f"{d.task[:7]}: approved at {d.head[:12]}; it is in the merge "
                              f"queue (`git brat refinery run --once` lands it)")


@task.command()
@click.argument("task_id")
@click.option("--status", type=click.Choice(model.STATES), help="Move the task to this status.")
@click.option("--force", is_flag=True, help="Allow a move the state machine refuses (recorded).")
@click.option("-m", "--message", "reason", default="", help="Why (recorded with the change).")
@click.option("--title", default=None)
@click.option("--body", default=None)
@click.option("--priority", type=click.IntRange(0, 4), default=None)
@json_option
def update(task_id, status, force, reason, title, body, priority, as_json):
    """Change a task in one event: its status (validated), title, body or priority."""
    g = open_grite()
    u = tasks.update_task(g, task_id, status, force, reason, title, body, priority)
    msg = (f"{u.id[:7]}: {u.from_status} -> {u.to_status}" + (" (forced)" if u.forced else "")
           if status else f"updated {u.id[:7]}")
    _done(g, u.id, as_json, msg)


@task.command()
@click.argument("task_id", required=False)
@click.option("-m", "--message", required=True, help="The comment text.")
@json_option
def comment(task_id, message, as_json):
    """Add a comment to a task (without TASK_ID: the task of the session work tree here)."""
    if _gated("comment", task_id, message, as_json, "commented on {tid}"):
        return
    g = open_grite()
    tid, sess = _here(g, task_id)
    sessions.comment(g, tid, sess, message)
    _done(g, tid, as_json, f"commented on {tid[:7]}")


@task.group()
def dep():
    """What a task needs: add, remove, list."""


@dep.command("add")
@click.argument("task_id")
@click.option("--on", "others", multiple=True, required=True, metavar="TASK",
              help="A task it needs (repeatable).")
@json_option
def dep_add(task_id, others, as_json):
    """TASK needs each --on task merged first. A cycle is refused."""
    g = open_grite()
    tid, targets = tasks.dep_add(g, task_id, list(others))
    emit(as_json, {"task": tid, "needs": targets},
         lambda: f"{tid[:7]} needs {', '.join(t[:7] for t in targets)}")


@dep.command("remove")
@click.argument("task_id")
@click.option("--on", "others", multiple=True, required=True, metavar="TASK",
              help="A task it no longer needs (repeatable).")
@json_option
def dep_remove(task_id, others, as_json):
    """Drop needs from TASK."""
    g = open_grite()
    tid, targets = tasks.dep_remove(g, task_id, list(others))
    emit(as_json, {"task": tid, "removed": targets},
         lambda: f"{tid[:7]} no longer needs {', '.join(t[:7] for t in targets)}")


@dep.command("list")
@click.argument("task_id")
@json_option
def dep_list(task_id, as_json):
    """What TASK needs, and what needs it."""
    g = open_grite()
    b = board(g)
    d = b.task_detail(b.tasks[g.resolve(task_id, model.TASK).id])
    short = shorts(b)
    out = {"task": d.id, "needs": d.needs, "needed_by": d.dependents}

    def human():
        rows = [[label, short[i], model.status_of(b.tasks[i]), b.tasks[i].get("title", "")]
                for label, ids in (("needs", d.needs), ("needed by", d.dependents)) for i in ids]
        return table(rows, [9, 7, 12, None]) if rows else "no dependencies"
    emit(as_json, out, human)


def register(group: click.Group) -> None:
    group.add_command(task)
