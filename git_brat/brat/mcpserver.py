"""`git brat mcp`: the CLI's library calls as the tools of an MCP server on stdio.

Each tool answers what the same command's --json prints (the same library call, the same
encoding), and a refusal is an MCP tool error carrying the CLI's one-line message. Names carry
a `brat_` prefix of their own: some clients (cn) add none, and `status` alone would collide.

Writes follow the CLI's rules. Inside an agent's session (the witness sets $BRAT_SESSION, and
$BRAT_GATE in a sandbox) the server writes only to that session's task: a comment, fenced with
the session's lease (through the witness's gate in a sandbox, which reads go through too);
creating work, replying (a human's answer), approving and any other task's writes are refused.

The SDK (the `mcp` extra) is imported by build() alone: `git brat` never pays for it.
"""

from __future__ import annotations

import importlib
import os
from typing import Any, Callable

import msgspec

from git_brat.brat import board as model
from git_brat.brat import inbox as needs
from git_brat.brat import review, sessions, tasks, trust
from git_brat.brat import status as st
from git_brat.brat.witness import gate
from git_brat.errors import GriteError, UsageError

INSTRUCTIONS = (
    "git-brat coordinates AI coding agents on this git repository. brat_inbox lists what waits "
    "for the human (reviews, agents' questions, failures), each with the command that answers "
    "it; brat_status is the whole picture. Tasks live in convoys; a task an agent finished "
    "waits in needs-review until brat_task_approve (it lands) or brat_task_reply (request "
    "changes: the agent continues). Ids may be given by any unique prefix.")
# Tools over modules other roles add (the kb notes, grite's code index): each is offered only
# once its module exists in this git-brat (see optional_tools).
OPTIONAL_MODULES = {"brat_kb_search": "git_brat.brat.kb",
                    "brat_context_query": "git_brat.grite.context.index"}


def encoded(obj: Any) -> str:
    """As `--json` prints it (clikit.emit_json: msgspec's encoding)."""
    return msgspec.json.encode(obj).decode()


# -- where this runs --------------------------------------------------------------------------

def session_task(g) -> str | None:
    """The task of the agent's session this server runs in, None outside one."""
    if not (os.environ.get(gate.ENV) or trust.in_session(g.store)):
        return None
    own = os.environ.get("BRAT_TASK", "")
    if own:
        return own
    return sessions.current(g, g.state()).get("task", "")


def refuse_in_session(g, what: str) -> None:
    if session_task(g) is not None:
        raise UsageError(f"an agent's session cannot {what}: it reaches only its own task "
                         f"(brat_task_show, brat_task_comment)")


def own_task(g, ref: str | None) -> tuple[str, Any]:
    """(task id, speaking session) for a write: in a session only its own task."""
    own = session_task(g)
    if own is None:
        return sessions.task_of(g, g.state(), ref)
    tid = g.resolve(ref, model.TASK).id if ref else own
    if tid != own:
        raise UsageError(f"refused: this session works on task {own[:7]}; task {tid[:7]} is "
                         f"another's (a session reaches only its own task)")
    return sessions.task_of(g, g.state(), tid)


def detail(g, tid: str) -> model.TaskDetail:
    b = model.board(g)
    return b.task_detail(b.tasks[tid], model.history(g, tid))


# -- the tools: each the library call of one command ------------------------------------------

def brat_status(convoy: str = "") -> str:
    """Everything at once (`git brat status --json`): convoys, ready tasks, sessions, the merge
    queue, leases, what needs a human, recovery."""
    g = model.open_grite()
    b = model.board(g)
    return encoded(st.build(g, trust.load(g.store).config, convoy or None, b))


def brat_inbox() -> str:
    """What waits for the human (`git brat inbox --json`), each with the command answering it."""
    g = model.open_grite()
    return encoded(needs.items(g, trust.load(g.store).config))


def brat_task_list(convoy: str = "", status: list[str] | None = None) -> str:
    """Tasks, oldest first (`git brat task list --json`); filter by convoy and status."""
    g = model.open_grite()
    b = model.board(g)
    for s in status or []:
        if s not in model.STATES:
            raise UsageError(f"unknown status {s!r} (one of {', '.join(model.STATES)})")
    cid = g.resolve(convoy, model.CONVOY).id if convoy else None
    return encoded(b.task_list(cid, list(status or [])))


def brat_ready(convoy: str = "") -> str:
    """Queued tasks whose needs are all merged, in run order (`git brat task ready --json`)."""
    g = model.open_grite()
    b = model.board(g)
    cid = g.resolve(convoy, model.CONVOY).id if convoy else None
    return encoded([b.task_view(t) for t in b.ready(cid)])


def brat_task_show(task: str = "") -> str:
    """One task with its history and comments (`git brat task show --json`); in a session,
    without a task: its own."""
    path = os.environ.get(gate.ENV)
    if path:   # a sandboxed agent reads through its witness, as the CLI does
        return encoded(gate.ask(path, "show", task or None)["detail"])
    g = model.open_grite()
    tid, _ = sessions.task_of(g, g.state(), task or None)
    return encoded(detail(g, tid))


def brat_task_create(convoy: str, title: str, body: str = "", needs: list[str] | None = None,
                     priority: int = model.DEFAULT_PRIORITY, paths: list[str] | None = None) -> str:
    """Create a queued task in a convoy (`git brat task create --json`)."""
    g = model.open_grite()
    refuse_in_session(g, "create tasks")
    tid = tasks.create_task(g, convoy, title, body, list(needs or []), priority, list(paths or []))
    return encoded(detail(g, tid))


def brat_convoy_create(title: str, body: str = "") -> str:
    """Create an empty convoy (`git brat convoy create --json`)."""
    g = model.open_grite()
    refuse_in_session(g, "create convoys")
    cid = tasks.create_convoy(g, title, body)
    b = model.board(g)
    return encoded(b.convoy_detail(b.convoys[cid]))


def brat_task_reply(task: str, message: str, notes: list[str] | None = None) -> str:
    """Request changes on a task in review, or answer a blocked or failed one: it is re-queued
    with the message (and `path:line: text` notes on the diff) (`git brat task reply --json`)."""
    g = model.open_grite()
    refuse_in_session(g, "reply to a task (a reply is the human's answer)")
    tid = sessions.reply(g, task, message, list(notes or []))
    return encoded(detail(g, tid))


def brat_task_approve(task: str, message: str = "") -> str:
    """Approve a task in review at the commit it is at now: it enters the merge queue
    (`git brat task approve --json`)."""
    g = model.open_grite()
    refuse_in_session(g, "approve work")
    return encoded(detail(g, review.approve(g, task, message).task))


def brat_task_comment(message: str, task: str = "") -> str:
    """Comment on a task (`git brat task comment --json`); in a session only on its own task,
    through its witness."""
    path = os.environ.get(gate.ENV)
    g = None if path else model.open_grite()
    if path:
        return encoded(gate.ask(path, "comment", task or None, message)["detail"])
    tid, sess = own_task(g, task or None)
    sessions.comment(g, tid, sess, message)
    return encoded(detail(g, tid))


TOOLS: tuple[Callable[..., str], ...] = (
    brat_status, brat_inbox, brat_task_list, brat_ready, brat_task_show, brat_task_create,
    brat_convoy_create, brat_task_reply, brat_task_approve, brat_task_comment)


def brat_kb_search(words: str, forgotten: bool = False) -> str:
    """Knowledge notes holding every word given (`git brat kb search --json`)."""
    kb = importlib.import_module(OPTIONAL_MODULES["brat_kb_search"])
    return encoded(kb.search(model.open_grite(), words.split(), forgotten))


def brat_context_query(name: str, kind: str = "", under: str = "", limit: int = 20) -> str:
    """Symbols of the tracked files whose name holds NAME, exact names first
    (`git grite context query --json`)."""
    index = importlib.import_module(OPTIONAL_MODULES["brat_context_query"])
    ix = index.Index(model.open_grite().store)
    ix.ensure()
    return encoded(ix.query(name, limit, kind or None, under or None))


def optional_tools() -> list[Callable[..., str]]:
    """The tools whose module another role has added to this git-brat."""
    import importlib.util
    out = []
    for fn in (brat_kb_search, brat_context_query):
        try:   # present or not; a module that is present but broken fails loudly when called
            present = importlib.util.find_spec(OPTIONAL_MODULES[fn.__name__]) is not None
        except ModuleNotFoundError:   # its package is absent too
            present = False
        if present:
            out.append(fn)
    return out


# -- the server -------------------------------------------------------------------------------

def build():
    """The MCPServer with every tool; a GriteError becomes a tool error with its message."""
    from mcp.server import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError
    from git_brat import __version__

    def guarded(fn: Callable[..., str]) -> Callable[..., str]:
        import functools

        @functools.wraps(fn)
        def call(*args, **kwargs) -> str:
            try:
                return fn(*args, **kwargs)
            except GriteError as exc:
                raise ToolError(exc.message) from None
        return call

    server = MCPServer("brat", instructions=INSTRUCTIONS, version=__version__)
    for fn in (*TOOLS, *optional_tools()):
        server.tool(name=fn.__name__, structured_output=False)(guarded(fn))
    return server


def serve() -> None:
    build().run()


__all__ = ["build", "serve", "TOOLS", "OPTIONAL_MODULES", "INSTRUCTIONS", "encoded"]
