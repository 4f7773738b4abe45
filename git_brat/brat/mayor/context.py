"""What the mayor is told: the rules, the repository's layout and docs, the board, the schema."""

from __future__ import annotations

from collections import Counter

from git_brat.brat import board as model
from git_brat.clikit import printable
from git_brat.brat import kb
from git_brat.brat.config import Config
from git_brat.brat.mayor.plan import SCHEMA, WORKFLOW_SCHEMA
from git_brat.brat.witness.prompt import tracked_text
from git_brat.git import worktree
from git_brat.grite.repo import Grite
from git_brat.grite.model.state import Entity, State

BOARD_LINES = 120          # open convoys and tasks listed in the context
SYMBOL_LINES = 40          # definitions of names the request mentions (grite's context index)
GIT_TIMEOUT = 60
KB_BUDGET = 8 << 10        # characters of knowledge notes in the mayor's context
EXCHANGE = "x:"            # field prefix: one field per exchange, so concurrent ones all stay


def exchanges(conv: Entity) -> list[tuple[dict, int, str, str]]:
    """(record, lamport, actor, event id) of each exchange, in causal order."""
    cells = [cell for name, cell in conv.fields.items() if name.startswith(EXCHANGE)]
    return sorted(cells, key=lambda c: (c[1], c[2], c[3]))


def work_tree_status(top: str) -> list[str]:
    return worktree.status(top, timeout=GIT_TIMEOUT)


def tracked_files(top: str) -> list[str]:
    # Shown to the mayor as text: a name that is not UTF-8 is shown with U+FFFD, a line break
    # in one escaped (it would start a section of the prompt of its own).
    return [_one_line(f.encode("utf-8", "surrogateescape").decode("utf-8", "replace"))
            for f in worktree.tracked(top, timeout=GIT_TIMEOUT)]


def layout(files: list[str], limit: int) -> list[str]:
    """Every path when they fit in `limit` lines; else the deepest directory summary that does."""
    if len(files) <= limit:
        return list(files)
    best: Counter | None = None
    for depth in range(1, 8):
        groups: Counter = Counter()
        for f in files:
            parts = f.split("/")
            groups["/".join(parts[:depth]) + "/" if len(parts) > depth else f] += 1
        if len(groups) > limit:
            break
        best = groups
        if all(not k.endswith("/") for k in groups):
            break
    if best is None:
        return [f"({len(files)} files; too many top-level entries to list)"]
    return [f"{k} ({n} file{'s' if n != 1 else ''})" if k.endswith("/") else k
            for k, n in sorted(best.items())]


def excerpt(g: Grite, files: list[str], names: tuple[str, ...], limit: int) -> tuple[str, str]:
    """(file name, its first `limit` bytes) of the first of names tracked at the top, as HEAD
    holds it (read from git, never through the work tree: a committed symlink into .git/ or
    out of the tree is not followed)."""
    have = set(files)
    head = g.store.objects.rev("HEAD") or ""
    for name in names:
        if name in have:
            got = tracked_text(g.store, head, name, limit)
            if got is None:
                continue
            text, cut = got
            return name, text + (f"\n[… truncated: {name} is longer than {limit} bytes]"
                                 if cut else "")
    return "", ""


def symbol_lines(g: Grite, question: str) -> list[str]:
    """Where the names the request mentions are defined, from grite's code context index
    (nothing when the index cannot be had: no tree-sitter here, no commit yet)."""
    from git_brat.errors import GriteError
    from git_brat.grite.context.index import relevant
    try:
        hits = relevant(g.store, question, SYMBOL_LINES)
    except GriteError:
        return []
    return [_one_line(f"- {h.kind} {h.parent + '.' if h.parent else ''}{h.name}: "
                      f"{h.path}:{h.line}") for h in hits]


def _one_line(text: str) -> str:
    """A committed path may hold a line break: shown escaped, it cannot start a section of
    the prompt of its own."""
    return printable(text).replace("\n", "\\n").replace("\t", "\\t")


def board_lines(state: State) -> list[str]:
    b = model.Board(state)
    out = []
    for c in b.convoy_list():
        if c.status == "landed":
            continue
        out.append(f"- convoy {c.id[:7]} [{c.status}] {c.title}")
        for t in b.by_convoy.get(c.id, []):
            st = model.status_of(t)
            if st in model.FINISHED:
                continue
            needs = b.pre.get(t.id, ())
            shown = f" (needs {', '.join(sorted(n[:7] for n in needs))})" if needs else ""
            out.append(f"  - task {t.id[:7]} [{st}] p{t.get('priority', 2)} "
                       f"{t.get('title', '')}{shown}")
    if len(out) > BOARD_LINES:
        out = out[:BOARD_LINES] + [f"[… {len(out) - BOARD_LINES} more lines]"]
    return out or ["(none)"]


def workflow_lines(g: Grite) -> list[str]:
    from git_brat.brat import workflows
    out = []
    for info in workflows.list_all(g.store):
        if info.error is not None:
            continue
        wf = workflows.find(g.store, info.name)
        ins = [f"{i.name} ({'required' if i.required else 'optional'})"
               + (f": {i.description}" if i.description else "") for i in wf.inputs]
        out.append(f"- {wf.name} ({wf.type}, {len(wf.steps)} tasks): "
                   f"{wf.description.strip().rstrip('.')}"
                   + (f"; inputs: {'; '.join(ins)}" if ins else ""))
    return out or ["(none)"]


def history_lines(conv: Entity | None, limit: int) -> list[str]:
    if conv is None or limit <= 0:
        return []
    out = []
    for rec, *_ in exchanges(conv)[-limit:]:
        made = rec.get("created") or {}
        what = (f"created convoy {made.get('convoy', '')[:7]} \"{made.get('title', '')}\" with "
                f"{len(made.get('tasks', []))} tasks" if made else "nothing created")
        if made.get("workflow"):
            what += f" (workflow {made['workflow']})"
        out.append(f"- asked: {rec.get('question', '')!r} -> {what}")
    return out


def prompt(g: Grite, cfg: Config, conv: Entity | None, question: str, resumed: bool) -> str:
    """Everything the engine is told: the rules, the repository, the board, the schema."""
    top = g.store.toplevel() or ""
    m = cfg.mayor
    files = tracked_files(top)
    parts = [
        "You are the Mayor of this git repository: you plan work for coding agents, you do "
        "not do it. Do NOT edit, create or delete any file and do NOT run commands that change "
        "the repository or its git state; reading files is fine.",
        "Answer the request below with ONE JSON object (alone, or in a ```json fenced block) "
        "in one of these two shapes.",
        "1. A new convoy of tasks:\n" + SCHEMA + "\n"
        "   key: a short name unique in this plan; needs: keys of tasks in this plan that "
        "must be merged first (no cycles); priority: 0 (most urgent) to 4, default 2; paths: "
        f"files the task will touch; at most {m.max_tasks} tasks; titles are one line.",
        "2. Run one of the workflows listed below:\n" + WORKFLOW_SCHEMA,
        f"## Repository layout ({len(files)} tracked files)\n" + "\n".join(
            layout(files, m.context_files)),
    ]
    for names in (("README.md", "README.rst", "README.txt", "README"), ("AGENTS.md",)):
        name, text = excerpt(g, files, names, m.excerpt_chars)
        if name and text.strip():
            parts.append(f"## {name} (excerpt)\n{text.rstrip()}")
    symbols = symbol_lines(g, question)
    if symbols:
        parts.append("## Where the names in the request are defined\n" + "\n".join(symbols))
    knowledge = kb.section(kb.relevant(kb.notes(g), [], question, KB_BUDGET, every=True), planning=True)
    if knowledge:
        parts.append(knowledge)
    state = g.state()
    parts.append("## Open convoys and tasks (already planned: do not plan them again)\n"
                 + "\n".join(board_lines(state)))
    parts.append("## Workflows\n" + "\n".join(workflow_lines(g)))
    if conv is not None and conv.get("brief"):
        parts.append("## Standing instructions for this conversation\n" + conv.get("brief"))
    if not resumed:
        earlier = history_lines(conv, m.history)
        if earlier:
            parts.append("## Earlier in this conversation\n" + "\n".join(earlier))
    parts.append("## Request\n" + question)
    return "\n\n".join(parts) + "\n"


__all__ = ["prompt", "layout", "work_tree_status", "exchanges", "EXCHANGE"]
