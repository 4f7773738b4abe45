"""Replica and actor identities, kept under .git/grite/ (local to the clone, never pushed)."""

from __future__ import annotations

import os

import msgspec

from git_brat import process
from git_brat.errors import NotARepository, NotFound, UsageError
from git_brat.files import atomic_write
from git_brat.grite.log import sign


class Replica(msgspec.Struct):
    id: str
    created_at: int


class Actor(msgspec.Struct):
    id: str
    name: str
    email: str
    created_at: int
    replica: str = ""


class Identity(msgspec.Struct):
    """Who is writing: the clone's replica and the acting actor."""
    replica: Replica
    actor: Actor

    @property
    def git_author(self) -> bytes:
        return f"{self.actor.name} <{self.actor.email}>".encode()


def _paths(grite_dir: str) -> tuple[str, str, str]:
    return (os.path.join(grite_dir, "replica.json"), os.path.join(grite_dir, "actors"),
            os.path.join(grite_dir, "actor"))


def is_initialized(grite_dir: str) -> bool:
    return os.path.exists(_paths(grite_dir)[0])


def load_replica(grite_dir: str) -> Replica:
    replica_path, _, _ = _paths(grite_dir)
    try:
        with open(replica_path, "rb") as f:
            return msgspec.json.decode(f.read(), type=Replica)
    except FileNotFoundError:
        raise NotARepository("grite is not initialised in this repository; run `git grite init`")


def init(grite_dir: str, name: str, email: str) -> tuple[Identity, bool]:
    """Create the replica id and a first actor if absent; return (identity, created_anything)."""
    replica_path, actors_dir, _ = _paths(grite_dir)
    os.makedirs(actors_dir, exist_ok=True)
    created = False
    if not os.path.exists(replica_path):
        atomic_write(replica_path, msgspec.json.encode(Replica(os.urandom(8).hex(), process.now_ms())))
        created = True
    replica = load_replica(grite_dir)
    if not list_actors(grite_dir):
        actor = new_actor(grite_dir, name, email, replica.id)
        use_actor(grite_dir, actor.id)
        created = True
    return load(grite_dir), created


def check_ident(name: str, email: str) -> tuple[str, str]:
    """A name and email git accepts in a commit's author line (else every push is refused)."""
    name, email = name.strip(), email.strip()
    if not name:
        raise UsageError("actor name must not be empty")
    for what, value in (("name", name), ("email", email)):
        if any(c in "<>" or ord(c) < 32 or ord(c) == 127 for c in value):
            raise UsageError(f"actor {what} {value!r} must not contain <, > or control characters")
    return name, email


def new_actor(grite_dir: str, name: str, email: str, replica: str | None = None) -> Actor:
    name, email = check_ident(name, email)
    _, actors_dir, _ = _paths(grite_dir)
    os.makedirs(actors_dir, exist_ok=True)
    replica = replica or load_replica(grite_dir).id
    # The id is bound to this replica's key (sign.new_actor_id): no other key can speak as it.
    actor = Actor(sign.new_actor_id(sign.ensure_key(grite_dir)), name.strip(), email.strip(), process.now_ms(), replica)
    atomic_write(os.path.join(actors_dir, actor.id + ".json"), msgspec.json.encode(actor))
    return actor


def list_actors(grite_dir: str) -> list[Actor]:
    _, actors_dir, _ = _paths(grite_dir)
    try:
        names = sorted(os.listdir(actors_dir))
    except FileNotFoundError:
        return []
    out = []
    for fn in names:
        if fn.endswith(".json"):
            with open(os.path.join(actors_dir, fn), "rb") as f:
                out.append(msgspec.json.decode(f.read(), type=Actor))
    return sorted(out, key=lambda a: (a.created_at, a.id))


def find_actor(grite_dir: str, ref: str) -> Actor:
    """An actor by id, unique id prefix, or exact name."""
    actors = list_actors(grite_dir)
    exact = [a for a in actors if a.id == ref or a.name == ref]
    matches = exact or [a for a in actors if a.id.startswith(ref)]
    if not matches:
        raise NotFound(f"no actor matches {ref!r} (see `git grite actor list`)")
    if len(matches) > 1:
        raise UsageError(f"actor {ref!r} is ambiguous: " + ", ".join(a.id for a in matches))
    return matches[0]


def use_actor(grite_dir: str, actor_id: str) -> None:
    _, _, current = _paths(grite_dir)
    atomic_write(current, actor_id.encode() + b"\n")


def current_actor_id(grite_dir: str) -> str | None:
    _, _, current = _paths(grite_dir)
    try:
        with open(current) as f:
            return f.read().strip() or None
    except FileNotFoundError:
        return None


def load(grite_dir: str) -> Identity:
    """The writing identity: $GRITE_ACTOR (id, prefix or name) overrides the clone's current actor."""
    replica = load_replica(grite_dir)
    wanted = os.environ.get("GRITE_ACTOR") or current_actor_id(grite_dir)
    if not wanted:
        raise NotARepository("no current actor; run `git grite actor new NAME`")
    _, actors_dir, _ = _paths(grite_dir)
    try:  # fast path: an exact id needs one small file
        with open(os.path.join(actors_dir, wanted + ".json"), "rb") as f:
            actor = msgspec.json.decode(f.read(), type=Actor)
    except (FileNotFoundError, OSError, ValueError):
        actor = find_actor(grite_dir, wanted)
    return Identity(replica, actor)

