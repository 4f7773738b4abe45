"""The cache only changes speed: deleting or damaging it never changes an answer."""

from __future__ import annotations

import shutil

import msgspec
from hypothesis import example, given, settings, strategies as st

from helpers import grite, grite_json
from git_brat.grite.cache.projection import Cache
from git_brat.git.store import Store
from git_brat.grite.model.state import canonical
import json


def _busy_repo(repo):
    a = grite(repo, "issue", "create", "Alpha", "-l", "x").out.strip()
    b = grite(repo, "issue", "create", "Beta").out.strip()
    grite(repo, "issue", "label", a, "--add", "y", "--remove", "x")
    grite(repo, "issue", "comment", b, "-m", "note")
    grite(repo, "dep", "add", a, "--on", b)
    grite(repo, "issue", "close", b)
    return a, b


def _answers(repo, a, b):
    return (grite(repo, "issue", "list", "--state", "all", "--json").out,
            grite(repo, "issue", "show", a, "--json").out,
            grite(repo, "issue", "show", b, "--json").out,
            grite(repo, "ready", "--json").out,
            grite(repo, "export").out)


def test_deleting_the_cache_changes_no_answer(grepo):
    a, b = _busy_repo(grepo)
    warm = _answers(grepo, a, b)
    shutil.rmtree(grepo / ".git" / "grite" / "cache")
    assert _answers(grepo, a, b) == warm
    grite(grepo, "rebuild")
    assert _answers(grepo, a, b) == warm


def test_a_damaged_cache_is_replaced_not_trusted(grepo):
    a, b = _busy_repo(grepo)
    warm = _answers(grepo, a, b)
    cache = grepo / ".git" / "grite" / "cache"
    for name in ("state.db", "state.db-wal", "state.db-shm", "meta"):
        (cache / name).write_bytes(b"\x00garbage")
        assert _answers(grepo, a, b) == warm


def test_the_cache_is_extended_incrementally_and_matches_a_full_replay(grepo):
    a, b = _busy_repo(grepo)
    store = Store.discover(str(grepo))
    Cache(store).state()
    grite(grepo, "issue", "create", "Gamma")
    cache = Cache(store)
    incremental = cache.state()
    assert not cache.rebuilt, "a new commit must extend the cache, not rebuild it"
    full = Cache(store).rebuild()
    assert canonical(incremental) == canonical(full)
    assert grite_json(grepo, "doctor")["ok"]


def test_an_unchanged_frontier_loads_the_cache_without_reading_logs(grepo):
    _busy_repo(grepo)
    store = Store.discover(str(grepo))
    Cache(store).issues()
    (grepo / ".git" / "grite" / "cache" / "lock").unlink(missing_ok=True)
    cache = Cache(store)
    cache.state()
    cache.issues()
    assert not cache.rebuilt
    assert not (grepo / ".git" / "grite" / "cache" / "lock").exists(), \
        "a warm read must not even take the writer lock"


def test_a_full_rebuild_reads_events_bigger_than_one_read_from_git(grepo, tmp_path):
    big = "long body " * 300_000   # 3 MB: spans several reads of the pipe from cat-file
    (tmp_path / "big.json").write_text(json.dumps([{"title": "small"}, {"title": "huge", "body": big}]))
    grite(grepo, "import", str(tmp_path / "big.json"))
    for i in range(3):
        grite(grepo, "issue", "create", f"after {i}")
    out = grite_json(grepo, "rebuild", "--full")
    assert out["events"] == out["replayed"] and out["problems"] == []
    huge = next(i for i in grite_json(grepo, "issue", "list") if i["title"] == "huge")
    assert grite_json(grepo, "issue", "show", huge["id"])["body"] == big
    assert len(grite_json(grepo, "issue", "list")) == 5


def test_a_write_rewrites_only_the_rows_of_the_entities_it_touched(grepo):
    import sqlite3
    a, b = _busy_repo(grepo)
    grite(grepo, "issue", "list")
    db = grepo / ".git" / "grite" / "cache" / "state.db"

    def rows():
        with sqlite3.connect(db) as conn:
            return {i: (rowid, body) for rowid, i, body in
                    conn.execute("SELECT rowid, id, body FROM entity")}
    before = rows()
    grite(grepo, "issue", "update", a, "--title", "Alpha renamed")
    grite(grepo, "issue", "show", a)   # brings the cache up to the new frontier
    after = rows()
    # Untouched rows are the very same rows (a rewrite of the whole table gives new rowids).
    assert {i: r for i, r in after.items() if i != a} == {i: r for i, r in before.items() if i != a}
    assert after[a] != before[a]
    listed = {i["id"]: i["title"] for i in grite_json(grepo, "issue", "list", "--state", "all")}
    assert listed[a] == "Alpha renamed" and listed[b] == "Beta"
    shutil.rmtree(grepo / ".git" / "grite" / "cache")
    assert {i["id"]: i["title"] for i in grite_json(grepo, "issue", "list", "--state", "all")} == listed

def test_a_cache_file_deleted_from_under_its_wal_is_made_again_clean(grepo):
    """A process still holds the old file with writes only in its WAL; the file alone is
    deleted. The new file must not take that WAL for its own."""
    import sqlite3
    for i in range(3):
        grite(grepo, "issue", "create", f"i{i}")
    grite(grepo, "issue", "list")
    db = grepo / ".git" / "grite" / "cache" / "state.db"
    old = sqlite3.connect(str(db), isolation_level=None)
    old.execute("PRAGMA wal_autocheckpoint=0")
    old.execute("UPDATE entity SET view=NULL, body=x'c1'")   # garbage, only in the WAL
    assert (db.parent / "state.db-wal").stat().st_size > 0
    db.unlink()
    try:
        listed = grite_json(grepo, "issue", "list")
        assert sorted(i["title"] for i in listed) == ["i0", "i1", "i2"]
        assert grite_json(grepo, "doctor")["ok"]
        assert canonical(Cache(Store.discover(str(grepo))).state()) == \
            canonical(Cache(Store.discover(str(grepo))).rebuild(full=True))
    finally:
        old.close()


def test_an_actor_renamed_is_shown_renamed_in_every_list_even_by_an_older_cache(grepo):
    """Stored list views name an issue's author by actor id (so that an actor's record arriving
    rewrites no view); a rename still shows everywhere, also over views a cache written before
    that held names."""
    import sqlite3
    from git_brat.grite.model import events as ev
    from git_brat.grite.log.wal import Draft
    from git_brat.grite.repo import Grite
    bot = grite_json(grepo, "actor", "new", "agent-2")
    for i in range(3):
        grite(grepo, "issue", "create", f"by the bot {i}", env={"GRITE_ACTOR": bot["id"]})

    def authors():
        return [i["author"] for i in grite_json(grepo, "issue", "list")]
    assert authors() == ["agent-2"] * 3
    db = grepo / ".git" / "grite" / "cache" / "state.db"
    with sqlite3.connect(db) as conn:
        views = conn.execute("SELECT view FROM entity WHERE kind = 'issue'").fetchall()
        assert all(bot["id"].encode() in v for (v,) in views)
        # As an older version wrote them: the author's name in the view.
        conn.execute("UPDATE entity SET view = CAST(replace(view, ?, 'agent-2') AS BLOB) "
                     "WHERE kind = 'issue'",
                     (bot["id"],))
    conn.close()
    assert authors() == ["agent-2"] * 3
    g = Grite.open(str(grepo))
    g.append([Draft(bot["id"], ev.SetFields({"name": "agent-renamed"}))], "rename")
    assert authors() == ["agent-renamed"] * 3
    shutil.rmtree(grepo / ".git" / "grite" / "cache")
    assert authors() == ["agent-renamed"] * 3


def test_a_stored_state_changed_in_memory_streams_as_the_same_state_held_whole(grepo):
    """Doctor digests a snapshot's state after replaying later events onto it: rows read from
    the file one at a time, with what memory changed or added merged in by key."""
    import msgspec
    from git_brat.grite.cache.projection import in_memory
    from git_brat.grite.model.state import Entity, digest
    a, b = _busy_repo(grepo)
    state = Cache(Store.discover(str(grepo))).state()
    first = state.entities[a]
    first.fields = {**first.fields, "title": ("changed in memory", 99, "x", "e")}
    state.entities[a] = first
    state.entities["0" * 32] = Entity(id="0" * 32, kind="issue")   # before every stored key
    state.entities["f" * 32] = Entity(id="f" * 32, kind="issue")   # after every stored key
    streamed = list(state.entities.stream())
    whole = in_memory(state)
    assert [k for k, _ in streamed] == sorted(whole.entities)
    assert [msgspec.msgpack.encode(e) for _, e in streamed] == \
        [msgspec.msgpack.encode(whole.entities[k]) for k in sorted(whole.entities)]
    assert digest(state) == digest(whole)


# (Titles that spell an author key, and names that are another actor's id: renamed once only.)
@given(st.lists(st.tuples(st.one_of(st.text(), st.just('"author":"a1"')),
                          st.sampled_from(["open", "closed", "opened", "open\""]),
                          st.sampled_from(["a1", "b2", "c3", "not hex", "0ff"]),
                          st.lists(st.text(max_size=5), max_size=2)), max_size=6),
       st.dictionaries(st.sampled_from(["a1", "b2", "0ff"]),
                       st.one_of(st.text(), st.sampled_from(["a1", "b2", "c3"])), max_size=3),
       st.sampled_from(["open", "closed", "all"]))
@example([("t", "open", "a1", []), ("u", "open", "b2", [])], {"a1": "b2", "b2": "x"}, "all")
@settings(max_examples=300, deadline=None)
def test_a_list_spliced_from_stored_views_is_byte_for_byte_the_encoded_list(items, names, which):
    from datetime import datetime, timezone
    from git_brat.grite.model.issueview import IssueView, decode_stored, join_stored
    when = datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc)
    stored = [msgspec.json.encode(IssueView(f"{i:032x}", title, state, labels, [], when, when,
                                            author, i))
              for i, (title, state, author, labels) in enumerate(items)]
    expect = [v for v in decode_stored(stored, names) if which == "all" or v.state == which]
    assert join_stored(stored, names, which) == msgspec.json.encode(expect)


def test_a_rebuild_shows_its_progress_on_a_terminal_and_nowhere_else(grepo):
    import pexpect
    for i in range(3):
        grite(grepo, "issue", "create", f"issue {i}")
    for argv, done in ((["rebuild", "--full"], "rebuilt cache: "), (["doctor"], "ok")):
        child = pexpect.spawn("git", ["grite", *argv], cwd=str(grepo), timeout=60,
                              encoding="utf-8")
        try:
            child.expect("replaying the log: ")
            child.expect(done)
            child.expect(pexpect.EOF)
        finally:
            child.close(force=True)
        assert child.exitstatus == 0, argv
    assert "replaying" not in grite(grepo, "doctor").err
    piped = grite(grepo, "rebuild", "--full")
    assert "replaying" not in piped.err and "\x1b" not in piped.err
