"""A user runs several agents as separate actors on one clone."""

from __future__ import annotations

from helpers import git, grite, grite_json, wal_tip


def test_user_creates_and_switches_actors(grepo):
    actors = grite_json(grepo, "actor", "list")
    assert len(actors) == 1 and actors[0]["current"] and actors[0]["name"] == "Test User"
    bot = grite_json(grepo, "actor", "new", "agent-1", "--email", "a1@example.com")
    assert bot["name"] == "agent-1"
    assert grite_json(grepo, "actor", "show")["name"] == "Test User"
    grite(grepo, "actor", "use", "agent-1")
    assert grite_json(grepo, "actor", "show")["id"] == bot["id"]
    iid = grite(grepo, "issue", "create", "By the agent").out.strip()
    assert grite_json(grepo, "issue", "show", iid)["author"] == "agent-1"


def test_grite_actor_environment_overrides_the_current_actor(grepo):
    bot = grite_json(grepo, "actor", "new", "agent-2")
    iid = grite(grepo, "issue", "create", "Env actor", env={"GRITE_ACTOR": bot["id"][:6]}).out.strip()
    entries = grite_json(grepo, "log", iid)
    assert entries[0]["actor"] == bot["id"] and entries[0]["actor_name"] == "agent-2"
    assert grite_json(grepo, "actor", "show")["name"] == "Test User"


def test_unknown_actor_is_a_clear_error(grepo):
    proc = grite(grepo, "actor", "use", "nobody", check=False)
    assert proc.returncode == 3 and "no actor matches" in proc.err


def test_an_actor_name_git_would_reject_in_a_commit_is_refused(grepo):
    tip = wal_tip(grepo)
    for name in ("multi\nline", "evil <x@y>", "tab\tname"):
        proc = grite(grepo, "actor", "new", name, check=False)
        assert proc.returncode == 2 and proc.err.count("\n") == 1, proc.err
    proc = grite(grepo, "actor", "new", "ok", "--email", "a>b@c", check=False)
    assert proc.returncode == 2
    assert wal_tip(grepo) == tip
    grite(grepo, "issue", "create", "still fine")
    git(grepo, "fsck", "--no-dangling", "--strict")
