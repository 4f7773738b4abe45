"""`git grite actor …`: who writes events from this clone."""

from __future__ import annotations

import click

from git_brat.clikit import emit, json_option, table, when
from git_brat.grite.cli.common import open_grite
from git_brat.grite.log import identity
from git_brat.grite.model.state import iso
from git_brat.grite.log.refs import grite_dir


@click.group()
def actor():
    """List, show, create and switch the actors this clone writes as."""


@actor.command("list")
@json_option
def list_(as_json):
    """Actors known to this clone (the current one is marked *)."""
    from git_brat.grite.log.verify import disputed
    g = open_grite()
    actors = identity.list_actors(grite_dir(g.store))
    current = g.identity.actor.id
    # Another replica speaks as it too: where no trusted key settles it, clones show each
    # side's words as its replica's (see doctor), this one's included.
    contested = set(disputed(g.store))
    rows = [[("* " if a.id == current else "  ") + a.id, a.name,
             a.email + ("  (disputed: see `git grite doctor`)" if a.id in contested else "")]
            for a in actors]
    emit(as_json, [dict(**_as_dict(a), current=a.id == current, disputed=a.id in contested)
                   for a in actors], lambda: table(rows, [34, 24, None]))


@actor.command()
@click.argument("actor_ref", required=False)
@json_option
def show(actor_ref, as_json):
    """Show an actor (default: the current one)."""
    g = open_grite()
    a = identity.find_actor(grite_dir(g.store), actor_ref) if actor_ref else g.identity.actor
    emit(as_json, _as_dict(a), lambda: f"id:       {a.id}\nname:     {a.name}\nemail:    {a.email}\n"
         f"replica:  {a.replica}\ncreated:  {when(iso(a.created_at))}")


@actor.command()
@click.argument("name")
@click.option("--email", default="", help="Email shown as the commit author of its events.")
@click.option("--use", "use_it", is_flag=True, help="Make it the current actor.")
@json_option
def new(name, email, use_it, as_json):
    """Create a new actor (for example one per agent)."""
    from git_brat.grite.init import record_actor
    g = open_grite()
    a = identity.new_actor(grite_dir(g.store), name, email or f"{name.strip()}@localhost")
    record_actor(g, a)
    if use_it:
        identity.use_actor(grite_dir(g.store), a.id)
    emit(as_json, _as_dict(a), lambda: a.id)


@actor.command()
@click.argument("actor_ref")
@json_option
def use(actor_ref, as_json):
    """Make ACTOR (id, id prefix or name) the current actor of this clone."""
    g = open_grite()
    a = identity.find_actor(grite_dir(g.store), actor_ref)
    identity.use_actor(grite_dir(g.store), a.id)
    emit(as_json, _as_dict(a), lambda: f"now acting as {a.name} ({a.id})")


def _as_dict(a: identity.Actor) -> dict:
    return {"id": a.id, "name": a.name, "email": a.email, "replica": a.replica,
            "created_at": iso(a.created_at)}


def register(group: click.Group) -> None:
    group.add_command(actor)
