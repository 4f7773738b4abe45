"""Bulk export (JSON, Markdown) and import (one batch, all or nothing, idempotent)."""

from __future__ import annotations

import re

import msgspec

from git_brat.grite.model import events as ev
from git_brat.grite import issues
from git_brat.errors import Conflict, UsageError
from git_brat.grite.log.wal import Draft
from git_brat.grite.repo import Grite
from git_brat.grite.model.state import State

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
    commit: str | None


def export(state: State) -> dict:
    items = [issues.detail(state, e) for e in sorted(
        state.of_kind(issues.KIND),
        key=lambda e: (e.created_at, e.id))]
    return {"format": EXPORT_FORMAT, "version": 1, "issues": items}


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
    return "\n".join(out) + "\n"


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
    seen: dict[tuple[str, str], int] = {}
    ids = []
    for it in items:
        if it.id:
            ids.append(it.id)
            continue
        n = seen.get((it.title, it.body), 0)
        seen[(it.title, it.body)] = n + 1
        ids.append(issues.import_key(it.title, it.body, n))
    created: list[str] = []
    skipped: list[str] = []

    def build() -> list[Draft]:
        # Decided against the state at the tip the batch lands on, so concurrent imports of
        # the same file never duplicate anything.
        state = g.state()
        known = {eid for eid, k in state.kinds.items() if k == issues.KIND}
        taken: set[str] = set()
        created.clear()
        skipped.clear()
        drafts: list[Draft] = []
        for it, eid in zip(items, ids):
            if eid in known or eid in taken:
                skipped.append(eid)
                continue
            created.append(eid)
            taken.add(eid)
            drafts.append(Draft(eid, ev.Create(issues.KIND, {"title": it.title, "body": it.body,
                                                             "state": it.state})))
            drafts += [Draft(eid, ev.AddTo("labels", x)) for x in sorted(set(it.labels))]
            drafts += [Draft(eid, ev.AddTo("assignees", x)) for x in sorted(set(it.assignees))]
            drafts += [Draft(eid, ev.Comment(c.body)) for c in it.comments]
        drafts += _dep_drafts(state, items, ids, taken, known, source)
        if not drafts:
            raise _NothingToImport()
        return drafts

    try:
        res = g.append(build, lambda _e: f"grite: import {len(created)} issues from {source}")
    except _NothingToImport:
        return ImportResult([], skipped, None)
    return ImportResult(list(created), list(skipped), res.commit)


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
