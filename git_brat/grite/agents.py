"""What agents are told about a tool in the repository itself: a marked section of AGENTS.md (which
`git grite agents-md` and `git brat init --agents-md` keep) and grite's skill in the agentskills
format (`git grite skill install`).

A section sits between two marker lines of its own, so it is replaced in place on an update and
never touches the rest of the file. Files are written in the user's work tree only when asked,
never through a symlink, by a new file renamed over the old one.
"""

from __future__ import annotations

import os

from git_brat.errors import UsageError
from git_brat.files import atomic_write

AGENTS_MD = "AGENTS.md"
MAX_FILE = 1 << 20          # an AGENTS.md larger than this is not one we edit
SKILLS_DIR = ".agents/skills"   # agentskills' shared folder (codex, opencode, copilot read it)

GRITE_SECTION = """\
## Issues and locks: git grite

This repository tracks its issues with `git grite`, in git refs (no server, no files in the tree).
- `git grite issue list` / `git grite issue show ID`: what is open and what it asks for.
- `git grite issue create "title" -b "body"`, `git grite issue comment ID -m "..."`,
  `git grite issue close ID`: record what you found and what you finished.
- `git grite lock acquire path:src/x.py` before a change others may make at the same time;
  `git grite lock release ...` after.
- `git grite sync` shares all of it through the repository's remotes.
Every command takes `--json`."""

GRITE_SKILL = """\
---
name: grite
description: Track issues, comments and locks of this repository with git grite (issues kept
  in git refs). Use when asked to find, file, update or close an issue, or to take a lock on a
  file before a change others may make at the same time.
---

# git grite

- List and read: `git grite issue list --json`, `git grite issue show ID --json`.
- File: `git grite issue create "title" -b "what and why"`; labels with `--label`.
- Discuss and finish: `git grite issue comment ID -m "..."`, `git grite issue close ID`.
- Dependencies: `git grite dep add ID --on OTHER`; `git grite ready` lists what can start.
- Locks: `git grite lock acquire path:FILE` (then `release`); `git grite lock status`.
- Share: `git grite sync`.
"""


def _markers(name: str) -> tuple[str, str]:
    return f"<!-- {name}:begin (kept by `git {name}`) -->", f"<!-- {name}:end -->"


def with_section(text: str, name: str, body: str) -> str:
    """text with the section `name` holding body: replaced where its markers are, else added
    at the end."""
    begin, end = _markers(name)
    block = f"{begin}\n{body.strip()}\n{end}"
    start = text.find(begin)
    stop = text.find(end, start) if start >= 0 else -1
    if start >= 0 and stop >= 0:
        return text[:start] + block + text[stop + len(end):]
    if not text.strip():
        return block + "\n"
    return text.rstrip("\n") + "\n\n" + block + "\n"


def put_section(top: str, name: str, body: str) -> str:
    """Add or update section `name` of top/AGENTS.md; "added", "updated" or "unchanged"."""
    path = os.path.join(top, AGENTS_MD)
    old = _read_plain(path)
    new = with_section(old or "", name, body)
    if old is not None and new == old:
        return "unchanged"
    atomic_write(path, new.encode("utf-8"))
    return "updated" if old is not None and _markers(name)[0] in old else "added"


def install_skill(top: str, where: str = SKILLS_DIR) -> str:
    """grite's skill at top/<where>/grite/SKILL.md; the path written (relative)."""
    rel = os.path.normpath(os.path.join(where, "grite", "SKILL.md"))
    if os.path.isabs(where) or rel.startswith("..") or rel.split(os.sep)[0] == ".git":
        raise UsageError(f"{where!r}: give a folder inside the work tree")
    path = os.path.join(top, rel)
    for d in _parents(top, rel):
        if os.path.islink(d) or (os.path.exists(d) and not os.path.isdir(d)):
            raise UsageError(f"{os.path.relpath(d, top)} is a link or a file, not a folder: "
                             f"nothing written")
    _read_plain(path)   # (refuses a link there)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    atomic_write(path, GRITE_SKILL.encode("utf-8"))
    return rel


def _parents(top: str, rel: str) -> list[str]:
    parts = rel.split(os.sep)[:-1]
    return [os.path.join(top, *parts[:i + 1]) for i in range(len(parts))]


def _read_plain(path: str) -> str | None:
    """The text of a plain file (None: none there); UsageError for a link or anything odd."""
    if os.path.islink(path):
        raise UsageError(f"{path} is a symbolic link: not written through (edit its target "
                         f"yourself)")
    if not os.path.exists(path):
        return None
    if not os.path.isfile(path) or os.path.getsize(path) > MAX_FILE:
        raise UsageError(f"{path} is not a text file of at most {MAX_FILE} bytes: not edited")
    with open(path, encoding="utf-8", errors="surrogateescape") as f:
        return f.read()


__all__ = ["GRITE_SECTION", "GRITE_SKILL", "put_section", "with_section", "install_skill"]
