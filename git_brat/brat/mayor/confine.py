"""The mayor's sandbox: a read-only view of the repository, its engine's own state writable,
the user's secrets and the clone's private files out of sight.

The mayor's prompt holds repository text (README, AGENTS.md) anyone who can push wrote, and
its engine runs with its own permission checks off: a prompt injection must reach nothing
it could change. Under witness.sandbox = "bwrap" it runs confined like a session (the same
hidden paths, the same network setting); with no sandbox, its engine keeps its own checks.
"""

from __future__ import annotations

import os
from typing import Mapping

from git_brat.brat import layout
from git_brat.brat.config import Config
from git_brat.brat.engines import Invocation, Preset, sandbox
from git_brat.errors import UsageError


def mode(cfg: Config) -> str:
    """"bwrap" or "none", as for the witness's sessions (witness.sandbox)."""
    return sandbox.effective(cfg.witness.sandbox)


def private_files(store, run_dir: str) -> list[str]:
    """What of this clone's git directory the engine never reads: the replica's signing keys,
    everything of .git/brat/ (the board's token, the approvals, sessions' logs, prompts and
    work trees) but this exchange's own directory."""
    common = os.path.realpath(store.common_dir)
    out = [os.path.join(common, "grite", "keys")]
    keep = os.path.realpath(run_dir)
    for base in (layout.root(store), layout.mayor(store)):
        try:
            names = os.listdir(base)
        except OSError:
            continue
        for name in names:
            path = os.path.realpath(os.path.join(base, name))
            if path != keep and not keep.startswith(path + os.sep):
                out.append(path)
    return out


def plan(store, cfg: Config, preset: Preset, run_dir: str,
         env: Mapping[str, str]) -> sandbox.Plan:
    """The mayor's sandbox: writable are its engine's state and this exchange's directory
    only; the repository (work tree and git directory) is read-only."""
    state = sandbox.state_paths(preset.state, env)
    top = store.toplevel() or ""
    common = os.path.realpath(store.common_dir)
    return sandbox.Plan(
        writable=[run_dir, *state],
        hide=[*sandbox.hidden_paths(cfg.witness.sandbox_hide, env),
              *private_files(store, run_dir)],
        reachable=[*sandbox.runtime_paths(env), *sandbox.named_paths(env.values()), common,
                   top, run_dir, *state],
        network=cfg.witness.sandbox_network == "open")


def confined(store, cfg: Config, preset: Preset, run_dir: str, inv: Invocation,
             env: Mapping[str, str]) -> Invocation:
    """inv run in the mayor's sandbox (bwrap), or as it is when sessions run unconfined."""
    if mode(cfg) != "bwrap":
        return inv
    bwrap = sandbox.bwrap_path()
    if bwrap is None:
        raise UsageError("witness.sandbox = \"bwrap\" but `bwrap` is not on PATH: the mayor "
                         "runs only confined there; install bubblewrap (apt-get install "
                         "bubblewrap), or set witness.sandbox to \"auto\" or \"none\"")
    box = plan(store, cfg, preset, run_dir, env)
    box.reachable += sandbox.named_paths([*inv.argv, *inv.env.values()])
    return Invocation(sandbox.argv(box, inv.argv, bwrap), inv.env, inv.stdin, inv.resumed)


__all__ = ["mode", "plan", "confined", "private_files"]
