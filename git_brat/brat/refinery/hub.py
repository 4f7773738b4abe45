"""`git brat init --hub`: a bare repository that merges pushed task branches itself (post-receive)."""

from __future__ import annotations

import os
from typing import Any

import msgspec

from git_brat.brat import config, layout
from git_brat.brat.trust import HOOK_TRIGGER, Unapproved
from git_brat.grite.sync import shims as hooks
from git_brat.errors import UsageError
from git_brat.files import atomic_write
from git_brat.grite.repo import Grite


class HubInit(msgspec.Struct):
    grite: Any                 # what `git grite init` reported
    config: str                # the hub's config file (in the git dir: a bare repo has no tree)
    config_created: bool
    hooks: list[hooks.HookChange]


def config_path(g: Grite) -> str:
    return layout.hub_config(g.store)


def refuse_unless_checks_allowed(g: Grite, cfg: config.Config) -> None:
    """A hub runs pushers' code only when its admin said so (hub.run_checks): a check runs
    the pushed branch's own files (its Makefile, its tests)."""
    if g.store.bare and cfg.refinery.check and not cfg.hub.run_checks:
        raise Unapproved(f"this hub runs no pushed code: refinery.check = "
                         f"{config.show_value(cfg.refinery.check)} in {config_path(g)} would run "
                         f"the pushed branches' files, and hub.run_checks is false; set "
                         f"hub.run_checks = true there to allow it, or clear refinery.check "
                         f"(then the hub lands work unchecked): nothing lands until then")


def init_hub(g: Grite) -> HubInit:
    from git_brat.grite import init as setup
    if not g.store.bare:
        raise UsageError("git brat init --hub needs a bare repository (the hub everyone pushes "
                         "to); in a checkout, run `git brat init`")
    path = config_path(g)
    exists = os.path.exists(path)
    if exists:
        with open(path, encoding="utf-8") as f:
            config.parse(f.read(), where=path)   # a bad config stops init before any write
    else:
        branch = next(b for b in g.store.default_branch_candidates() if config.valid_branch(b))
        text = config.default_text({"refinery.target_branch": branch,
                                    "refinery.trigger": "hook"}, hub=True)
    result = setup.init(g)
    if not exists:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        atomic_write(path, text.encode())
    g.store.config_set(HOOK_TRIGGER, "true")   # the hub's own choice: pushes start its refinery
    changes = hooks.install(g.store.hooks_dir(), names=hooks.HUB_HOOKS)
    return HubInit(result, path, not exists, changes)


__all__ = ["init_hub", "HubInit", "config_path"]
