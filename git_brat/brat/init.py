"""`git brat init` as a library function: grite (identities, hooks, refspecs) plus the user's
.brat/config.toml in a checkout, or the hub's setup in a bare repository."""

from __future__ import annotations

import os
from typing import Any

import msgspec

from git_brat.brat import config, trust
from git_brat.brat.refinery.hub import HubInit, init_hub
from git_brat.errors import UsageError
from git_brat.files import atomic_write
from git_brat.grite import agents
from git_brat.grite.repo import Grite


class BratInit(msgspec.Struct):
    grite: Any                 # what `git grite init` reported (replica, actor, hooks, refspecs)
    config: str                # path of the config file
    config_created: bool
    approved: bool = False     # the file written is approved (its code-running settings)
    hook_trigger: bool = False
    agents_md: str = ""        # git-brat's section of AGENTS.md: added, updated, unchanged, ""


BRAT_SECTION = """\
## Working here as a git-brat agent

This repository runs coding agents with git-brat: each task gets its own branch and work tree,
and a human reviews the work before the merge queue lands it.
- Commit on your task's branch as you go; leave every other branch alone.
- `git brat task done -m "what you did"` when finished; `git brat task block -m "what you
  need"` when you cannot go on without a human; `git brat task comment -m "..."` for a note.
- `git brat kb search WORDS` before you start: what earlier agents and the team learnt here.
  `git brat kb add --kind pitfall|convention|architecture|memory --path GLOB -m "..."` to keep
  what the next agent should know.
- The project's skills live in `.brat/skills/<name>/SKILL.md`; git-brat gives them to every
  engine."""


def agents_section(g: Grite) -> str:
    """Add or update git-brat's section of the checkout's AGENTS.md (asked for: never by
    default); added, updated or unchanged."""
    top = g.store.toplevel()
    if not top:
        raise UsageError("this repository has no work tree: AGENTS.md lives in one")
    return agents.put_section(top, "brat", BRAT_SECTION)


def init(g: Grite, hook_trigger: bool = False) -> BratInit:
    """Set up git-brat in a checkout. Idempotent: an existing config is kept (and validated),
    never overwritten, and a bad one stops init before anything is written. hook_trigger:
    this clone's hooks start the refinery (a local setting, never the committed file)."""
    from git_brat.grite import init as setup
    top = g.store.toplevel()
    if g.store.bare or not top:
        raise UsageError("this repository is bare (no work tree): `git brat init --hub` makes it a hub that "
                         "merges pushed task branches; or run `git brat init` in a checkout "
                         "(the config lives in .brat/config.toml there)")
    path = config.path_in(g.store.main_toplevel() or top)
    exists = os.path.exists(path)
    if exists:
        config.load(top)
    else:
        text = config.text_for(g.store)
    result = setup.init(g)
    if not exists:
        atomic_write(path, text.encode())
        # The file init writes is the user's own: approved as written (a kept file is not).
        if not trust.in_session(g.store):
            trust.approve(g.store, config.parse(text), "git brat init")
    if hook_trigger:
        g.store.config_set(trust.HOOK_TRIGGER, "true")
    return BratInit(result, config.CONFIG_PATH, not exists, trust.load(g.store).approval.approved,
                    hook_trigger)


def hub(g: Grite) -> HubInit:
    """Set up a bare hub: a post-receive hook runs the refinery on pushed task branches, and an
    update hook refuses rewrites and deletions of grite's logs."""
    result = init_hub(g)
    guard_logs(g.store.hooks_dir())
    return result


# The hub is where every clone's log meets: a forced push there erases a replica's history for
# every fresh clone. Only log refs: lock refs move back and forth, snapshots are replaced.
LOG_GUARD = """#!/bin/sh
# git-brat hub: grite's logs are append-only here (`git brat init --hub`).
case "$1" in
refs/grite/wal|refs/grite/replicas/*) ;;
*) exit 0 ;;
esac
case "$3" in
*[!0]*) ;;
*) echo "refusing to delete $1: grite logs on this hub are append-only" >&2; exit 1 ;;
esac
case "$2" in
*[!0]*) ;;
*) exit 0 ;;
esac
if ! git merge-base --is-ancestor "$2" "$3"; then
    echo "refusing to rewrite $1 (not a fast-forward): grite logs on this hub are append-only" >&2
    exit 1
fi
"""


def guard_logs(hooks_dir: str) -> bool:
    """Install the update hook that keeps logs append-only; False if another update hook is
    there (left alone: it is the hub owner's)."""
    path = os.path.join(hooks_dir, "update")
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            if f.read() != LOG_GUARD:
                return False
    except FileNotFoundError:
        os.makedirs(hooks_dir, exist_ok=True)
        atomic_write(path, LOG_GUARD.encode())
    os.chmod(path, 0o755)
    return True


__all__ = ["BratInit", "init", "hub"]
