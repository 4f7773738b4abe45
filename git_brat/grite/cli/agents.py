"""`git grite agents-md` and `git grite skill install`: what coding agents are told about grite."""

from __future__ import annotations

import click

from git_brat.clikit import emit, json_option
from git_brat.errors import UsageError
from git_brat.grite import agents
from git_brat.grite.cli.common import open_grite


def _top() -> str:
    top = open_grite(require_init=False).store.toplevel()
    if not top:
        raise UsageError("this repository has no work tree: AGENTS.md and skills live in one")
    return top


@click.command("agents-md")
@json_option
def agents_md(as_json):
    """Add (or update) grite's section of AGENTS.md: how agents use issues and locks.

    The section sits between marker lines; the rest of the file is left as it is."""
    done = agents.put_section(_top(), "grite", agents.GRITE_SECTION)
    emit(as_json, {"file": agents.AGENTS_MD, "section": "grite", "result": done},
         lambda: f"{agents.AGENTS_MD}: grite section {done}")


@click.group()
def skill():
    """grite's skill for coding agents (agentskills format)."""


@skill.command()
@click.option("--dir", "where", default=agents.SKILLS_DIR, show_default=True,
              help="The skills folder, inside the work tree (.brat/skills: git-brat gives it "
                   "to every engine; .claude/skills: Claude Code's own).")
@json_option
def install(where, as_json):
    """Write grite's skill to DIR/grite/SKILL.md."""
    path = agents.install_skill(_top(), where)
    emit(as_json, {"path": path}, lambda: f"wrote {path}")


def register(group: click.Group) -> None:
    group.add_command(agents_md)
    group.add_command(skill)
