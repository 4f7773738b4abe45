"""What an engine reads besides its prompt: the project's instructions (its AGENTS.md and the
agent protocol) in the file that engine loads, and the project's skills
(.brat/skills/<name>/SKILL.md, the agentskills format) in the folder that engine searches.

Which file and which folder is the preset's (data). The witness writes them into the session's
work tree before the engine starts, untracked: never over a file the tree tracks, never
committed (the agent's git ignores them through the session's excludes file; the witness's own
salvage skips them). What it writes comes from the object store at the commit the session
starts from, never from the tree. The tree is the agent's (a previous session's agent may have
left a symlink or a hard link where a file goes): every directory is opened without following
a link, and every file is written beside its place and renamed over it, so no write lands
anywhere but in the tree.
"""

from __future__ import annotations

import os
import re
from typing import NamedTuple

import yaml

from git_brat.brat.engines import PRESETS, Preset
from git_brat.brat.witness import prompt
from git_brat.git import worktree as git_worktree

SKILLS_DIR = ".brat/skills"
SKILL_NAME = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")   # agentskills: ≤ 64, the directory's name
MAX_SKILLS = 32
MAX_SKILL_FILES = 64
MAX_SKILL_BYTES = 256 << 10      # a skill's files together
MAX_INLINE_SKILLS = 24 << 10     # skills' text written into an engine's instructions
MAX_DESCRIPTION = 1024
HEADER = ("<!-- Written by git-brat for this session only: not part of the repository, "
          "never committed. -->")

PROTOCOL = """\
# Working as a git-brat agent

You work on one task, in a git work tree and on a branch of your own, supervised by git-brat's
witness. Commit your work on this branch as you go (`git add -A && git commit -m "..."`), leave
every other branch alone, and report through git-brat (from anywhere in this work tree):
- `git brat task done -m "what you did"` when the task is finished;
- `git brat task comment -m "..."` to leave a note for the humans;
- `git brat task block -m "what you need"` when you cannot go on without a human;
- `git brat kb add --kind pitfall|convention|architecture|memory -m "..."` to keep something
  the next agent on this project should know (a note, not a file)."""


class Skill(NamedTuple):
    name: str
    description: str
    files: list[tuple[str, str, bytes]]   # (path inside the skill, mode, content)


class Brief(NamedTuple):
    """What was written for one session."""
    written: list[str]        # paths in the work tree (relative), each untracked
    # The instruction files (prompt.INSTRUCTION_FILES) the engine reads without the prompt:
    # all of them when the witness wrote its file, the tree's own when it tracks that file.
    engine_reads: list[str]
    brief_file: str = ""      # the file outside the tree the engine reads through its argv
    refused: list[str] = []   # paths not written, and why


def skills(store, commit: str) -> list[Skill]:
    """The project's skills at `commit`: .brat/skills/<name>/ whose name is a skill's name and
    whose SKILL.md is a plain file with a description; plain files only (no link), bounded."""
    by_name: dict[str, list[tuple[str, str, str]]] = {}
    for mode, blob, path in store.objects.tree_files(commit, [SKILLS_DIR]):
        name, _, rest = path[len(SKILLS_DIR) + 1:].partition("/")
        if rest and mode in prompt.REGULAR:
            by_name.setdefault(name, []).append((rest, mode, blob))
    out = []
    for name in sorted(by_name)[:MAX_SKILLS]:
        skill = _skill(store, name, by_name[name])
        if skill is not None:
            out.append(skill)
    return out


def _skill(store, name: str, entries: list[tuple[str, str, str]]) -> Skill | None:
    if len(name) > 64 or not SKILL_NAME.fullmatch(name) or \
            not any(rest == "SKILL.md" for rest, _m, _b in entries):
        return None
    files, total = [], 0
    for rest, mode, blob in sorted(entries)[:MAX_SKILL_FILES]:
        got = store.objects.blob_head(blob, MAX_SKILL_BYTES - total)
        if got is None or got[1]:
            return None   # a skill cut in half would mislead: all of it or none
        total += len(got[0])
        files.append((rest, mode, got[0]))
    text = next(data for rest, _m, data in files if rest == "SKILL.md")
    description = _description(text.decode("utf-8", "replace"))
    return Skill(name, description, files) if description else None


def _description(text: str) -> str:
    """The description in a SKILL.md's frontmatter ("" when there is none)."""
    if not text.startswith("---"):
        return ""
    head, sep, _body = text[3:].partition("\n---")
    if not sep:
        return ""
    try:
        meta = yaml.safe_load(head)
    except yaml.YAMLError:
        return ""
    value = meta.get("description") if isinstance(meta, dict) else None
    return value.strip()[:MAX_DESCRIPTION] if isinstance(value, str) else ""


def instructions_text(store, commit: str, preset: Preset, found: list[Skill]) -> str:
    """The instructions file's text: the project's instructions, the agent protocol, and, for an
    engine that has no skills folder, the skills themselves."""
    parts = [HEADER]
    for name, text in prompt.instructions(store, commit):
        parts.append(f"# The project's instructions ({name})\n\n{text}")
    parts.append(PROTOCOL)
    if found and not preset.skills:
        parts.append(_inline_skills(found))
    return "\n\n".join(parts) + "\n"


def _inline_skills(found: list[Skill]) -> str:
    out = ["# Skills\n\nRead a skill and follow it when its description fits what you do."]
    budget = MAX_INLINE_SKILLS
    for s in found:
        body = next(data for rest, _m, data in s.files if rest == "SKILL.md").decode(
            "utf-8", "replace")
        entry = f"## Skill {s.name}: {s.description}\n\n{body.strip()}"
        if len(entry) > budget:
            entry = f"## Skill {s.name}: {s.description}"
        budget -= len(entry)
        if budget < 0:
            break
        out.append(entry)
    return "\n\n".join(out)


def write(store, commit: str, tree: str, preset: Preset, engine_dir: str) -> Brief:
    """Write the engine's instructions and the project's skills for a session whose work tree
    `tree` starts from `commit`."""
    tracked = {p for _m, _b, p in store.objects.tree_files(
        commit, [preset.instructions, preset.skills] if preset.skills else [preset.instructions])
        } if preset.instructions or preset.skills else set()
    found = skills(store, commit)
    text = instructions_text(store, commit, preset, found).encode("utf-8", "replace")
    written, refused, reads, brief_file = [], [], [], ""
    if preset.instructions_args:
        brief_file = os.path.join(engine_dir, "instructions.md")
        _write_at(engine_dir, "instructions.md", text, 0o600)
        reads = list(prompt.INSTRUCTION_FILES)
    elif preset.instructions:
        if preset.instructions in tracked:
            refused.append(f"{preset.instructions}: tracked (the engine reads the tree's own)")
            reads = [preset.instructions]
        elif _write_in(tree, preset.instructions, text, refused):
            written.append(preset.instructions)
            reads = list(prompt.INSTRUCTION_FILES)
    for s in found if preset.skills else []:
        where = f"{preset.skills}/{s.name}"
        if any(p == where or p.startswith(where + "/") for p in tracked):
            refused.append(f"{where}: tracked (the engine reads the tree's own)")
            continue
        for rest, mode, data in s.files:
            _write_in(tree, f"{where}/{rest}", data, refused,
                      0o755 if mode == "100755" else 0o644)
        written.append(where + "/")
    return Brief(written, reads, brief_file, refused)


def planted(store, commit: str, also: Preset | None = None) -> list[str]:
    """Every path a session of any shipped engine (or of `also`, one the config defines) would
    have written for `commit` (none that the commit tracks): what a salvage of a tree left by
    an earlier session leaves out."""
    names = [s.name for s in skills(store, commit)]
    engines = [*PRESETS.values(), *([also] if also is not None else [])]
    paths = {p.instructions for p in engines if p.instructions}
    paths |= {f"{p.skills}/{n}/" for p in engines if p.skills for n in names}
    tracked = {p for _m, _b, p in store.objects.tree_files(
        commit, sorted(p.rstrip("/") for p in paths))}
    return sorted(p for p in paths if p not in tracked and not any(
        t.startswith(p) for t in tracked if p.endswith("/")))


def excludes(store, written: list[str]) -> str:
    """The session's ignore rules: the user's own, and what the witness wrote (anchored)."""
    mine = "".join(f"/{p}\n" for p in written)
    theirs = git_worktree.user_excludes(store.common_dir)
    if theirs and not theirs.endswith("\n"):
        theirs += "\n"
    return f"{theirs}# git-brat: written for this session, never committed\n{mine}"


def _write_in(tree: str, rel: str, data: bytes, refused: list[str], mode: int = 0o644) -> bool:
    """Write tree/rel with no link followed on the way; False (and why, in refused) when a
    directory on the way is not one, or the place holds a directory."""
    parts = rel.split("/")
    if any(p in ("", ".", "..", ".git") for p in parts):
        refused.append(f"{rel}: not a path inside the tree")
        return False
    fd = os.open(tree, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for part in parts[:-1]:
            try:
                os.mkdir(part, 0o755, dir_fd=fd)
            except FileExistsError:
                pass
            sub = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
            os.close(fd)
            fd = sub
        _write_file(fd, parts[-1], data, mode)
        return True
    except OSError as exc:
        refused.append(f"{rel}: {exc.strerror or exc}")
        return False
    finally:
        os.close(fd)


def _write_at(directory: str, name: str, data: bytes, mode: int) -> None:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        _write_file(fd, name, data, mode)
    finally:
        os.close(fd)


def _write_file(dir_fd: int, name: str, data: bytes, mode: int) -> None:
    """A new file beside `name`, renamed over it: a link found there is replaced, never
    written through."""
    tmp = f".{name}.brat-{os.getpid()}.tmp"
    try:
        os.unlink(tmp, dir_fd=dir_fd)
    except FileNotFoundError:
        pass
    out = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode, dir_fd=dir_fd)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(out, view):]
        os.fchmod(out, mode)
    finally:
        os.close(out)
    try:
        os.rename(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except OSError:
        os.unlink(tmp, dir_fd=dir_fd)
        raise


__all__ = ["Brief", "Skill", "skills", "write", "excludes", "instructions_text", "PROTOCOL",
           "SKILLS_DIR"]
