"""Knowledge notes (`git brat kb`): what the next agent on this project should know, kept as events.

A note has a kind (architecture, convention, pitfall, memory), a text whose first line is its
title, and tags: components (`parser`) and paths (`src/parser/`, globs). Notes are entities of
the log, so they sync with it and each change has an author; forgetting one is a status, never
a deletion. The witness puts the notes relevant to a task (by its paths and its words) into the
agent's prompt, capped; the mayor sees them when it plans.
"""

from __future__ import annotations

import fnmatch

import msgspec

from git_brat.errors import Conflict, UsageError
from git_brat.grite.cache.projection import actor_names
from git_brat.grite.issues import check_text, summary
from git_brat.grite.log.wal import Draft
from git_brat.grite.model import events as ev
from git_brat.grite.model.kinds import NOTE
from git_brat.grite.model.state import Entity
from git_brat.grite.repo import Grite

KINDS = ("architecture", "convention", "pitfall", "memory")
MAX_TEXT = 8 << 10          # characters of one note
MAX_TAGS = 32
MAX_TAG = 256
MAX_TITLE = 120
PROMPT_BUDGET = 6 << 10     # characters of notes in one agent's prompt
# What the prompt shows first when not everything fits: what breaks things, then the rules.
KIND_ORDER = {"pitfall": 0, "convention": 1, "architecture": 2, "memory": 3}


class Note(msgspec.Struct, kw_only=True):
    id: str
    kind: str
    title: str
    text: str
    tags: list[str] = []
    paths: list[str] = []
    status: str = "kept"        # kept | forgotten
    author: str = ""
    created_at: int = 0
    task: str = ""              # the task whose agent wrote it ("": a human did)


def check_note(kind: str, text: str, tags: list[str], paths: list[str]) -> tuple[str, str]:
    """(title, text) of a note as given, or UsageError naming what does not fit."""
    if kind not in KINDS:
        raise UsageError(f"unknown note kind {kind!r}: use one of {', '.join(KINDS)}")
    text = check_text(text, "note", one_line=False).strip()
    if len(text) > MAX_TEXT:
        raise UsageError(f"a note holds at most {MAX_TEXT} characters (this one {len(text)})")
    if len(tags) + len(paths) > MAX_TAGS:
        raise UsageError(f"a note has at most {MAX_TAGS} tags and paths together")
    for t in [*tags, *paths]:
        check_text(t, "tag")
        if len(t) > MAX_TAG or not t.isprintable():
            raise UsageError(f"tag {t[:40]!r}: one printable line of at most {MAX_TAG} "
                             f"characters")
    first = text.splitlines()[0].strip()
    return (first[:MAX_TITLE - 1] + "…" if len(first) > MAX_TITLE else first), text


def drafts(nid: str, kind: str, text: str, tags: list[str], paths: list[str],
           task: str = "", session: str = "") -> list[Draft]:
    """The event that makes one note (checked: check_note)."""
    title, text = check_note(kind, text, tags, paths)
    fields = {"note_kind": kind, "title": title, "body": text, "status": "kept",
              "tags": sorted(set(tags)), "paths": sorted(set(paths))}
    if task:
        fields["task"] = task
    if session:
        fields["session"] = session
    return [Draft(nid, ev.Create(NOTE, fields))]


def add(g: Grite, kind: str, text: str, tags: list[str] = (), paths: list[str] = ()) -> str:
    """A human's note; its id."""
    nid = ev.new_entity_id()
    d = drafts(nid, kind, text, list(tags), list(paths))
    g.append(d, summary("note.add", nid, d[0].op.fields["title"]))
    return nid


def forget(g: Grite, ref: str, reason: str = "") -> str:
    """A note left out of every list, search and prompt from now on (its events stay)."""
    nid = g.resolve(ref, NOTE).id

    def build() -> list[Draft]:
        ent = g.state().entities[nid]
        if ent.get("status") == "forgotten":
            raise Conflict(f"refused: note {nid[:7]} is already forgotten")
        # (no status_from: that marks a task's move, whose one writer is tasks.move)
        fields = {"status": "forgotten"}
        if reason:
            fields["reason"] = check_text(reason, "reason")
        return [Draft(nid, ev.SetFields(fields))]
    g.append(build, summary("note.forget", nid))
    return nid


def of(ent: Entity, names: dict[str, str]) -> Note:
    """A note as readers see it; a value of the wrong type (replay types every field) is
    never assumed."""
    return Note(id=ent.id, kind=str(ent.get("note_kind", "memory")),
                title=str(ent.get("title", "")), text=str(ent.get("body", "")),
                tags=list(ent.get("tags", [])), paths=list(ent.get("paths", [])),
                status=str(ent.get("status", "kept")),
                author=names.get(ent.created_by, ent.created_by[:12]),
                created_at=ent.created_at, task=str(ent.get("task", "")))


def notes(g: Grite, forgotten: bool = False, kind: str = "", tag: str = "") -> list[Note]:
    """Notes, newest first."""
    state = g.state()
    names = actor_names(state)
    out = [of(e, names) for e in state.of_kind(NOTE)]
    return sorted([n for n in out if (forgotten or n.status != "forgotten")
                   and (not kind or n.kind == kind) and (not tag or tag in n.tags + n.paths)],
                  key=lambda n: (-n.created_at, n.id))


def show(g: Grite, ref: str) -> Note:
    state = g.state()
    return of(g.resolve(ref, NOTE), actor_names(state))


def search(g: Grite, words: list[str], forgotten: bool = False) -> list[Note]:
    """Notes holding every word (in their text, tags or paths; case ignored), newest first."""
    want = [w.lower() for w in words if w.strip()]
    if not want:
        raise UsageError("search for at least one word")
    return [n for n in notes(g, forgotten) if all(w in _haystack(n) for w in want)]


def _haystack(n: Note) -> str:
    return "\n".join([n.text, n.kind, *n.tags, *n.paths]).lower()


# -- what an agent's prompt gets ---------------------------------------------------------------

def relevant(all_notes: list[Note], paths: list[str], words: str,
             budget: int = PROMPT_BUDGET, every: bool = False) -> list[Note]:
    """The notes for a task touching `paths` (globs, as tasks give them) described by `words`:
    a note with a path of the task's, or a tag the task's text names, or no path and no tag at
    all (about the whole project); the closest first, then by kind and age, within `budget`
    characters. every: any note may come (the mayor, planning the whole project), the closest
    first."""
    text = words.lower()
    scored = []
    for n in all_notes:
        if n.status == "forgotten":
            continue
        hit_path = any(_paths_meet(p, q) for p in n.paths for q in paths)
        hit_tag = any(t.lower() in text for t in n.tags if len(t) >= 3)
        general = not n.paths and not n.tags
        if not (every or hit_path or hit_tag or general):
            continue
        score = (0 if hit_path else 1 if hit_tag else 2 if general else 3,
                 KIND_ORDER.get(n.kind, 9),
                 -n.created_at)
        scored.append((score, n))
    out, used = [], 0
    for _score, n in sorted(scored, key=lambda x: (x[0], x[1].id)):
        size = len(n.text) + 40
        if used + size > budget:
            continue
        out.append(n)
        used += size
    return out


def _paths_meet(note_path: str, task_path: str) -> bool:
    """Whether a note's path (or glob) and a task's path (or glob) can name the same files."""
    a, b = note_path.strip("/"), task_path.strip("/")
    if not a or not b:
        return False
    return (fnmatch.fnmatchcase(b, a) or fnmatch.fnmatchcase(a, b) or
            b.startswith(a.rstrip("*").rstrip("/") + "/") or
            a.startswith(b.rstrip("*").rstrip("/") + "/") or a == b)


def section(found: list[Note], planning: bool = False) -> str:
    """The prompt's part holding the notes ("" when there are none)."""
    if not found:
        return ""
    head = ("## What the team and earlier agents noted about this project (`git brat kb`): "
            "plan with it" if planning else
            "## What earlier agents and the team noted about this project (`git brat kb`)")
    lines = [head, ""]
    for n in found:
        where = ", ".join([*n.paths, *n.tags])
        head = f"- [{n.kind}{': ' + where if where else ''}] "
        lines.append(head + n.text.replace("\n", "\n  "))
    return "\n".join(lines)


__all__ = ["KINDS", "Note", "add", "forget", "notes", "show", "search", "relevant", "section",
           "drafts", "check_note"]
