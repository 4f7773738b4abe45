"""`git grite issue …`, `dep …` and `ready`: the issue tracker commands."""

from __future__ import annotations

import sys

import click

from git_brat.clikit import emit, json_option, table, when
from git_brat.grite import issues
from git_brat.grite.cli.common import open_grite, report_problems
from git_brat.grite.repo import Grite, short_ids



def _rows(views, state=None) -> str:
    if not views:
        return "no issues"
    short = short_ids([v.id for v in views])
    rows = [[short[v.id], v.state, v.title, ",".join(v.labels)] for v in views]
    return table(rows, [8, 6, None, 18])


def _detail_text(d: issues.IssueDetail) -> str:
    lines = [f"{d.id}  [{d.state}]", d.title, "",
             f"author:    {d.author}", f"created:   {when(d.created_at)}",
             f"updated:   {when(d.updated_at)}"]
    if d.labels:
        lines.append(f"labels:    {', '.join(d.labels)}")
    if d.assignees:
        lines.append(f"assignees: {', '.join(d.assignees)}")
    for name in ("depends_on", "blocks", "related_to", "dependents", "blocked_by"):
        ids = getattr(d.deps, name)
        if ids:
            lines.append(f"{name + ':':<10} {', '.join(i[:7] for i in ids)}")
    if d.body:
        lines += ["", d.body]
    for c in d.comments:
        lines += ["", f"--- {c.author}, {when(c.created_at)}", c.body]
    return "\n".join(lines)


@click.group()
def issue():
    """Create, list, show and change issues."""


@issue.command()
@click.argument("title")
@click.option("-b", "--body", default="", help="Longer description.")
@click.option("-l", "--label", "labels", multiple=True, help="Label (repeatable).")
@click.option("-a", "--assignee", "assignees", multiple=True, help="Assignee (repeatable).")
@json_option
def create(title, body, labels, assignees, as_json):
    """Create an issue and print its id."""
    g = open_grite()
    eid = issues.create(g, title, body, list(labels), list(assignees))
    if as_json:
        ent = g.resolve(eid, issues.KIND)
        emit(True, issues.detail(g.state(), ent), lambda: None)
    else:
        click.echo(eid)


@issue.command("list")
@click.option("--state", "state_filter", type=click.Choice(["open", "closed", "all"]),
              default="open", show_default=True)
@click.option("-l", "--label", "labels", multiple=True, help="Only issues with this label (repeatable: all of them).")
@click.option("--all", "everything", is_flag=True,
              help="Include closed issues untouched for grite.coldAfterDays (left out by default).")
@json_option
def list_(state_filter, labels, everything, as_json):
    """List issues, oldest first."""
    g = open_grite()
    cold_before = 0 if everything else g.cold_before
    if as_json and not labels:   # the common scripted call: served pre-encoded from the cache
        data = g.cache.issue_list_json(state_filter, cold_before)
        report_problems(g)
        sys.stdout.buffer.write(data)
        return
    views = issues.list_issues(g, state_filter, list(labels), cold_before)
    report_problems(g)
    emit(as_json, views, lambda: _rows(views))


@issue.command()
@click.argument("issue_id")
@json_option
def show(issue_id, as_json):
    """Show one issue with its comments and dependencies."""
    g = open_grite()
    d = issues.detail(g.state(), g.resolve(issue_id, issues.KIND))
    emit(as_json, d, lambda: _detail_text(d))


def _done(g: Grite, ent_id: str, as_json: bool, message: str, changed: bool = True,
          already: str = "") -> None:
    """Print the changed issue (JSON) or a one-line confirmation; a no-op says so."""
    if as_json:
        emit(True, issues.detail(g.state(), g.resolve(ent_id, issues.KIND)), lambda: None)
    elif changed:
        emit(False, None, lambda: message)
    else:
        emit(False, None, lambda: f"{ent_id[:7]} {already or 'unchanged'}; nothing written")


@issue.command()
@click.argument("issue_id")
@click.option("--title", default=None)
@click.option("--body", default=None)
@json_option
def update(issue_id, title, body, as_json):
    """Change the title and/or body."""
    g = open_grite()
    ent, changed = issues.update(g, issue_id, title, body)
    _done(g, ent.id, as_json, f"updated {ent.id[:7]}", changed, "already says that")


@issue.command()
@click.argument("issue_id")
@json_option
def close(issue_id, as_json):
    """Close an issue."""
    g = open_grite()
    ent, changed = issues.set_state(g, issue_id, "closed")
    _done(g, ent.id, as_json, f"closed {ent.id[:7]}", changed, "is already closed")


@issue.command()
@click.argument("issue_id")
@json_option
def reopen(issue_id, as_json):
    """Reopen a closed issue."""
    g = open_grite()
    ent, changed = issues.set_state(g, issue_id, "open")
    _done(g, ent.id, as_json, f"reopened {ent.id[:7]}", changed, "is already open")


@issue.command()
@click.argument("issue_id")
@click.option("-m", "--message", required=True, help="The comment text.")
@json_option
def comment(issue_id, message, as_json):
    """Add a comment."""
    g = open_grite()
    ent = g.resolve(issue_id, issues.KIND)
    issues.comment(g, ent.id, message)
    _done(g, ent.id, as_json, f"commented on {ent.id[:7]}")


def _set_command(name: str, set_name: str, what: str, help_text: str):
    @click.argument("issue_id")
    @click.option("--add", multiple=True, help=f"{what.capitalize()} to add (repeatable).")
    @click.option("--remove", multiple=True, help=f"{what.capitalize()} to remove (repeatable).")
    @json_option
    def command(issue_id, add, remove, as_json):
        g = open_grite()
        ent, changed = issues.edit_set(g, issue_id, set_name, list(add), list(remove), what)
        _done(g, ent.id, as_json, f"updated {what}s of {ent.id[:7]}", changed,
              f"{what}s already as asked")
    command.__doc__ = help_text
    issue.command(name)(command)


_set_command("label", "labels", "label", "Add or remove labels.")
_set_command("assign", "assignees", "assignee", "Add or remove assignees.")


# -- dependencies -----------------------------------------------------------------

@click.group()
def dep():
    """Dependencies between issues: depends_on, blocks, related_to."""


_type_option = click.option("--type", "dep_type", type=click.Choice(issues.DEP_TYPES),
                            default="depends_on", show_default=True)


@dep.command("add")
@click.argument("issue_id")
@click.option("--on", "other", required=True, help="The other issue.")
@_type_option
@json_option
def dep_add(issue_id, other, dep_type, as_json):
    """ISSUE depends on (or blocks, or relates to) OTHER. A cycle is refused."""
    g = open_grite()
    src, dst, changed = issues.dep_add(g, issue_id, other, dep_type)
    emit(as_json, {"issue": src.id, "type": dep_type, "on": dst.id, "changed": changed},
         lambda: f"{src.id[:7]} {dep_type.replace('_', ' ')} {dst.id[:7]}"
                 + ("" if changed else " already; nothing written"))


@dep.command("remove")
@click.argument("issue_id")
@click.option("--on", "other", required=True, help="The other issue.")
@_type_option
@json_option
def dep_remove(issue_id, other, dep_type, as_json):
    """Remove a dependency."""
    g = open_grite()
    src, dst = issues.dep_remove(g, issue_id, other, dep_type)
    emit(as_json, {"issue": src.id, "type": dep_type, "on": dst.id, "removed": True},
         lambda: f"{src.id[:7]} no longer {dep_type.replace('_', ' ')} {dst.id[:7]}")


@dep.command("list")
@click.argument("issue_id")
@json_option
def dep_list(issue_id, as_json):
    """Dependencies of an issue, both directions."""
    g = open_grite()
    state = g.state()
    ent = g.resolve(issue_id, issues.KIND)
    deps = issues.deps_of(state, ent)

    def human():
        lines = []
        for name in ("depends_on", "blocks", "related_to", "dependents", "blocked_by"):
            for i in getattr(deps, name):
                lines.append(f"{name:<11} {i[:7]}  {state.entities[i].get('title', '') if i in state.entities else ''}")
        return "\n".join(lines) or "no dependencies"
    emit(as_json, deps, human)


@dep.command("topo")
@click.option("--state", "state_filter", type=click.Choice(["open", "closed", "all"]),
              default="all", show_default=True)
@json_option
def dep_topo(state_filter, as_json):
    """Issues in dependency order: prerequisites first."""
    g = open_grite()
    state = g.state()
    ents = issues.topo(state, include=lambda e: state_filter == "all"
                       or e.get("state", "open") == state_filter)
    views = issues.views(state, ents)
    emit(as_json, views, lambda: _rows(views))


def ready_command():
    @click.command("ready")
    @json_option
    def ready(as_json):
        """Open issues whose prerequisites are all closed (oldest first)."""
        g = open_grite()
        state = g.state()
        views = issues.views(state, issues.ready(state))
        emit(as_json, views, lambda: _rows(views))
    return ready


def register(group: click.Group) -> None:
    group.add_command(issue)
    group.add_command(dep)
    group.add_command(ready_command())
