"""`git grite context index|query|show|project|set`: the code context index and the project's
context key/values (thin; the logic is in grite/context/)."""

from __future__ import annotations

import os

import click

from git_brat.clikit import emit, json_option
from git_brat.grite.cli.common import open_grite


@click.group()
def context():
    """The code context: symbols of the tracked files, and the project's key/values.

    \b
    The index (index, query, show) is derived here from the commit's blobs with
    tree-sitter (Python, JavaScript, TypeScript, Go, Rust) and kept in
    .git/grite/context/, never synced: every clone computes the same answer.
    It follows HEAD by itself; `index` brings it up to date at once.
    Symlinks are never followed; files over 1 MiB and binary files are listed,
    not parsed. Needs the `context` extra: pip install 'git-brat[context]'.

    \b
    The project context (project, set) is events: it syncs like issues.
    """


def _index():
    from git_brat.grite.context.index import Index
    return Index(open_grite(require_init=False).store)


@context.command()
@click.option("--rev", default="HEAD", show_default=True, metavar="REV",
              help="Index the tree of this commit.")
@json_option
def index(rev, as_json):
    """Bring the index up to date with a commit's tree (only new blobs are parsed)."""
    from git_brat.errors import UsageError
    if rev.startswith("-"):
        raise UsageError(f"--rev takes a revision, not {rev!r}")
    result = _index().update(rev)
    emit(as_json, result, lambda: (
        f"indexed {result.tree[:10]}: {result.files} files, {result.symbols} symbols "
        f"({result.changed} changed, {result.parsed} parsed, {result.reused} reused, "
        f"{result.skipped} not parsed) in {result.ms:.0f} ms"
        + ("\nwarning: the tree has more files than the index looks at; the rest are left out"
           if result.truncated else "")))


@context.command()
@click.argument("name")
@click.option("--kind", metavar="KIND", help="Only symbols of this kind (function, class, ...).")
@click.option("--under", metavar="DIR", help="Only files under this directory (from the top).")
@click.option("-n", "--limit", type=click.IntRange(1, 10_000), default=20, show_default=True)
@json_option
def query(name, kind, under, limit, as_json):
    """Symbols whose name holds NAME (any case): exact names first, then prefixes."""
    ix = _index()
    ix.ensure()
    hits = ix.query(name, limit, kind, under)
    emit(as_json, hits, lambda: "\n".join(
        f"{h.path}:{h.line}  {h.kind:<9} {h.parent + '.' if h.parent else ''}{h.name}"
        for h in hits) or f"no symbol matches {name!r}")


@context.command()
@click.argument("path")
@json_option
def show(path, as_json):
    """The symbols of one file (PATH from here, or from the top of the tree)."""
    from git_brat.errors import NotFound
    ix = _index()
    ix.ensure()
    found = None
    for candidate in _candidates(ix.store, path):
        found = ix.file(candidate)
        if found is not None:
            break
    if found is None:
        raise NotFound(f"{path}: not a file of a known language in HEAD's tree")
    emit(as_json, found, lambda: (
        f"{found.path} ({found.language}): not parsed: {found.skipped}" if found.skipped else
        "\n".join([f"{found.path} ({found.language}, {len(found.symbols)} symbols)"]
                  + [f"{h.line:>6}  {'  ' if h.parent else ''}{h.kind} {h.name}"
                     for h in found.symbols])))


def _candidates(store, path: str) -> list[str]:
    """PATH as the tree names it: relative to the current directory inside the work tree,
    else as given from the top."""
    out = []
    top = store.toplevel()
    if top:
        rel = os.path.relpath(os.path.abspath(path), os.path.realpath(top))
        if not rel.startswith(".."):
            out.append(rel.replace(os.sep, "/"))
    return out + [path.strip("/")]


@context.command()
@json_option
def project(as_json):
    """The project's context key/values."""
    from git_brat.grite.context import project as proj
    values = proj.values(open_grite().state())
    emit(as_json, values, lambda: "\n".join(f"{k}: {v}" for k, v in values.items())
         or "no project context set (git grite context set KEY VALUE)")


@context.command(name="set")
@click.argument("key")
@click.argument("value", required=False)
@click.option("--unset", is_flag=True, help="Remove the key.")
@json_option
def set_(key, value, unset, as_json):
    """Set the project context's KEY to VALUE (or --unset it); an event, synced."""
    from git_brat.errors import UsageError
    from git_brat.grite.context import project as proj
    if unset == (value is not None):
        raise UsageError("give a VALUE, or --unset (not both)")
    proj.check_key(key)
    if value is not None and not value:
        raise UsageError("the value is empty: use --unset to remove a key")
    changed = proj.set_value(open_grite(), key, value or "")
    emit(as_json, {"key": key, "value": value, "changed": changed}, lambda: (
        f"{'unset' if unset else 'set'} {key}" if changed else f"{key} unchanged"))


def register(group: click.Group) -> None:
    group.add_command(context)
