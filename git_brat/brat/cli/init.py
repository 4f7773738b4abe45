"""`git brat init`: grite (identities, hooks, refspecs) plus the user's .brat/config.toml."""

from __future__ import annotations

import sys

import click

from git_brat.brat import config
from git_brat.brat import init as setup
from git_brat.clikit import emit, json_option, warn
from git_brat.grite.repo import Grite


@click.command()
@click.option("--hub", is_flag=True, help="In a bare repository: merge pushed task branches "
                                          "here (a post-receive hook runs the refinery).")
@click.option("--hook-trigger", is_flag=True, help="This clone's git hooks (after a pull, "
              "fetch or rebase) start the refinery: a local setting, never committed.")
@click.option("--agents-md/--no-agents-md", "agents_md", default=None,
              help="Add (or update) git-brat's section of AGENTS.md, telling agents how to "
                   "work here. Asked when run in a terminal; not added otherwise.")
@json_option
def init(hub, hook_trigger, agents_md, as_json):
    """Set up git-brat here: grite, its hooks and refspecs, and .brat/config.toml.

    Idempotent: an existing config is kept (and validated), never overwritten.
    """
    g = Grite.open(require_init=False)
    if hub:
        res = setup.hub(g)
        emit(as_json, res, lambda: f"hub ready: post-receive runs the refinery on pushed brat/* "
                                   f"branches; config {res.config}"
                                   + ("" if res.config_created else " (kept)"))
        return
    out = setup.init(g, hook_trigger)
    result = out.grite
    if agents_md is None and not as_json and sys.stdin.isatty() and sys.stdout.isatty():
        agents_md = click.confirm("Add a git-brat section to AGENTS.md (how agents work here)?",
                                  default=False)
    if agents_md:
        out.agents_md = setup.agents_section(g)

    def human():
        actor = f"{result.actor_name} ({result.actor[:8]})"
        lines = [f"initialised grite: replica {result.replica}, actor {actor}" if result.created
                 else f"grite already initialised: replica {result.replica}, actor {actor}"]
        installed = [h.hook for h in getattr(result, "hooks", ()) if h.action == "installed"]
        if installed:
            lines.append(f"installed hooks: {', '.join(installed)}")
        if getattr(result, "remotes", None):
            lines.append(f"syncing through: {', '.join(result.remotes)}")
        lines.append(f"wrote {config.CONFIG_PATH} (every setting with its default; commit it to "
                     f"share them)" if out.config_created else f"kept {config.CONFIG_PATH}")
        if not out.approved:
            lines.append(f"{config.CONFIG_PATH} has settings that run code and that you have not "
                         f"approved: review them with `git brat trust`")
        if out.hook_trigger:
            lines.append("this clone's hooks start the refinery (git config brat.hookTrigger)")
        lines.append(f"AGENTS.md: git-brat section {out.agents_md}" if out.agents_md else
                     "AGENTS.md: no git-brat section (add one with `git brat init --agents-md`)")
        return "\n".join(lines)
    emit(as_json, out, human)
    for w in getattr(result, "warnings", ()):
        warn(w)


def register(group: click.Group) -> None:
    group.add_command(init)
