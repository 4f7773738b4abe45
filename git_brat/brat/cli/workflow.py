"""`git brat workflow list|show|run|copy`: YAML templates that create a convoy of tasks."""

from __future__ import annotations

import os

import click

from git_brat.brat.cli.common import load_config, open_grite
from git_brat.clikit import cut, emit, json_option, table
from git_brat.git.store import Store


def _wf():
    from git_brat.brat import workflows   # YAML is only imported by these commands
    return workflows


@click.group()
def workflow():
    """Workflow templates: .brat/workflows/*.yaml, and the shipped feature, code-review, fix-bug."""


@workflow.command("list")
@json_option
def list_(as_json):
    """Every template by name; a local one overrides a shipped one of the same name."""
    infos = _wf().list_all(Store.discover())

    def human():
        rows = []
        for i in infos:
            where = "shipped" if i.shipped else ("override" if i.overrides else "local")
            rows.append([i.name, i.type or "INVALID", where,
                         i.description if i.error is None else i.error])
        return table(rows, [14, 8, 9, None]) if rows else "no workflows"
    emit(as_json, infos, human)


@workflow.command()
@click.argument("name")
@json_option
def show(name, as_json):
    """A template's inputs and steps (validated)."""
    wf = _wf().find(Store.discover(), name)

    def human():
        lines = [f"{wf.name}  (type: {wf.type}, {wf.source}"
                 + (", overrides the shipped one" if wf.overrides else "") + ")"]
        if wf.description:
            lines.append(wf.description)
        lines += ["", f"convoy: {wf.title}"]
        if wf.inputs:
            lines += ["", "inputs:"]
            for i in wf.inputs:
                how = "required" if i.required else f"default {i.default or ''!r}"
                lines.append(f"  {i.name:<14} {how:<24} {i.description}".rstrip())
        lines += ["", "steps:" if wf.type == "workflow" else "legs, then the synthesis:"]
        for s in wf.steps:
            needs = f"  (needs {', '.join(s.needs)})" if s.needs else ""
            lines.append(f"  {s.id:<16} p{s.priority}  {s.title}{needs}")
        return "\n".join(lines)
    emit(as_json, wf, human)


@workflow.command()
@click.argument("name")
@click.option("--var", "pairs", multiple=True, metavar="KEY=VALUE",
              help="A value for one of the template's inputs (repeatable).")
@click.option("--dry-run", is_flag=True, help="Show what would be created; write nothing.")
@json_option
def run(name, pairs, dry_run, as_json):
    """Create the convoy and all its tasks in one atomic batch."""
    w = _wf()
    g = open_grite()
    load_config(g)   # an invalid .brat/config.toml is refused here as `status` refuses it
    wf = w.find(g.store, name)
    result = w.run(g, wf, w.parse_vars(list(pairs)), dry_run=dry_run)

    def human():
        head = "would create" if dry_run else "created"
        lines = [f"{head} convoy {result.convoy[:7]} \"{result.title}\" from {result.workflow}"]
        step_of = {t.id: t.step for t in result.tasks}
        for t in result.tasks:
            needs = f"  (needs {', '.join(step_of[n] for n in t.needs)})" if t.needs else ""
            lines.append(cut(f"  {t.id[:7]}  {t.step:<16} {t.title}{needs}", 80))
        return "\n".join(lines)
    emit(as_json, result, human)


@workflow.command()
@click.argument("name")
@click.option("--force", is_flag=True, help="Overwrite an existing .brat/workflows/NAME.yaml.")
@json_option
def copy(name, force, as_json):
    """Copy a shipped template into .brat/workflows/ to edit it (it then overrides the shipped one)."""
    store = Store.discover()
    dest = _wf().copy(store, name, force)
    rel = os.path.relpath(dest, store.toplevel())
    emit(as_json, {"name": name, "path": rel}, lambda: f"copied {name} to {rel}")


def register(group: click.Group) -> None:
    group.add_command(workflow)
