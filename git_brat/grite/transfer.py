"""Bulk export (JSON, Markdown, CSV) and import (in parts of whole issues, checked first,
idempotent). The export holds issues, and brat's tasks and convoys as grite stores them (their
fields, comments and state); import takes the issues back."""

from __future__ import annotations

import csv
import io
import re
from datetime import datetime

import msgspec

from git_brat.grite.model import events as ev
from git_brat.grite import issues
from git_brat.errors import Conflict, UsageError
from git_brat.grite.log.wal import Draft
from git_brat.grite.repo import Grite
from git_brat.grite.model.kinds import CONVOY, TASK
from git_brat.grite.cache.projection import actor_names
from git_brat.grite.model.state import Entity, State, iso

EXPORT_FORMAT = "grite-export"
_FULL_ID = re.compile(r"[0-9a-f]{32}")


class ImportComment(msgspec.Struct):
    body: str


class ImportDeps(msgspec.Struct):
    depends_on: list[str] = []
    blocks: list[str] = []
    related_to: list[str] = []


class ImportIssue(msgspec.Struct):
    title: str
    body: str = ""
    labels: list[str] = []
    assignees: list[str] = []
    state: str = "open"
    id: str | None = None
    comments: list[ImportComment] = []
    deps: ImportDeps = msgspec.field(default_factory=ImportDeps)


class ImportResult(msgspec.Struct):
    created: list[str]
    skipped: list[str]      # already present: re-importing never duplicates
    commit: str | None      # the last part's log commit
    commits: list[str] = []  # one per part written, in order
    # What an export holds that import does not take: brat's convoys and tasks, by key
    # (their moves are brat's state machine's to make, not a file's)
    left_out: dict[str, int] = {}


class TaskExport(msgspec.Struct):
    id: str
    title: str
    body: str
    status: str
    convoy: str                   # "" when the task is in none
    priority: int | None
    step: str
    paths: list[str]
    needs: list[str]              # tasks merged before it may start
    author: str
    created_at: datetime
    updated_at: datetime
    comments: list[issues.CommentView]


class ConvoyExport(msgspec.Struct):
    id: str
    title: str
    body: str
    workflow: str
    tasks: list[str]
    statuses: dict[str, int]      # its tasks by status: a convoy's own state is derived from them
    author: str
    created_at: datetime
    updated_at: datetime
    comments: list[issues.CommentView]


def export(state: State) -> dict:
    names = actor_names(state)
    tasks = [_task(e, names) for e in _oldest_first(state, TASK)]
    by_convoy: dict[str, list[TaskExport]] = {}
    for t in tasks:
        by_convoy.setdefault(t.convoy, []).append(t)
    return {"format": EXPORT_FORMAT, "version": 1,
            "issues": [issues.detail(state, e) for e in _oldest_first(state, issues.KIND)],
            "convoys": [_convoy(e, by_convoy.get(e.id, []), names)
                        for e in _oldest_first(state, CONVOY)],
            "tasks": tasks}


def _oldest_first(state: State, kind: str) -> list[Entity]:
    return sorted(state.of_kind(kind), key=lambda e: (e.created_at, e.id))


def _comments(ent: Entity, names: dict[str, str]) -> list[issues.CommentView]:
    return [issues.CommentView(eid, names.get(actor, actor), iso(ts), body)
            for eid, _lamport, actor, ts, body in sorted(
                ent.sorted_comments(), key=lambda c: (c[3], c[1], c[2], c[0]))]


def _text(ent: Entity, field: str) -> str:
    value = ent.get(field, "")
    return value if isinstance(value, str) else ""


def _task(ent: Entity, names: dict[str, str]) -> TaskExport:
    priority = ent.get("priority")
    paths = ent.get("paths")
    return TaskExport(ent.id, _text(ent, "title"), _text(ent, "body"), _text(ent, "status"),
                      _text(ent, "convoy"), priority if type(priority) is int else None,
                      _text(ent, "step"), paths if isinstance(paths, list) else [],
                      ent.members("dep:depends_on"), names.get(ent.created_by, ent.created_by),
                      iso(ent.created_at), iso(ent.updated_at), _comments(ent, names))


def _convoy(ent: Entity, tasks: list[TaskExport], names: dict[str, str]) -> ConvoyExport:
    statuses: dict[str, int] = {}
    for t in tasks:
        statuses[t.status] = statuses.get(t.status, 0) + 1
    return ConvoyExport(ent.id, _text(ent, "title"), _text(ent, "body"), _text(ent, "workflow"),
                        [t.id for t in tasks], dict(sorted(statuses.items())),
                        names.get(ent.created_by, ent.created_by), iso(ent.created_at),
                        iso(ent.updated_at), _comments(ent, names))


CSV_COLUMNS = ["kind", "id", "title", "state", "group", "labels", "author", "created_at",
               "updated_at", "comments", "body"]
_FORMULA = ("=", "+", "-", "@", "\t", "\r")


def export_csv(state: State) -> str:
    """One row per issue, convoy and task (comments counted, not copied: a cell holds one
    value). A cell a spreadsheet would run as a formula is quoted with a leading '."""
    doc = export(state)
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for it in doc["issues"]:
        writer.writerow(_cells(["issue", it.id, it.title, it.state, "", " ".join(it.labels),
                                it.author, it.created_at, it.updated_at, len(it.comments),
                                it.body]))
    for c in doc["convoys"]:
        state_of = " ".join(f"{k}:{n}" for k, n in c.statuses.items())
        writer.writerow(_cells(["convoy", c.id, c.title, state_of, "", "", c.author,
                                c.created_at, c.updated_at, len(c.comments), c.body]))
    for t in doc["tasks"]:
        writer.writerow(_cells(["task", t.id, t.title, t.status, t.convoy, "", t.author,
                                t.created_at, t.updated_at, len(t.comments), t.body]))
    return out.getvalue()


def _cells(row: list) -> list[str]:
    out = []
    for value in row:
        text = value.strftime("%Y-%m-%dT%H:%M:%SZ") if isinstance(value, datetime) else str(value)
        out.append("'" + text if text.startswith(_FORMULA) else text)
    return out


def export_markdown(state: State) -> str:
    doc = export(state)
    out = ["# Issues", ""]
    for it in doc["issues"]:
        out.append(f"## {it.title} (`{it.id[:7]}`, {it.state})")
        meta = [f"by {it.author}", f"created {it.created_at:%Y-%m-%d %H:%M} UTC"]
        if it.labels:
            meta.append("labels: " + ", ".join(it.labels))
        if it.assignees:
            meta.append("assignees: " + ", ".join(it.assignees))
        if it.deps.depends_on:
            meta.append("depends on: " + ", ".join(d[:7] for d in it.deps.depends_on))
        out += ["", " · ".join(meta), ""]
        if it.body:
            out += [it.body, ""]
        for c in it.comments:
            out.append(f"- **{c.author}** ({c.created_at:%Y-%m-%d %H:%M}): {c.body}")
        if it.comments:
            out.append("")
    for heading, items in (("Convoys", doc["convoys"]), ("Tasks", doc["tasks"])):
        if items:
            out += [f"# {heading}", ""]
        for it in items:
            out += _markdown_work(it)
    return "\n".join(out) + "\n"


def _markdown_work(it: TaskExport | ConvoyExport) -> list[str]:
    if isinstance(it, TaskExport):
        state = it.status
        meta = [f"convoy `{it.convoy[:7]}`"] if it.convoy else []
        meta += [f"priority {it.priority}"] if it.priority is not None else []
        meta += ["needs " + ", ".join(f"`{n[:7]}`" for n in it.needs)] if it.needs else []
    else:
        state = ", ".join(f"{n} {k}" for k, n in it.statuses.items()) or "no tasks"
        meta = [f"workflow {it.workflow}"] if it.workflow else []
    out = [f"## {it.title} (`{it.id[:7]}`, {state})", "",
           " · ".join([f"by {it.author}", f"created {it.created_at:%Y-%m-%d %H:%M} UTC", *meta]),
           ""]
    if it.body:
        out += [it.body, ""]
    out += [f"- **{c.author}** ({c.created_at:%Y-%m-%d %H:%M}): {c.body}" for c in it.comments]
    return out + ([""] if it.comments else [])


def left_out(data: bytes) -> dict[str, int]:
    """How many convoys and tasks an export holds (parse has checked it is JSON)."""
    doc = msgspec.json.decode(data)
    if not isinstance(doc, dict):
        return {}
    return {key: len(doc[key]) for key in ("convoys", "tasks")
            if isinstance(doc.get(key), list) and doc[key]}


def parse(data: bytes, source: str) -> list[ImportIssue]:
    """Accept what `export` writes, or a plain JSON array of {title, body?, labels?, state?}."""
    try:
        doc = msgspec.json.decode(data)
    except msgspec.DecodeError as exc:
        raise UsageError(f"{source}: not valid JSON ({exc})")
    if isinstance(doc, dict) and doc.get("format") == EXPORT_FORMAT:
        items, prefix = doc.get("issues"), "$.issues"
    elif isinstance(doc, list):
        items, prefix = doc, "$"
    else:
        raise UsageError(f"{source}: expected a grite export or a JSON array of issues")
    try:
        parsed = msgspec.convert(items, list[ImportIssue])
    except msgspec.ValidationError as exc:
        raise UsageError(f"{source}: {str(exc).replace('$', prefix, 1)}")
    for i, it in enumerate(parsed):
        where = f"{source}: {prefix}[{i}]"
        try:
            it.title = issues.check_text(it.title, "title")
            it.labels = [issues.check_name(x, "label") for x in it.labels]
            it.assignees = [issues.check_name(x, "assignee") for x in it.assignees]
        except UsageError as exc:
            raise UsageError(f"{where}: {exc.message}")
        if it.state not in issues.STATES:
            raise UsageError(f"{where}: state must be open or closed, not {it.state!r}")
        if it.id is not None and not _FULL_ID.fullmatch(it.id):
            raise UsageError(f"{where}: id must be 32 hex digits, not {it.id!r}")
    return parsed


def import_issues(g: Grite, items: list[ImportIssue], source: str) -> ImportResult:
    """Import in parts of whole issues, each part one batch within the batch bounds (a small
    file is one part). Everything is checked before the first part is written (a bad file
    writes nothing); a crash between parts leaves the first parts imported, and importing the
    same file again completes it (what is there is skipped). An issue's dependencies go in
    its own part: until the last part lands, some may name issues not imported yet."""
    ids = _import_ids(items)
    state = g.state()
    known = {eid for eid, k in state.kinds.items() if k == issues.KIND}
    deps: dict[str, list[Draft]] = {}
    for d in _dep_drafts(state, items, ids, set(ids) - known, known, source):
        deps.setdefault(d.entity, []).append(d)
    groups: dict[str, list[Draft]] = {}
    for it, eid in zip(items, ids):
        groups.setdefault(eid, _issue_drafts(it, eid) + deps.get(eid, []))
    created: list[str] = []
    once: set[str] = set()
    skipped = [eid for eid in ids if eid in once or once.add(eid)]   # named twice in the file
    commits: list[str] = []
    for part in _parts(list(groups.items()), source):
        made, had = [], []

        def build(part=part, made=made, had=had) -> list[Draft]:
            # Decided against the state at the tip the batch lands on, so concurrent imports
            # of the same file never duplicate anything.
            now = g.state()
            there = {eid for eid, k in now.kinds.items() if k == issues.KIND}
            made.clear()
            had.clear()
            out: list[Draft] = []
            for eid, drafts in part:
                (had if eid in there else made).append(eid)
                out += [] if eid in there else drafts
            if not out:
                raise _NothingToImport()
            return out
        try:
            res = g.append(build, lambda _e, made=made: f"grite: import {len(made)} issues "
                                                         f"from {source}")
            commits.append(res.commit)
        except _NothingToImport:
            pass
        created += made
        skipped += had
    return ImportResult(created, skipped, commits[-1] if commits else None, commits)


def _import_ids(items: list[ImportIssue]) -> list[str]:
    """Each item's issue id: its own, else one made from its title and body (so the same file
    imported twice names the same issues)."""
    seen: dict[tuple[str, str], int] = {}
    ids = []
    for it in items:
        if it.id:
            ids.append(it.id)
            continue
        n = seen.get((it.title, it.body), 0)
        seen[(it.title, it.body)] = n + 1
        ids.append(issues.import_key(it.title, it.body, n))
    return ids


def _issue_drafts(it: ImportIssue, eid: str) -> list[Draft]:
    drafts = [Draft(eid, ev.Create(issues.KIND, {"title": it.title, "body": it.body,
                                                 "state": it.state}))]
    drafts += [Draft(eid, ev.AddTo("labels", x)) for x in sorted(set(it.labels))]
    drafts += [Draft(eid, ev.AddTo("assignees", x)) for x in sorted(set(it.assignees))]
    return drafts + [Draft(eid, ev.Comment(c.body)) for c in it.comments]


EVENT_OVERHEAD = 256                       # bytes of an event's envelope, generously
PART_BYTES = ev.MAX_BATCH_BYTES * 7 // 8   # room left for the estimate's error
PART_EVENTS = ev.MAX_BATCH_EVENTS
PART_ISSUES = ev.MAX_BATCH_ENTITIES


def _parts(groups: list[tuple[str, list[Draft]]], source: str) -> list[list[tuple[str, list[Draft]]]]:
    """Whole issues packed in order into parts that each fit one batch; an issue that alone
    does not fit refuses the whole file (nothing written)."""
    parts: list[list[tuple[str, list[Draft]]]] = [[]]
    size = events = 0
    for n, (eid, drafts) in enumerate(groups):
        weight = sum(len(msgspec.msgpack.encode(d.op)) + EVENT_OVERHEAD for d in drafts)
        if weight > PART_BYTES or len(drafts) > PART_EVENTS:
            raise UsageError(f"{source}: issue {n + 1} ({eid[:7]}) alone is {len(drafts)} "
                             f"changes, about {weight} bytes: more than one batch may hold "
                             f"({PART_BYTES} bytes, {PART_EVENTS} changes); split its comments "
                             f"over two issues")
        current = parts[-1]
        if current and (size + weight > PART_BYTES or events + len(drafts) > PART_EVENTS
                        or len(current) >= PART_ISSUES):
            parts.append(current := [])
            size = events = 0
        current.append((eid, drafts))
        size, events = size + weight, events + len(drafts)
    return parts


class _NothingToImport(Exception):
    pass


def _dep_drafts(state: State, items: list[ImportIssue], ids: list[str], taken: set[str],
                known: set[str], source: str) -> list[Draft]:
    """Dependency edges of the new issues; unknown targets and cycles refuse the whole import."""
    everything = known | set(ids)
    pre = issues.prerequisites(state)
    drafts = []
    for it, eid in zip(items, ids):
        if eid not in taken:
            continue
        for dep_type in issues.DEP_TYPES:
            for target in getattr(it.deps, dep_type):
                if target not in everything:
                    raise UsageError(f"{source}: issue {eid[:7]} has a {dep_type} dependency on "
                                     f"{target[:7]}, which is neither in the file nor known here")
                drafts.append(Draft(eid, ev.AddTo("dep:" + dep_type, target)))
                if dep_type == "depends_on":
                    pre.setdefault(eid, set()).add(target)
                elif dep_type == "blocks":
                    pre.setdefault(target, set()).add(eid)
    for eid in sorted(taken):
        cycle = issues.find_cycle(pre, eid)
        if cycle:
            raise Conflict(f"{source}: refused: its dependencies make a cycle: "
                           + " -> ".join(c[:7] for c in cycle))
    return drafts
