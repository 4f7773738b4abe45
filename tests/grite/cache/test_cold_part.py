"""A fresh clone is ready on its snapshot's recent rows; the settled ones (its cold part) come
after, in the background or when a command needs them, and no answer is ever given from a
part: whatever needs a settled entity waits for them, or says why it cannot."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import time

import msgspec
import pytest

from helpers import git, grite, grite_json, run, status
from sync_helpers import clone, seeded_hub

from git_brat.grite import issues
from git_brat.grite.cache import snapdb
from git_brat.grite.cache import snapshot
from git_brat.grite.cache.projection import Cache
from git_brat.git.store import Store
from git_brat.grite.repo import Grite
from git_brat.grite.model.state import digest

YEAR_AGO = time.time() - 365 * 86400


def _long_ago(monkeypatch, work):
    with monkeypatch.context() as m:
        m.setattr(time, "time", lambda: YEAR_AGO)
        return work()


class Hub:
    """A hub whose snapshot holds last year's closed issues apart (its cold part)."""

    def __init__(self, tmp_path, monkeypatch):
        self.path = seeded_hub(tmp_path)
        self.url = f"file://{self.path}"
        self.tmp = tmp_path
        w = self.writer = clone(self.url, tmp_path / "writer")
        g = Grite.open(str(w))
        self.settled = []
        for i in range(6):
            eid = _long_ago(monkeypatch, lambda i=i: issues.create(g, f"fixed last year {i}"))
            _long_ago(monkeypatch, lambda eid=eid: issues.comment(g, eid, "it was the parser"))
            _long_ago(monkeypatch, lambda eid=eid: issues.set_state(g, eid, "closed"))
            self.settled.append(eid)
        self.open_old = _long_ago(monkeypatch, lambda: issues.create(g, "open since last year"))
        self.recent = grite_json(w, "issue", "create", "fixed today")["id"]
        grite(w, "issue", "close", self.recent)
        self.open_new = grite_json(w, "issue", "create", "opened today")["id"]
        snap = grite_json(w, "snapshot")
        self.snapshot = snap["commit"] if "commit" in snap else snap["snapshot"]
        grite(w, "sync")
        meta = snapshot.read(Store.discover(str(w)), snapshot.own_ref(_replica(w)))
        self.cold = meta.meta.cold

    def clone(self, name: str, fetch_cold: str = "when-needed", **setting):
        c = clone(self.url, self.tmp / name, init=False)
        git(c, "config", "grite.fetchCold", fetch_cold)
        for key, value in setting.items():
            git(c, "config", f"grite.{key}", value)
        grite(c, "init")
        return c


def _replica(repo) -> str:
    return json.loads((repo / ".git" / "grite" / "replica.json").read_text())["id"]


def _has(repo, sha: str) -> bool:
    return run(["git", "cat-file", "-e", sha], repo, check=False).returncode == 0


def _listed(repo, *args) -> list[tuple]:
    return sorted((i["id"], i["state"], i["comments"])
                  for i in grite_json(repo, "issue", "list", *args))


def _pending(repo):
    return Cache(Store.discover(str(repo))).cold_pending()


@pytest.fixture
def hub(tmp_path, monkeypatch):
    return Hub(tmp_path, monkeypatch)


def test_a_snapshot_holds_settled_entities_apart_in_a_parent_commit(hub):
    cold = hub.cold
    assert cold is not None and cold.rows == len(hub.settled)
    writer = Store.discover(str(hub.writer))
    snap = snapshot.read(writer, snapshot.own_ref(_replica(hub.writer)))
    # A parent of the snapshot commit: gc on the hub keeps it, a depth-1 fetch leaves it.
    assert cold.commit in git(hub.path, "rev-parse", f"{snap.commit}^@").split()
    assert snap.meta.entities == len(hub.settled) + 3 + 1   # 3 more issues, its actor


def test_a_fresh_clone_lists_recent_work_before_the_settled_part_arrives_then_fetches_it_when_needed(hub):
    c = hub.clone("c")
    assert not _has(c, hub.cold.commit)          # still on the hub
    assert _pending(c).rows == len(hub.settled)
    # The default lists need none of it ...
    assert {i for i, *_ in _listed(c, "--state", "all")} == {hub.open_old, hub.recent, hub.open_new}
    assert _listed(c, "--state", "all") == _listed(hub.writer, "--state", "all")
    assert not _has(c, hub.cold.commit)
    # ... a settled issue is fetched, whole, the moment something asks for it.
    shown = grite_json(c, "issue", "show", hub.settled[0])
    assert shown["title"] == "fixed last year 0" and shown["state"] == "closed"
    assert [x["body"] for x in shown["comments"]] == ["it was the parser"]
    assert _has(c, hub.cold.commit) and _pending(c) is None
    assert _listed(c, "--state", "all", "--all") == _listed(hub.writer, "--state", "all", "--all")
    merged = digest(Cache(Store.discover(str(c))).state())
    assert status(c) == ""
    # Exactly what replaying every event gives.
    grite(c, "deepen")
    grite(c, "rebuild", "--full")
    assert digest(Cache(Store.discover(str(c))).state()) == merged


@pytest.mark.parametrize("ask", [["issue", "list", "--state", "all", "--all"], ["export"],
                                 ["issue", "list", "--state", "closed", "--all"]])
def test_every_answer_that_includes_settled_work_waits_for_it(hub, ask):
    c = hub.clone("c")
    out = grite(c, *ask).out
    assert "fixed last year 3" in out
    assert _pending(c) is None


def test_a_clone_that_keeps_settled_issues_listed_longer_waits_for_them(hub):
    c = hub.clone("c", coldAfterDays="400")   # its lists show last year's closed issues
    titles = {i["title"] for i in grite_json(c, "issue", "list", "--state", "closed")}
    assert "fixed last year 5" in titles and _pending(c) is None


def test_init_fetches_the_settled_part_in_a_background_process_it_names(hub):
    c = hub.clone("c", fetch_cold="background")
    pid_file = c / ".git" / "grite" / "cold.pid"
    pid = json.loads(pid_file.read_text())["pid"] if pid_file.exists() else None
    try:
        # The lists answer at once, whether or not it has finished.
        assert {i for i, *_ in _listed(c, "--state", "all")} == {hub.open_old, hub.recent,
                                                                 hub.open_new}
        deadline = time.monotonic() + 60
        while pid is not None and _alive(pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert pid is None or not _alive(pid)
    finally:
        if pid is not None and _alive(pid):
            os.kill(pid, signal.SIGKILL)
    assert _has(c, hub.cold.commit) and _pending(c) is None
    assert not pid_file.exists()
    assert grite_json(c, "fetch-cold") == {"fetched": False, "entities": 0, "snapshot": None}
    assert status(c) == ""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # (A zombie of ours counts as ended: init is its parent and has exited.)
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def test_fetch_cold_now_takes_it_in_before_init_returns(hub):
    c = hub.clone("c", fetch_cold="now")
    assert _has(c, hub.cold.commit) and _pending(c) is None


def test_a_new_event_on_a_settled_issue_takes_the_settled_part_in_first(hub):
    grite(hub.writer, "issue", "reopen", hub.settled[2])
    grite(hub.writer, "issue", "comment", hub.settled[2], "-m", "it came back")
    grite(hub.writer, "sync")
    c = hub.clone("c")
    # The delta after the snapshot touched a row of the cold part: it was taken in first,
    # so the reopened issue is whole (its old comment too), not a half-entity.
    assert _has(c, hub.cold.commit) and _pending(c) is None
    shown = grite_json(c, "issue", "show", hub.settled[2])
    assert shown["state"] == "open"
    assert [x["body"] for x in shown["comments"]] == ["it was the parser", "it came back"]
    assert hub.settled[2] in {i for i, *_ in _listed(c)}


def test_offline_a_clone_still_lists_recent_work_and_says_why_it_cannot_show_settled_work(hub):
    c = hub.clone("c")
    away = hub.path.with_name("hub-away.git")
    hub.path.rename(away)
    try:
        assert {i for i, *_ in _listed(c)} == {hub.open_old, hub.open_new}
        before = (git(c, "for-each-ref"), (c / ".git" / "grite" / "cache" / "meta").read_bytes())
        proc = grite(c, "issue", "show", hub.settled[1], check=False)
        assert proc.returncode != 0 and proc.out == ""
        assert proc.err.count("\n") == 1 and "git grite fetch-cold" in proc.err
        assert "6 settled entities" in proc.err
        proc = grite(c, "fetch-cold", "--json", check=False)
        assert proc.returncode != 0 and proc.out == "" and proc.err.count("\n") == 1
        assert (git(c, "for-each-ref"), (c / ".git" / "grite" / "cache" / "meta").read_bytes()) \
            == before
    finally:
        away.rename(hub.path)
    got = grite_json(c, "fetch-cold")
    assert got == {"fetched": True, "entities": len(hub.settled), "snapshot": hub.snapshot}
    assert grite_json(c, "issue", "show", hub.settled[1])["state"] == "closed"


def test_a_whole_history_clone_has_the_settled_part_with_the_history(hub):
    c = hub.clone("c", shallowClone="false")
    assert _has(c, hub.cold.commit)
    assert _listed(c, "--state", "all", "--all") == _listed(hub.writer, "--state", "all", "--all")
    # doctor replays what the snapshot covers and finds it whole and right.
    report = grite_json(c, "doctor")
    assert not [f for f in report["findings"] if f["kind"].startswith("snapshot")], report


def test_doctor_in_a_cut_clone_checks_from_the_whole_snapshot(hub):
    c = hub.clone("c")
    report = grite_json(c, "doctor")
    assert [f["kind"] for f in report["findings"]] == ["history-cut"], report
    assert _pending(c) is None


def test_a_cold_part_that_is_not_the_rows_its_snapshot_lists_is_never_merged(hub, tmp_path):
    store = Store.discover(str(hub.writer))
    snap = snapshot.read(store, snapshot.own_ref(_replica(hub.writer)))
    hot, cold = str(tmp_path / "hot.db"), str(tmp_path / "cold.db")
    start = snapshot.adopted(store, snap, hot, durable=False)
    assert start is not None and snapshot.adopt_cold(store, snap, cold)
    # A listed row missing, replaced by a copy of a hot one: same count, other rows.
    tampered = sqlite3.connect(cold)
    tampered.execute("DELETE FROM entity WHERE id = ?", (hub.settled[0],))
    tampered.execute("ATTACH DATABASE ? AS hot", (hot,))
    tampered.execute(f"INSERT INTO entity ({snapdb.cachedb.ENTITY_COLUMNS}) SELECT "
                     f"{snapdb.cachedb.ENTITY_COLUMNS} FROM hot.entity WHERE id = ?",
                     (hub.open_old,))
    tampered.commit()
    tampered.close()
    conn = sqlite3.connect(hot, isolation_level=None)
    rows_before = conn.execute("SELECT COUNT(*) FROM entity").fetchone()[0]
    with pytest.raises(snapdb.ColdMismatch):
        snapdb.add_cold(conn, cold, None)
    assert conn.execute("SELECT COUNT(*) FROM entity").fetchone()[0] == rows_before
    assert conn.execute("SELECT COUNT(*) FROM kv WHERE space = 'cold'").fetchone()[0] == 6
    conn.close()


def test_a_cold_part_that_fails_its_checks_is_refused_and_the_clone_says_to_deepen(hub):
    # A snapshot whose recent rows are right but whose cold part is not an SQLite file.
    store = Store.discover(str(hub.writer))
    snap = snapshot.read(store, snapshot.own_ref(_replica(hub.writer)))
    packed, frames = snapshot.pack(b"not a database " * 5000)
    author, when = b"Forger <forger@example.com>", int(time.time())
    bad = store.objects.write_tree_commit({snapshot.COLD_DB: packed}, [], "forged", author, when)
    meta = msgspec.structs.replace(snap.meta, cold=msgspec.structs.replace(
        snap.meta.cold, commit=bad.decode(), frames=frames))
    hot = store.objects.read_large_blob(snap.commit.encode(), snapshot.STATE_DB)
    forged = store.objects.write_tree_commit({b"meta": msgspec.msgpack.encode(meta),
                                      snapshot.STATE_DB: hot},
                                     [c.encode() for c in snap.meta.covers] + [bad], "forged",
                                     author, when).decode()
    git(hub.writer, "push", "-q", "--force", hub.url, f"{forged}:{snap.ref}")
    c = hub.clone("c")
    assert {i for i, *_ in _listed(c)} == {hub.open_old, hub.open_new}   # recent rows: fine
    proc = grite(c, "issue", "show", hub.settled[0], check=False)
    assert proc.returncode != 0 and proc.out == "" and proc.err.count("\n") == 1
    assert "git grite deepen" in proc.err and "cold part failed its checks" in proc.err
    assert forged in snapshot.rejected(Store.discover(str(c)))
    grite(c, "deepen")   # the whole history: replayed in full, the forged snapshot never used
    shown = grite_json(c, "issue", "show", hub.settled[0])
    assert shown["state"] == "closed" and shown["comments"][0]["body"] == "it was the parser"
    assert _listed(c, "--state", "all", "--all") == _listed(hub.writer, "--state", "all", "--all")


def test_a_bad_fetch_cold_setting_is_refused_before_init_writes_anything(hub):
    c = clone(hub.url, hub.tmp / "c", init=False)
    git(c, "config", "grite.fetchCold", "sometimes")
    before = git(c, "for-each-ref")
    proc = grite(c, "init", check=False)
    assert proc.returncode != 0 and "grite.fetchCold" in proc.err and proc.err.count("\n") == 1
    assert git(c, "for-each-ref") == before
    assert not (c / ".git" / "grite").exists()


def test_no_cold_part_when_nothing_is_settled_long_enough(tmp_path):
    hub = seeded_hub(tmp_path)
    w = clone(f"file://{hub}", tmp_path / "w")
    eid = grite_json(w, "issue", "create", "fixed today")["id"]
    grite(w, "issue", "close", eid)
    grite(w, "snapshot")
    snap = snapshot.read(Store.discover(str(w)), snapshot.own_ref(_replica(w)))
    assert snap.meta.cold is None


@pytest.mark.parametrize("damage", [None, "a listed id is also a row", "a listed id has a value"])
def test_a_hot_part_whose_cold_list_disagrees_with_itself_is_not_used(hub, tmp_path, damage):
    store = Store.discover(str(hub.writer))
    snap = snapshot.read(store, snapshot.own_ref(_replica(hub.writer)))
    path = str(tmp_path / "hot.db")
    assert snapshot._unpack_blob(store, snap.commit.encode(), snapshot.STATE_DB, snap.meta.frames,
                                 path)
    conn = sqlite3.connect(path, isolation_level=None)
    if damage == "a listed id is also a row":
        conn.execute("UPDATE kv SET k = ? WHERE space = 'cold' AND k = ?",
                     (hub.open_old, hub.settled[0]))
    elif damage == "a listed id has a value":
        conn.execute("UPDATE kv SET v = x'c0' WHERE space = 'cold' AND k = ?", (hub.settled[0],))
    conn.close()
    got = snapdb.adopt(path, durable=False)
    assert (got is None) == (damage is not None)
    if got is not None:
        assert got.cold_ids == len(hub.settled)
