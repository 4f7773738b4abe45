"""`git brat kb …`: knowledge notes the next agent should know (add, list, show, search, forget)."""

from __future__ import annotations

import os
from datetime import datetime, timezone

import click
import msgspec

from git_brat.brat import kb as notes
from git_brat.brat.cli.common import open_grite
from git_brat.brat.witness import gate
from git_brat.clikit import emit, json_option, table, when


def _when(ms: int) -> str:
    return when(datetime.fromtimestamp(ms / 1000, timezone.utc)) if ms else "?"


def _rows(found: list[notes.Note], empty: str) -> str:
    if not found:
        return empty
    rows = [[n.id[:7], n.kind, ",".join([*n.paths, *n.tags]) or "-", n.title] for n in found]
    return table(rows, [7, 12, 20, None])


def _text(n: notes.Note) -> str:
    lines = [f"{n.id}  [{n.kind}]" + ("  FORGOTTEN" if n.status == "forgotten" else ""),
             f"author:  {n.author}", f"created: {_when(n.created_at)}"]
    if n.paths:
        lines.append(f"paths:   {', '.join(n.paths)}")
    if n.tags:
        lines.append(f"tags:    {', '.join(n.tags)}")
    if n.task:
        lines.append(f"task:    {n.task}")
    return "\n".join([*lines, "", n.text])


@click.group()
def kb():
    """Knowledge notes: what agents and the team learnt about this project."""


@kb.command()
@click.option("-m", "--message", "text", required=True,
              help="The note (its first line is its title).")
@click.option("--kind", type=click.Choice(notes.KINDS), default="memory", show_default=True)
@click.option("--tag", "tags", multiple=True, help="A component it is about (repeatable).")
@click.option("--path", "paths", multiple=True, metavar="GLOB",
              help="Files it is about (repeatable).")
@json_option
def add(text, kind, tags, paths, as_json):
    """Add a note and print its id."""
    path = os.environ.get(gate.ENV)
    if path:   # in a sandboxed session: the witness writes it, as the session
        answer = gate.ask(path, "kb", None, text,
                          extra={"kind": kind, "tags": list(tags), "paths": list(paths)})
        nid = answer["note"]
    else:
        nid = notes.add(open_grite(), kind, text, list(tags), list(paths))
    emit(as_json, {"id": nid}, lambda: nid)


@kb.command("list")
@click.option("--kind", type=click.Choice(notes.KINDS), help="Only notes of this kind.")
@click.option("--tag", help="Only notes with this tag or path.")
@click.option("--all", "everything", is_flag=True, help="Forgotten notes too.")
@json_option
def list_(kind, tag, everything, as_json):
    """Notes, newest first."""
    found = notes.notes(open_grite(), everything, kind or "", tag or "")
    emit(as_json, found, lambda: _rows(found, "no notes"))


@kb.command()
@click.argument("note_id")
@json_option
def show(note_id, as_json):
    """One note, whole."""
    n = notes.show(open_grite(), note_id)
    emit(as_json, n, lambda: _text(n))


@kb.command()
@click.argument("words", nargs=-1, required=True)
@click.option("--all", "everything", is_flag=True, help="Forgotten notes too.")
@json_option
def search(words, everything, as_json):
    """Notes holding every word given (text, tags, paths; case ignored)."""
    found = notes.search(open_grite(), list(words), everything)
    emit(as_json, found, lambda: _rows(found, "no note matches"))


@kb.command()
@click.argument("note_id")
@click.option("-r", "--reason", default="", help="Why it no longer holds.")
@json_option
def forget(note_id, reason, as_json):
    """Leave a note out of lists, searches and prompts from now on (its history stays)."""
    g = open_grite()
    nid = notes.forget(g, note_id, reason)
    emit(as_json, msgspec.to_builtins(notes.show(g, nid)), lambda: f"forgot {nid[:7]}")


def register(group: click.Group) -> None:
    group.add_command(kb)
