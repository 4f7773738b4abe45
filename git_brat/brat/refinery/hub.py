"""`git brat init --hub`: a bare repository that merges pushed task branches itself (post-receive)."""

from __future__ import annotations

import os
from typing import Any

import msgspec

from git_brat.brat import config, config_text, layout
from git_brat.brat.target_branch import valid_branch
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
    check: str = ""            # what checks the work the hub lands ("": nothing)
    check_from: str = ""       # where init took it from (the project's committed file), if it did
    lands: str = ""            # what the hub does with pushed work (or why nothing), a sentence


def config_path(g: Grite) -> str:
    return layout.hub_config(g.store)


def problem(g: Grite, cfg: config.Config) -> str | None:
    """Why this hub lands nothing (None: it lands, checked or by its admin's choice unchecked).

    A hub runs pushers' code only when its admin said so (hub.run_checks): a check runs the
    pushed branch's own files (its Makefile, its tests). And it lands nothing unchecked unless
    its admin chose that (hub.land_unchecked): a wrong fix would reach main unseen."""
    if not g.store.bare:
        return None
    if cfg.refinery.check.strip():
        if cfg.hub.run_checks:
            return None
        return (f"this hub runs no pushed code: refinery.check = "
                f"{config.show_value(cfg.refinery.check)} in {config_path(g)} would run the "
                f"pushed branches' files, and hub.run_checks is false; set hub.run_checks = true "
                f"there to allow it, or clear refinery.check and choose hub.land_unchecked = "
                f"true: nothing lands until then")
    if cfg.hub.land_unchecked:
        return None
    found = project_check(g, cfg.refinery.target_branch)
    offer = (f"; the project's {config.CONFIG_PATH} on {found[1]} sets "
             f"refinery.check = {config.show_value(found[0])}: `git brat init --hub` takes it"
             if found else "")
    return (f"this hub lands nothing unchecked: {config_path(g)} sets no refinery.check and "
            f"hub.land_unchecked is false; set a check there (`git brat config set "
            f"refinery.check CMD` and hub.run_checks true: pushers' code then runs here) or "
            f"choose `git brat config set hub.land_unchecked true`{offer}")


def refuse_unless_checks_allowed(g: Grite, cfg: config.Config) -> None:
    why = problem(g, cfg)
    if why:
        raise Unapproved(why)


def project_check(g: Grite, target: str) -> tuple[str, str] | None:
    """(the check, where: "main at abc123") the project's committed .brat/config.toml sets on
    the hub's target branch; None when it sets none (or cannot be read as a config)."""
    tip = g.store.refs.branch_tip(target) if valid_branch(target) else None
    if not tip:
        return None
    entry = next((e for e in g.store.objects.tree_files(tip, [config.CONFIG_PATH])
                  if e[2] == config.CONFIG_PATH and e[0] in ("100644", "100755")), None)
    data = g.store.objects.blob_head(entry[1], 1 << 20) if entry else None
    if data is None or data[1]:
        return None
    try:
        committed = config.parse(data[0].decode("utf-8"), where=f"{target}:{config.CONFIG_PATH}")
    except (UsageError, UnicodeDecodeError):
        return None
    check = committed.refinery.check.strip()
    return (check, f"{target} at {tip[:12]}") if check else None


def _take_project_check(g: Grite, path: str, text: str) -> tuple[str, str, str]:
    """The hub's config with the project's committed check, when the hub has no check and its
    admin chose no unchecked landing: (text, check, where it came from). Running init --hub is
    the admin's word: the copy is the hub's own, which no later push changes."""
    cfg = config.parse(text, where=path)
    if cfg.refinery.check.strip() or cfg.hub.land_unchecked:
        return text, cfg.refinery.check.strip(), ""
    found = project_check(g, cfg.refinery.target_branch)
    if found is None:
        return text, "", ""
    text, _ = config.set_text(text, "refinery.check", found[0])
    text, _ = config.set_text(text, "hub.run_checks", "true")
    return text, found[0], f"the project's {config.CONFIG_PATH} on {found[1]}"


def _lands(g: Grite, path: str) -> str:
    with open(path, encoding="utf-8") as f:
        cfg = config.parse(f.read(), where=path)
    why = problem(g, cfg)
    if why:
        return why
    if cfg.refinery.check.strip():
        from git_brat.brat.refinery.check import sandbox_mode
        box = "in a bubblewrap sandbox" if sandbox_mode(cfg, True) == "bwrap" else "unconfined"
        return (f"this hub lands pushed work once `{cfg.refinery.check}` passes on it (pushers' code runs "
                f"here, {box})")
    return "this hub lands pushed work unchecked (hub.land_unchecked = true)"


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
        branch = next(b for b in g.store.default_branch_candidates() if valid_branch(b))
        text = config_text.default_text({"refinery.target_branch": branch,
                                    "refinery.trigger": "hook"}, hub=True)
    result = setup.init(g)
    if exists:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    new, check, source = _take_project_check(g, path, text)
    if not exists or new != text:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        atomic_write(path, new.encode())
    g.store.config_set(HOOK_TRIGGER, "true")   # the hub's own choice: pushes start its refinery
    changes = hooks.install(g.store.hooks_dir(), names=hooks.HUB_HOOKS)
    return HubInit(result, path, not exists, changes, check, source, _lands(g, path))


__all__ = ["init_hub", "HubInit", "config_path", "problem", "project_check",
           "refuse_unless_checks_allowed"]
