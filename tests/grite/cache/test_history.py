"""A long history: closed issues go cold (out of default lists, never out of reach), and the
cache is updated in place, giving what a full replay gives."""

from __future__ import annotations

import time

from hypothesis import HealthCheck, given, settings, strategies as st

from helpers import git, grite, grite_json
from git_brat.grite.model import events as ev
from git_brat.grite import issues
from git_brat.grite.cache.projection import Cache
from git_brat.grite.log.wal import Draft
from git_brat.grite.repo import Grite
from git_brat.grite.model.state import canonical, digest, replay
from git_brat.grite.log.refs import log_tips

YEAR_AGO = time.time() - 365 * 86400


def _long_ago(monkeypatch, work):
    """Run work() with the clock a year back (what it writes is then a year old)."""
    with monkeypatch.context() as m:
        m.setattr(time, "time", lambda: YEAR_AGO)
        return work()


def test_closed_issues_untouched_for_a_month_leave_the_lists_but_stay_in_all_show_and_export(
        grepo, monkeypatch):
    g = Grite.open(str(grepo))
    old = _long_ago(monkeypatch, lambda: issues.create(g, "Fixed last year"))
    _long_ago(monkeypatch, lambda: issues.set_state(g, old, "closed"))
    recent = grite(grepo, "issue", "create", "Fixed today").out.strip()
    grite(grepo, "issue", "close", recent)
    still_open = _long_ago(monkeypatch, lambda: issues.create(g, "Open for a year"))

    def listed(*args):
        return {i["id"] for i in grite_json(grepo, "issue", "list", *args)}
    assert listed("--state", "closed") == {recent}
    assert listed("--state", "all") == {recent, still_open}   # open issues are never cold
    assert listed("--state", "closed", "--all") == {old, recent}
    assert listed("--state", "all", "--all") == {old, recent, still_open}
    assert "Fixed last year" in grite(grepo, "issue", "list", "--state", "closed", "--all").out
    assert grite_json(grepo, "issue", "show", old)["title"] == "Fixed last year"
    assert "Fixed last year" in grite(grepo, "export").out
    git(grepo, "config", "grite.coldAfterDays", "0")   # 0: nothing is ever cold
    assert listed("--state", "closed") == {old, recent}
    git(grepo, "config", "grite.coldAfterDays", "400")
    assert listed("--state", "closed") == {old, recent}
    git(grepo, "config", "grite.coldAfterDays", "a while")
    proc = grite(grepo, "issue", "list", check=False)
    assert proc.returncode != 0 and "grite.coldAfterDays" in proc.err and proc.err.count("\n") == 1


OPS = st.lists(st.tuples(st.integers(0, 4), st.sampled_from(["create", "title", "label", "unlabel",
                                                               "comment", "close"])),
               min_size=1, max_size=12)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rounds=st.lists(OPS, min_size=1, max_size=4))
def test_a_cache_updated_in_place_round_after_round_equals_a_full_replay(grepo, rounds):
    g = Grite.open(str(grepo))
    Cache(g.store).state()   # the file exists from here on: every round below extends it
    ids = [ev.new_entity_id() for _ in range(5)]
    for ops in rounds:
        drafts = []
        for i, what in ops:
            eid = ids[i]
            if what == "create":
                drafts.append(Draft(eid, ev.Create("issue", {"title": f"i{i}", "state": "open"})))
            elif what == "title":
                drafts.append(Draft(eid, ev.SetFields({"title": f"t{len(drafts)}"})))
            elif what == "label":
                drafts.append(Draft(eid, ev.AddTo("labels", f"l{i}")))
            elif what == "unlabel":
                ent = g.state().entities.get(eid)
                tags = ent.live_tags("labels", f"l{i}") if ent else []
                drafts.append(Draft(eid, ev.RemoveFrom("labels", f"l{i}", tags)))
            elif what == "comment":
                drafts.append(Draft(eid, ev.Comment(f"c{len(drafts)}")))
            else:
                drafts.append(Draft(eid, ev.SetFields({"state": "closed"})))
        g.append(drafts, "property round")
        cache = Cache(g.store)
        stepped = cache.state()       # extends the file by this round's rows only
        assert not cache.rebuilt
        events = []
        from git_brat.grite.log.wal import LogReader
        reader = LogReader(g.store)
        for chunk in reader.all_batches(log_tips(g.store).values()):
            for batch in chunk:
                events += batch.events
        assert canonical(stepped) == canonical(replay(events))
        # doctor's comparison: streamed from the file in id order, equal to the in-memory one
        assert digest(Cache(g.store).stored()[1]) == digest(replay(events))
        listed = {v.id: (v.title, v.state, v.labels, v.comments) for v in cache.issues()}
        truth = replay(events)
        assert listed == {e.id: (e.get("title", ""), e.get("state", "open"), e.members("labels"),
                                 len(e.comments)) for e in truth.of_kind("issue")}
