"""The prompt an agent gets: its task and convoy, where it works, the repo's instructions, retry context."""

from __future__ import annotations

import msgspec

REGULAR = ("100644", "100755")   # a tree's modes of a plain file (not a link, not a submodule)

INSTRUCTION_FILES = ("AGENTS.md", "CLAUDE.md")
MAX_INSTRUCTIONS = 16 << 10      # bytes read of each instructions file
MAX_FAILURE = 6 << 10            # characters of a previous failure's output


class PromptInput(msgspec.Struct, kw_only=True):
    task_id: str
    title: str
    body: str
    convoy_title: str = ""
    convoy_body: str = ""
    branch: str
    base: str                    # the commit the branch started from
    target: str                  # the branch the work lands on
    workdir: str
    paths: list[str] = []
    attempt: int = 1
    last_failure: str = ""       # the previous attempt's failure (check output, engine error)
    notes: list[str] = []        # comments left on the task, oldest first
    reply: str = ""              # a human's answer to the last attempt (`git brat task reply`)
    resumed_after_crash: bool = False
    commits: int = 0             # commits already on the branch (from earlier sessions)
    store: object = None         # the repository (git_brat.git.store.Store) ...
    tree: str = ""               # ... and the commit the session starts from: its instructions
    engine_reads: list[str] = []  # instruction files the engine reads by itself (not repeated)
    knowledge: str = ""          # the knowledge notes relevant to the task (kb.section)


REPORTING = """\
How to report (run these from anywhere inside this work tree):
- Commit your work on this branch with git as you go (`git add -A && git commit -m "..."`).
- When the task is finished: `git brat task done -m "what you did"`.
- To leave a note for the humans: `git brat task comment -m "..."`.
- If you cannot go on without a human: `git brat task block -m "what you need"`.
Stay on this branch and leave {target} alone: when you say done, the witness publishes this
branch (it pushes it where the team syncs) and the merge queue lands it on {target}."""


def tracked_text(store, commit: str, name: str, limit: int) -> tuple[str, bool] | None:
    """(the text, whether it was cut at `limit` bytes) of the tracked file `name` as a commit's
    tree holds it; None unless it is a plain file there.

    Read from the object store, never through the work tree: the file is whoever committed
    it. A committed symlink is followed only to another plain file of the same tree (a few
    hops at most): never out of it, never into .git/ (~/.aws/credentials, /proc/self/environ,
    .git/brat/ui.json are never read)."""
    if store is None or not commit:
        return None
    for _hop in range(4):
        entry = next((e for e in store.objects.tree_files(commit, [name]) if e[2] == name), None)
        if entry is None:
            return None
        mode, blob, _path = entry
        if mode in REGULAR:
            got = store.objects.blob_head(blob, limit)
            return None if got is None else (got[0].decode("utf-8", "replace"), got[1])
        if mode != "120000":
            return None
        link = store.objects.blob_head(blob, 4096)
        name = _link_target(name, link[0] if link else b"")
        if name is None:
            return None
    return None


def _link_target(name: str, link: bytes) -> str | None:
    """Where a committed symlink at `name` points, as a path of the same tree (None: out of
    the tree, into .git, or not a path at all)."""
    import posixpath
    try:
        text = link.decode("utf-8")
    except UnicodeDecodeError:
        return None
    if not text or text.startswith("/") or "\0" in text:
        return None
    target = posixpath.normpath(posixpath.join(posixpath.dirname(name), text))
    parts = target.split("/")
    if target in (".", "") or parts[0] == ".." or any(p.lower() == ".git" for p in parts):
        return None
    return target


def instructions(store, commit: str) -> list[tuple[str, str]]:
    """The repository's agent instructions (AGENTS.md, CLAUDE.md) as the commit the session
    starts from holds them: plain tracked files only."""
    out = []
    for name in INSTRUCTION_FILES:
        got = tracked_text(store, commit, name, MAX_INSTRUCTIONS)
        if got is None:
            continue
        text, cut = got
        if cut:
            text += f"\n[… cut: {name} is longer than {MAX_INSTRUCTIONS} bytes]"
        if text.strip():
            out.append((name, text.strip()))
    return out


def _tail(text: str, limit: int) -> str:
    return text if len(text) <= limit else "[…]\n" + text[-limit:]


def build(p: PromptInput) -> str:
    """The whole prompt for a fresh conversation."""
    parts = []
    if p.reply:
        parts.append(f"A human reviewed your last attempt and answered:\n\n{p.reply.strip()}\n\n"
                     f"Carry on with the task below, taking that into account.")
    parts.append(f"# Task {p.task_id[:7]}: {p.title}")
    if p.body.strip():
        parts.append(p.body.strip())
    if p.paths:
        parts.append("Files this task is expected to touch: " + ", ".join(p.paths))
    if p.convoy_title:
        conv = f"## Part of: {p.convoy_title}"
        if p.convoy_body.strip():
            conv += "\n\n" + p.convoy_body.strip()
        parts.append(conv)
    where = (f"## Where you work\n\nYou are in a git work tree of your own at {p.workdir}, on "
             f"branch {p.branch}, which started from {p.base[:12]} of {p.target}.")
    if p.commits:
        where += (f" The branch already holds {p.commits} commit(s) from earlier sessions on "
                  f"this task: build on them (`git log {p.target}..HEAD`).")
    parts.append(where)
    if p.resumed_after_crash:
        parts.append("Your previous session on this task was interrupted (the supervisor "
                     "stopped). Everything it committed, and anything it left uncommitted, is on "
                     "the branch now. Check `git log` and `git status`, then continue.")
    if p.last_failure:
        parts.append(f"## Attempt {p.attempt}: the previous attempt failed\n\n"
                     f"```\n{_tail(p.last_failure.strip(), MAX_FAILURE)}\n```\n\nFix that first.")
    if p.notes:
        parts.append("## Notes left on the task\n\n" + "\n\n".join(f"- {n.strip()}" for n in p.notes))
    if p.knowledge:
        parts.append(p.knowledge)
    for name, text in instructions(p.store, p.tree):
        if name in p.engine_reads:
            continue
        parts.append(f"## The repository's instructions ({name})\n\n{text}")
    parts.append(REPORTING.format(target=p.target))
    return "\n\n".join(parts) + "\n"


def continuation(p: PromptInput) -> str:
    """The prompt that continues an engine's own conversation (it already has the task)."""
    if p.reply:
        head = f"A human reviewed your work on this task and answered:\n\n{p.reply.strip()}"
    elif p.last_failure:
        head = (f"Your last attempt failed:\n\n```\n{_tail(p.last_failure.strip(), MAX_FAILURE)}"
                f"\n```\n\nFix that.")
    else:
        head = ("Your session was interrupted. Everything you had written is committed on "
                f"{p.branch}; check `git log` and `git status`, then continue the task.")
    return f"{head}\n\n{REPORTING.format(target=p.target)}\n"


__all__ = ["PromptInput", "build", "continuation", "instructions", "tracked_text"]
