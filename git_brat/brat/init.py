"""`git brat init` as a library function: grite (identities, hooks, refspecs) plus the user's
.brat/config.toml in a checkout, or the hub's setup in a bare repository."""

from __future__ import annotations

import os
from typing import Any

import msgspec

from git_brat.brat import config
from git_brat.brat.refinery.hub import HubInit, init_hub
from git_brat.errors import UsageError
from git_brat.files import atomic_write
from git_brat.grite.repo import Grite


class BratInit(msgspec.Struct):
    grite: Any                 # what `git grite init` reported (replica, actor, hooks, refspecs)
    config: str                # path of the config file
    config_created: bool


def init(g: Grite) -> BratInit:
    """Set up git-brat in a checkout. Idempotent: an existing config is kept (and validated),
    never overwritten, and a bad one stops init before anything is written."""
    from git_brat.grite import init as setup
    top = g.store.toplevel()
    if g.store.bare or not top:
        raise UsageError("git brat init needs a work tree (this repository is bare): "
                         "run it in a checkout; the config lives in .brat/config.toml there")
    path = config.path_in(top)
    exists = os.path.exists(path)
    if exists:
        config.load(top)
    else:
        text = config.text_for(g.store)
    result = setup.init(g)
    if not exists:
        atomic_write(path, text.encode())
    return BratInit(result, config.CONFIG_PATH, not exists)


def hub(g: Grite) -> HubInit:
    """Set up a bare hub: a post-receive hook runs the refinery on pushed task branches."""
    return init_hub(g)


__all__ = ["BratInit", "init", "hub"]
