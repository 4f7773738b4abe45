"""The issue tracker: operations on `issue` entities and their dependency graph."""

from __future__ import annotations

from datetime import datetime

import msgspec

from git_brat.grite.model import events as ev
from git_brat.grite.model import kinds
from git_brat.grite.cache.projection import actor_names
from git_brat.grite.model.issueview import IssueView, issue_view
from git_brat.errors import Conflict, NotFound, UsageError
from git_brat.grite.log.wal import Draft
from git_brat.grite.repo import Grite
from git_brat.grite.model.state import Entity, State, iso

KIND = kinds.ISSUE
DEP_TYPES = ("depends_on", "blocks", "related_to")
STATES = ("open", "closed")


class CommentView(msgspec.Struct):
    id: str
    author: str
    created_at: datetime
    body: str


class Deps(msgspec.Struct):
    depends_on: list[str]
    blocks: list[str]
    related_to: list[str]
    dependents: list[str]      # issues that depend on this one (incoming depends_on edges)
    blocked_by: list[str] = []   # issues that block this one (incoming blocks edges)


class IssueDetail(msgspec.Struct):
    id: str
    title: str
    body: str
    state: str
    labels: list[str]
    assignees: list[str]
    author: str
    created_at: datetime
    updated_at: datetime
    comments: list[CommentView]
    deps: Deps


def check_text(value: str, what: str, allow_empty: bool = False, one_line: bool = True) -> str:
    value = value.strip() if one_line else value
    if not allow_empty and not value.strip():
        raise UsageError(f"{what} must not be empty")
    if one_line and any(c in value for c in "\n\r\0"):
        raise UsageError(f"{what} must be a single line")
    return value


def check_name(value: str, what: str) -> str:
    value = value.strip()
    if not value or any(c.isspace() or ord(c) < 32 for c in value) or "," in value:
        raise UsageError(f"invalid {what} {value!r}: use a non-empty name without spaces or commas")
    return value


def summary(action: str, ent_id: str, title: str = "") -> str:
    """One-line commit message: `grite: issue.create 3f2a91c "Fix parser"`."""
    title = title if len(title) <= 60 else title[:57] + "..."
    return f"grite: {action} {ent_id[:7]}" + (f' "{title}"' if title else "")


def create(g: Grite, title: str, body: str = "", labels: list[str] = (),
           assignees: list[str] = ()) -> str:
    title = check_text(title, "title")
    labels = sorted({check_name(l, "label") for l in labels})
    assignees = sorted({check_name(a, "assignee") for a in assignees})
    eid = ev.new_entity_id()
    drafts = [Draft(eid, ev.Create(KIND, {"title": title, "body": body, "state": "open"}))]
    drafts += [Draft(eid, ev.AddTo("labels", l)) for l in labels]
    drafts += [Draft(eid, ev.AddTo("assignees", a)) for a in assignees]
    g.append(drafts, summary("issue.create", eid, title))
    return eid


def update(g: Grite, ref: str, title: str | None = None,
           body: str | None = None) -> tuple[Entity, bool]:
    """Set title and/or body: (the issue, whether anything was written; False: already so)."""
    ent = g.resolve(ref, KIND)
    fields = {}
    if title is not None:
        fields["title"] = check_text(title, "title")
    if body is not None:
        fields["body"] = body
    if not fields:
        raise UsageError("nothing to update: give --title and/or --body")

    def build() -> list[Draft]:   # decided at the tip appended to: a no-op writes nothing
        cur = g.state().entities[ent.id]
        todo = {k: v for k, v in fields.items() if cur.get(k, "") != v}
        return [Draft(ent.id, ev.SetFields(todo))] if todo else []
    res = g.append(build, summary("issue.update", ent.id, fields.get("title", "")))
    return ent, res.written


def set_state(g: Grite, ref: str, state: str) -> tuple[Entity, bool]:
    """(the issue, whether anything was written: closing a closed issue writes nothing)."""
    ent = g.resolve(ref, KIND)

    def build() -> list[Draft]:
        if g.state().entities[ent.id].get("state", "open") == state:
            return []
        return [Draft(ent.id, ev.SetFields({"state": state}))]
    res = g.append(build, summary("issue.close" if state == "closed" else "issue.reopen", ent.id))
    return ent, res.written


def comment(g: Grite, ref: str, text: str) -> str:
    ent = g.resolve(ref, KIND)
    check_text(text, "comment", one_line=False)
    res = g.append([Draft(ent.id, ev.Comment(text))], summary("issue.comment", ent.id))
    return res.events[0].id


def edit_set(g: Grite, ref: str, set_name: str, add: list[str], remove: list[str],
             what: str) -> tuple[Entity, bool]:
    """Add/remove members of an observed-remove set (labels, assignees) in one batch."""
    ent = g.resolve(ref, KIND)
    add = sorted({check_name(x, what) for x in add})
    remove = sorted({check_name(x, what) for x in remove})
    if not add and not remove:
        raise UsageError("nothing to change: give --add and/or --remove")
    def build() -> list[Draft]:
        # A remove cancels the adds observed at the tip we append to, no older view. Adding
        # a member that is there, or removing one that is not, changes nothing: not written.
        cur = g.state().entities[ent.id]
        have = set(cur.members(set_name))
        drafts = [Draft(ent.id, ev.AddTo(set_name, x)) for x in add if x not in have]
        return drafts + [Draft(ent.id, ev.RemoveFrom(set_name, x, cur.live_tags(set_name, x)))
                         for x in remove if x not in add and x in have]
    res = g.append(build, summary(f"issue.{what}", ent.id))
    return ent, res.written


# -- dependencies --------------------------------------------------------------

def prerequisites(state: State, kind: str = KIND, ents: list[Entity] | None = None
                  ) -> dict[str, set[str]]:
    """id -> ids that must be done first (depends_on edges, and blocks edges reversed).

    For `ents` only (default: every entity of the kind); a blocker found through the
    dep_sources index, so no scan of the rest is needed.
    """
    def live(eid: str) -> bool:
        return state.kinds.get(eid) == kind
    ents = state.of_kind(kind) if ents is None else ents
    _prefetch(state.dep_sources, [e.id for e in ents])
    _prefetch(state.entities, [t for e in ents for t in e.members("dep:depends_on")] +
              [s for e in ents for s in state.dep_sources.get(e.id, ())])
    pre: dict[str, set[str]] = {}
    for ent in ents:
        mine = pre.setdefault(ent.id, set())
        mine.update(t for t in ent.members("dep:depends_on") if live(t))
        for src in state.dep_sources.get(ent.id, ()):
            if live(src) and ent.id in state.entities[src].members("dep:blocks"):
                mine.add(src)
    return pre


def _prefetch(table, keys: list[str]) -> None:
    """Read many rows of a cache table at once (a plain dict has them all already)."""
    prefetch = getattr(table, "prefetch", None)
    if prefetch is not None and keys:
        prefetch(keys)


def find_cycle(pre: dict[str, set[str]], start: str) -> list[str] | None:
    """A path start -> ... -> start through prerequisites, if one exists."""
    stack = [(start, [start])]
    seen = set()
    while stack:
        node, path = stack.pop()
        for nxt in sorted(pre.get(node, ())):
            if nxt == start:
                return path + [start]
            if nxt not in seen:
                seen.add(nxt)
                stack.append((nxt, path + [nxt]))
    return None


def dep_add(g: Grite, ref: str, on: str,
            dep_type: str = "depends_on") -> tuple[Entity, Entity, bool]:
    if dep_type not in DEP_TYPES:
        raise UsageError(f"unknown dependency type {dep_type!r}: use one of {', '.join(DEP_TYPES)}")
    src, dst = g.resolve(ref, KIND), g.resolve(on, KIND)
    if src.id == dst.id:
        raise UsageError("an issue cannot depend on itself")

    def build() -> list[Draft]:
        # Checked at the exact tip we append to, so two local writers can't close a cycle.
        if dep_type != "related_to":
            state = g.state()
            pre = prerequisites(state)
            a, b = (src.id, dst.id) if dep_type == "depends_on" else (dst.id, src.id)
            pre.setdefault(a, set()).add(b)
            cycle = find_cycle(pre, a)
            if cycle:
                names = short_names(state, cycle)
                raise Conflict("refused: this dependency would make a cycle: " + " -> ".join(names))
        if dst.id in g.state().entities[src.id].members("dep:" + dep_type):
            return []   # already there: nothing to write
        return [Draft(src.id, ev.AddTo("dep:" + dep_type, dst.id))]

    res = g.append(build, summary(f"dep.add {dep_type}", src.id))
    return src, dst, res.written


def dep_remove(g: Grite, ref: str, on: str, dep_type: str = "depends_on") -> tuple[Entity, Entity]:
    if dep_type not in DEP_TYPES:
        raise UsageError(f"unknown dependency type {dep_type!r}: use one of {', '.join(DEP_TYPES)}")
    src, dst = g.resolve(ref, KIND), g.resolve(on, KIND)
    if not src.live_tags("dep:" + dep_type, dst.id):
        raise NotFound(f"{src.id[:7]} has no {dep_type} dependency on {dst.id[:7]}")

    def build() -> list[Draft]:
        tags = g.state().entities[src.id].live_tags("dep:" + dep_type, dst.id)
        return [Draft(src.id, ev.RemoveFrom("dep:" + dep_type, dst.id, tags))]
    g.append(build, summary(f"dep.remove {dep_type}", src.id))
    return src, dst


def deps_of(state: State, ent: Entity) -> Deps:
    """Both directions: an edge is shown on the issue it points at too."""
    incoming: dict[str, list[str]] = {t: [] for t in DEP_TYPES}
    for i in state.dep_sources.get(ent.id, ()):
        if state.kinds.get(i) != ent.kind:
            continue
        src = state.entities[i]
        for t in DEP_TYPES:
            if ent.id in src.members("dep:" + t):
                incoming[t].append(i)
    related = sorted(set(ent.members("dep:related_to")) | set(incoming["related_to"]))
    return Deps(ent.members("dep:depends_on"), ent.members("dep:blocks"), related,
                sorted(incoming["depends_on"]), sorted(incoming["blocks"]))


def topo(state: State, kind: str = KIND, include=lambda e: True,
         ents: list[Entity] | None = None) -> list[Entity]:
    """Entities (default: all of the kind), prerequisites first; ties in (created_at, id) order."""
    import heapq
    ents = {e.id: e for e in (state.of_kind(kind) if ents is None else ents) if include(e)}
    pre = {k: {p for p in v if p in ents}
           for k, v in prerequisites(state, kind, list(ents.values())).items()}
    waiting = {k: len(v) for k, v in pre.items()}
    after: dict[str, list[str]] = {}
    for k, v in pre.items():
        for p in v:
            after.setdefault(p, []).append(k)
    heap = [(ents[k].created_at, k) for k, n in waiting.items() if n == 0]
    heapq.heapify(heap)
    out = []
    while heap:
        _, k = heapq.heappop(heap)
        out.append(ents[k])
        for nxt in after.get(k, ()):
            waiting[nxt] -= 1
            if waiting[nxt] == 0:
                heapq.heappush(heap, (ents[nxt].created_at, nxt))
    # Concurrent `dep add`s on two replicas can still close a cycle; never drop its members.
    done = {e.id for e in out}
    out += sorted((e for k, e in ents.items() if k not in done), key=lambda e: (e.created_at, e.id))
    return out


def ready(state: State) -> list[Entity]:
    """Open issues whose prerequisites are all closed, in stable (created_at, id) order."""
    pre = prerequisites(state)
    out = [e for e in state.of_kind(KIND)
           if e.get("state", "open") == "open"
           and all(state.entities[p].get("state") == "closed" for p in pre.get(e.id, ()))]
    return sorted(out, key=lambda e: (e.created_at, e.id))


def views(state: State, ents: list[Entity]) -> list[IssueView]:
    names = actor_names(state)
    return [issue_view(e, names) for e in ents]


def short_names(state: State, ids: list[str]) -> list[str]:
    return [f"{i[:7]} ({state.entities[i].get('title', '')})" if i in state.entities else i[:7] for i in ids]


# -- views ----------------------------------------------------------------------

def detail(state: State, ent: Entity) -> IssueDetail:
    names = actor_names(state)
    # In time order (wall clock, then causal order for ties): what a reader expects.
    comments = [CommentView(eid, names.get(actor, actor), iso(ts), body)
                for eid, _lamport, actor, ts, body in sorted(
                    ent.sorted_comments(), key=lambda c: (c[3], c[1], c[2], c[0]))]
    return IssueDetail(ent.id, ent.get("title", ""), ent.get("body", ""), ent.get("state", "open"),
                       ent.members("labels"), ent.members("assignees"),
                       names.get(ent.created_by, ent.created_by), iso(ent.created_at),
                       iso(ent.updated_at), comments, deps_of(state, ent))


def list_issues(g: Grite, state_filter: str = "open", labels: list[str] = (),
                cold_before: int = 0) -> list[IssueView]:
    """Issue views, oldest first; closed ones untouched since cold_before (ms) left out."""
    if state_filter not in ("open", "closed", "all"):
        raise UsageError(f"unknown state {state_filter!r}: use open, closed or all")
    views = g.cache.issues(cold_before)
    if state_filter != "all":
        views = [v for v in views if v.state == state_filter]
    if labels:
        want = set(labels)
        views = [v for v in views if want.issubset(v.labels)]
    return views


def import_key(title: str, body: str, occurrence: int = 0) -> str:
    """Deterministic id for an imported issue without one, so re-importing creates nothing new.

    `occurrence`: how many issues with this title and body came before it in the same file,
    so two different issues that read the same are two issues, still idempotently.
    """
    extra = f"\0{occurrence}" if occurrence else ""
    return ev.blake2b(f"import\0{title}\0{body}{extra}".encode(),
                           digest_size=16).hexdigest()


__all__ = ["create", "update", "set_state", "comment", "edit_set", "dep_add", "dep_remove",
           "deps_of", "topo", "ready", "detail", "list_issues", "IssueView", "IssueDetail",
           "issue_view"]
