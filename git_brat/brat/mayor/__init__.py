"""The Mayor: asks an engine for a plan in the repository's context; creates it in one batch."""

from __future__ import annotations

import os
import shutil
import uuid
from datetime import datetime

import msgspec

from git_brat import process, redact
from git_brat.brat import engines
from git_brat.brat import board as model
from git_brat.brat import layout
from git_brat.brat import tasks
from git_brat.brat import trust
from git_brat.brat.mayor import confine
from git_brat.brat.engines import runner
from git_brat.brat.config import Config
from git_brat.brat.mayor.context import EXCHANGE, exchanges, prompt, work_tree_status
from git_brat.brat.mayor.plan import Plan, PlanError, TasksPlan, parse
from git_brat.grite.model import events as ev
from git_brat.grite.cache.projection import actor_names
from git_brat.errors import Conflict, GriteError, NotFound, UsageError
from git_brat.files import atomic_write, private_dir
from git_brat.grite.issues import check_text, summary
from git_brat.grite.log.wal import Draft
from git_brat.grite.repo import Grite
from git_brat.grite.model.state import Entity, State, iso

KIND = "mayor"
RECORD_CHARS = 16000       # answer text kept in the log (the whole answer stays in <n>.txt)
ARG_MAX = 120 * 1024       # Linux takes at most 128 KiB in one argument


class MayorError(GriteError):
    """The engine failed, timed out or gave no valid plan; nothing was created."""


class PlannedTask(msgspec.Struct):
    key: str
    id: str | None             # set once created
    title: str
    body: str
    priority: int
    paths: list[str]
    needs: list[str]           # keys of tasks in this plan


class Answer(msgspec.Struct):
    """A validated answer, not yet created."""
    conversation: str | None   # None: a new conversation starts when this is created
    exchange: int              # local run number: .git/brat/mayor/<n>/ and <n>.txt
    answer_file: str
    engine: str
    session_id: str
    resumed: bool
    question: str
    answer: str
    kind: str                  # tasks | workflow
    workflow: str | None
    vars: dict[str, str]
    title: str
    body: str
    tasks: list[PlannedTask]
    touched: list[str] = []    # `git status` lines the engine changed (it was asked not to)
    engine_why: str = ""       # where the engine came from, said to the user


class AskResult(msgspec.Struct):
    conversation: str | None
    exchange: int
    answer_file: str
    engine: str
    session_id: str
    resumed: bool
    kind: str
    workflow: str | None
    vars: dict[str, str]
    convoy: str | None
    title: str
    body: str
    tasks: list[PlannedTask]
    dry_run: bool = False
    created: bool = False
    declined: bool = False
    touched: list[str] = []
    engine_why: str = ""       # e.g. "mayor.engine", or why it differs from the conversation's


class Created(msgspec.Struct):
    convoy: str
    title: str
    workflow: str | None
    tasks: list[str]


class ExchangeView(msgspec.Struct):
    conversation: str
    number: int                # 1-based within its conversation
    at: datetime
    actor: str
    engine: str
    session_id: str
    resumed: bool
    question: str
    answer: str
    plan: dict
    created: Created | None


class ConversationView(msgspec.Struct):
    id: str
    status: str                # open | closed
    engine: str
    session_id: str            # the engine's own conversation id ("" until the first answer)
    resumes: bool              # the engine continues by id (else earlier exchanges are summarized)
    brief: str
    started_at: datetime
    author: str
    exchanges: int
    created: list[Created]


# -- conversations -----------------------------------------------------------------

def conversations(state: State) -> list[Entity]:
    return sorted(state.of_kind(KIND), key=model.age_key)


def current(state: State) -> Entity | None:
    """The open conversation (the newest, should two clones each have opened one)."""
    live = [c for c in conversations(state) if c.get("status") == "open"]
    return live[-1] if live else None


def engine_name(cfg: Config, wanted: str | None = None) -> str:
    return wanted or cfg.mayor.engine or cfg.witness.engine


def configured(cfg: Config) -> str:
    """Which setting names the mayor's engine (for messages)."""
    return "mayor.engine" if cfg.mayor.engine else "witness.engine, as mayor.engine is not set"


def engine_for(cfg: Config, conv: Entity | None) -> tuple[str, str]:
    """(the engine this exchange asks, why that one).

    A conversation opened with `mayor start --engine` keeps that engine; otherwise the
    configured one is asked, so a changed mayor.engine takes effect at the next ask (the new
    engine cannot resume the old one's conversation: it gets the earlier exchanges summarized).
    """
    if conv is None:
        return engine_name(cfg), configured(cfg)
    was = conv.get("engine", "")
    if conv.get("engine_from") == "option":
        return was, (f"chosen by `git brat mayor start --engine` for conversation "
                     f"{conv.id[:7]}; `git brat mayor stop` returns to {configured(cfg)}")
    now = engine_name(cfg)
    if now != was:
        return now, (f"{configured(cfg)}; conversation {conv.id[:7]} was with {was}, so {now} "
                     f"starts afresh with the earlier exchanges summarized")
    return now, configured(cfg)


def preset(cfg: Config, name: str) -> engines.Preset:
    """The engine, usable: it has a command and its binary is on PATH."""
    p = engines.resolve(name, cfg.engines)
    if not p.argv:
        engines.invocation(p, "", "", "")   # raises the "set engines.X.command" message
    if shutil.which(p.binary) is None:
        how = f" (install it: {p.package})" if p.package else ""
        raise NotFound(f"engine {p.name}: {p.binary!r} is not on PATH{how}")
    return p


def start(g: Grite, cfg: Config, engine: str | None = None, brief: str = "") -> str:
    """Open a conversation (one event); refused while another is open."""
    cur = current(g.state())
    if cur is not None:
        raise Conflict(f"a mayor conversation is already open ({cur.id[:7]}, engine "
                       f"{cur.get('engine')}); `git brat mayor stop` closes it")
    brief = check_text(brief, "message", allow_empty=True, one_line=False).strip()
    name = preset(cfg, engine_name(cfg, engine)).name
    cid = ev.new_entity_id()
    g.append([Draft(cid, ev.Create(KIND, _fields(name, brief, "option" if engine else "config")))],
             summary("mayor.start", cid, name))
    return cid


def _fields(engine: str, brief: str, engine_from: str = "config") -> dict:
    return {"status": "open", "engine": engine, "brief": brief, "session_id": "",
            "engine_from": engine_from}


def stop(g: Grite) -> str:
    cur = current(g.state())
    if cur is None:
        raise NotFound("no mayor conversation is open")
    g.append([Draft(cur.id, ev.SetFields({"status": "closed"}))], summary("mayor.stop", cur.id))
    return cur.id


# -- asking --------------------------------------------------------------------------

def run_dir(g: Grite) -> tuple[int, str]:
    """The next free .git/brat/mayor/<n>/ of this clone (made atomically)."""
    base = layout.mayor(g.store)
    private_dir(base)   # prompts, answers, engine logs: only this user reads them
    used = [int(n) for n in os.listdir(base) if n.isdigit()]
    n = max(used, default=0) + 1
    while True:
        try:
            os.mkdir(layout.mayor_exchange(g.store, n), 0o700)
            return n, layout.mayor_exchange(g.store, n)
        except FileExistsError:
            n += 1


def shown_path(g: Grite, path: str) -> str:
    top = g.store.toplevel()
    if top and os.path.abspath(path).startswith(os.path.abspath(top) + os.sep):
        return os.path.relpath(path, top)
    return path


def refuse_unapproved_settings(g: Grite) -> None:
    """The engines' own settings files of the checkout (hooks, MCP servers: whoever pushed
    wrote them) run only once this user approved them as they are (`git brat trust`)."""
    head = g.store.objects.rev("HEAD")
    waiting = trust.unapproved_files(g.store, head) if head else []
    if waiting:
        raise trust.Unapproved(f"{trust.files_summary(waiting)}: mayor ask refused; review "
                               f"them with `git brat trust`")


def consult(g: Grite, cfg: Config, conv: Entity | None, question: str) -> Answer:
    """Run the engine once and validate its plan; the raw answer is kept in <n>.txt."""
    question = check_text(question, "question", one_line=False).strip()
    top = g.store.toplevel()
    if not top:
        raise UsageError("the mayor needs a work tree to look at; this repository is bare")
    name, why = engine_for(cfg, conv)
    p = preset(cfg, name)
    same = conv is not None and conv.get("engine") == p.name
    resume_id = conv.get("session_id", "") if same and p.resumes else ""
    session_uuid = "" if resume_id else str(uuid.uuid4())
    text = prompt(g, cfg, conv, question, resumed=bool(resume_id))
    if p.prompt == "arg" and len(text.encode()) > ARG_MAX:
        raise UsageError(f"the mayor's prompt is {len(text.encode()) // 1024} KiB, more than one "
                         f"argument may hold: lower mayor.context_files or mayor.excerpt_chars, "
                         f"or set engines.{p.name}.prompt = \"stdin\"")
    refuse_unapproved_settings(g)
    before = work_tree_status(top)
    n, sdir = run_dir(g)
    atomic_write(os.path.join(sdir, "prompt.txt"), text.encode())
    env = dict(os.environ)
    boxed = confine.mode(cfg) == "bwrap"
    # Its permission checks off only inside the sandbox; unconfined, the engine keeps them.
    inv = engines.invocation(p, text, top, sdir, resume_id=resume_id, session_uuid=session_uuid,
                             trusted=True, checked=not boxed)
    inv = confine.confined(g.store, cfg, p, sdir, inv, env)
    run = runner.run_once(p, inv, top, os.path.join(sdir, "engine.log"), env,
                          cfg.mayor.timeout)
    raw = layout.mayor_answer(g.store, n)
    atomic_write(raw, run.output.encode())
    where = shown_path(g, raw)
    tail = f"; the answer is in {where}; nothing was created"
    if inv.resumed:
        hint = (f" (resuming the engine's conversation {resume_id}; if it no longer has it, "
                f"`git brat mayor stop` starts afresh)")
    else:
        hint = ""
    if run.timed_out:
        raise MayorError(f"engine {p.name} gave no answer within {cfg.mayor.timeout:g} s "
                         f"(mayor.timeout) and was stopped{tail}")
    if run.exit_code != 0:
        raise MayorError(f"engine {p.name} exited with {run.exit_code}{hint}{tail}")
    if run.result.is_error:
        raise MayorError(f"engine {p.name} reported an error: "
                         f"{run.result.message[:200]!r}{hint}{tail}")
    answer, plan = _plan_in(p, run, cfg.mayor.max_tasks, tail)
    if run.result.session_id:
        session = run.result.session_id
    elif inv.resumed:
        session = resume_id
    elif p.new_session_args and session_uuid:
        session = session_uuid
    else:   # the engine resumes from files it keeps in its session dir (aider)
        session = sdir if p.resumes else ""
    after = work_tree_status(top)
    ans = Answer(conv.id if conv is not None else None, n, where, p.name, session, inv.resumed,
                 question, answer, "", None, {}, "", "", [],
                 [line for line in after if line not in before], why)
    try:
        _fill(g, ans, plan)
    except PlanError as exc:
        raise MayorError(f"{exc.message}{tail}") from None
    return ans


def _texts(p: engines.Preset, run: runner.Run) -> list[str]:
    """Where the answer may be: the final message, every message part joined (engines that
    stream their answer in pieces, one JSON line each), then the whole output."""
    out = []
    if p.result == "json" and run.result.json_found:
        out.append(run.result.message)
        parts = []
        for obj in engines.json_objects(run.output):
            for key in p.message_keys:
                value: object = obj
                for part in key.split("."):
                    value = value.get(part) if isinstance(value, dict) else None
                if isinstance(value, str):
                    parts.append(value)
        out.append("".join(parts))
    out.append(run.output)
    return list(dict.fromkeys(t for t in out if t.strip())) or [run.output]


def _plan_in(p: engines.Preset, run: runner.Run, max_tasks: int, tail: str) -> tuple[str, Plan]:
    """(the answer text, its plan); the first text's error is the one reported."""
    first: PlanError | None = None
    for text in _texts(p, run):
        try:
            return text, parse(text, max_tasks)
        except PlanError as exc:
            first = first or exc
    raise MayorError(f"{first.message}{tail}")


def _fill(g: Grite, ans: Answer, plan: Plan) -> None:
    if isinstance(plan, TasksPlan):
        ans.kind, ans.title, ans.body = "tasks", plan.convoy.title, plan.convoy.body
        ans.tasks = [PlannedTask(t.key, None, t.title, t.body, t.priority, t.paths, t.needs)
                     for t in plan.tasks]
        return
    from git_brat.brat import workflows
    try:
        wf = workflows.find(g.store, plan.workflow)
        wp = workflows.plan(wf, dict(plan.vars))
    except GriteError as exc:
        raise PlanError(f"the plan runs workflow {plan.workflow!r}: {exc.message}") from None
    ans.kind, ans.workflow, ans.vars = "workflow", wf.name, wp.vars
    ans.title, ans.body = wp.title, wp.body
    ans.tasks = [PlannedTask(t.step, None, t.title, t.body, t.priority, t.paths, t.needs)
                 for t in wp.tasks]


def result(ans: Answer, dry_run: bool = False, declined: bool = False,
           convoy: str | None = None) -> AskResult:
    return AskResult(ans.conversation, ans.exchange, ans.answer_file, ans.engine, ans.session_id,
                     ans.resumed, ans.kind, ans.workflow, ans.vars, convoy, ans.title, ans.body,
                     ans.tasks, dry_run, convoy is not None, declined, ans.touched,
                     ans.engine_why)


def create(g: Grite, ans: Answer) -> AskResult:
    """The conversation's record of this exchange, the convoy and every task: one batch."""
    cid = ans.conversation or ev.new_entity_id()
    convoy = ev.new_entity_id()
    ids = {t.key: ev.new_entity_id() for t in ans.tasks}
    drafts = []
    if ans.conversation is None:
        drafts.append(Draft(cid, ev.Create(KIND, _fields(ans.engine, ""))))
    fields = {"title": ans.title, "body": ans.body, "mayor": cid}
    if ans.workflow:
        fields.update(workflow=ans.workflow, vars=ans.vars)
    drafts.append(Draft(convoy, ev.Create(model.CONVOY, fields)))
    for t in ans.tasks:
        drafts += tasks.task_drafts(ids[t.key], convoy, t.title, t.body,
                                    [ids[k] for k in t.needs], t.priority, t.paths,
                                    step=t.key)
        t.id = ids[t.key]
    made = {"convoy": convoy, "title": ans.title, "workflow": ans.workflow or "",
            "tasks": [ids[t.key] for t in ans.tasks]}
    plan = {"kind": ans.kind, "workflow": ans.workflow or "", "vars": ans.vars,
            "title": ans.title, "body": ans.body,
            "tasks": [msgspec.to_builtins(t) for t in ans.tasks]}
    record = {"question": ans.question, "answer": redact.text(ans.answer)[:RECORD_CHARS],
              "truncated": len(ans.answer) > RECORD_CHARS, "plan": plan, "created": made,
              "engine": ans.engine, "session_id": ans.session_id, "resumed": ans.resumed,
              "run": ans.exchange, "at": process.now_ms()}
    drafts.append(Draft(cid, ev.SetFields({"session_id": ans.session_id, "engine": ans.engine,
                                           EXCHANGE + ev.new_entity_id()[:16]: record})))
    g.append(drafts, summary("mayor.ask", convoy, ans.title))
    ans.conversation = cid
    return result(ans, convoy=convoy)


# -- views -----------------------------------------------------------------------------

def _created(rec: dict) -> Created | None:
    made = rec.get("created") or {}
    if not made.get("convoy"):
        return None
    return Created(made["convoy"], made.get("title", ""), made.get("workflow") or None,
                   list(made.get("tasks", [])))


def view(state: State, conv: Entity, cfg: Config | None = None) -> ConversationView:
    names = actor_names(state)
    try:
        resumes = engines.resolve(conv.get("engine", ""), cfg.engines).resumes
    except GriteError:
        resumes = False
    recs = exchanges(conv)
    return ConversationView(conv.id, conv.get("status", "open"), conv.get("engine", ""),
                            conv.get("session_id", ""), resumes, conv.get("brief", ""),
                            iso(conv.created_at), names.get(conv.created_by, conv.created_by),
                            len(recs), [c for c in (_created(r[0]) for r in recs) if c])


def log(state: State, limit: int | None = None) -> list[ExchangeView]:
    """Every exchange of every conversation, oldest first (the last `limit` of them)."""
    names = actor_names(state)
    out = []
    for conv in conversations(state):
        for i, (rec, _lamport, actor, _eid) in enumerate(exchanges(conv), 1):
            out.append(ExchangeView(conv.id, i, iso(rec.get("at") or conv.updated_at),
                                    names.get(actor, actor), rec.get("engine", ""),
                                    rec.get("session_id", ""), bool(rec.get("resumed")),
                                    rec.get("question", ""), rec.get("answer", ""),
                                    rec.get("plan", {}), _created(rec)))
    out.sort(key=lambda x: (x.at, x.conversation, x.number))
    return out[-limit:] if limit else out


__all__ = ["MayorError", "Answer", "AskResult", "ConversationView", "ExchangeView", "start",
           "stop", "current", "consult", "create", "result", "view", "log", "preset"]
