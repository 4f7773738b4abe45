"""A user orders work with dependencies: dep add/remove/list/topo and `ready`."""

from __future__ import annotations

from helpers import grite, grite_json, issues, wal_tip


def _issues(repo, *titles):
    return [grite(repo, "issue", "create", t).out.strip() for t in titles]


def test_ready_lists_open_issues_whose_prerequisites_are_closed(grepo):
    design, build, ship = _issues(grepo, "Design", "Build", "Ship")
    grite(grepo, "dep", "add", build, "--on", design)
    grite(grepo, "dep", "add", design, "--on", ship, "--type", "blocks")   # design blocks ship
    assert [i["id"] for i in grite_json(grepo, "ready")] == [design]
    grite(grepo, "issue", "close", design)
    assert [i["id"] for i in grite_json(grepo, "ready")] == [build, ship]
    grite(grepo, "issue", "reopen", design)
    assert [i["id"] for i in grite_json(grepo, "ready")] == [design]


def test_topo_puts_prerequisites_first_in_a_stable_order(grepo):
    a, b, c, d = _issues(grepo, "A", "B", "C", "D")
    grite(grepo, "dep", "add", a, "--on", d)
    grite(grepo, "dep", "add", b, "--on", c)
    order = [i["id"] for i in grite_json(grepo, "dep", "topo")]
    assert order.index(d) < order.index(a) and order.index(c) < order.index(b)
    assert order == [i["id"] for i in grite_json(grepo, "dep", "topo")]
    assert order == [c, b, d, a]   # among ready ones, the oldest first


def test_a_cycle_is_refused_and_named(grepo):
    a, b, c = _issues(grepo, "Alpha", "Beta", "Gamma")
    grite(grepo, "dep", "add", a, "--on", b)
    grite(grepo, "dep", "add", b, "--on", c)
    tip = wal_tip(grepo)
    proc = grite(grepo, "dep", "add", c, "--on", a, check=False)
    assert proc.returncode == 5
    assert "cycle" in proc.err and "Alpha" in proc.err and "Gamma" in proc.err
    assert wal_tip(grepo) == tip
    proc = grite(grepo, "dep", "add", a, "--on", c, "--type", "blocks", check=False)
    assert proc.returncode == 5 and wal_tip(grepo) == tip
    grite(grepo, "dep", "add", c, "--on", a, "--type", "related_to")   # no ordering: allowed


def test_dep_list_and_remove(grepo):
    a, b = _issues(grepo, "A", "B")
    grite(grepo, "dep", "add", a, "--on", b)
    assert grite_json(grepo, "dep", "list", a)["depends_on"] == [b]
    assert grite_json(grepo, "dep", "list", b)["dependents"] == [a]
    grite(grepo, "dep", "remove", a, "--on", b)
    assert grite_json(grepo, "dep", "list", a)["depends_on"] == []
    proc = grite(grepo, "dep", "remove", a, "--on", b, check=False)
    assert proc.returncode == 3 and "no depends_on dependency" in proc.err


def test_topo_never_drops_issues_caught_in_a_cycle_made_by_two_replicas(grepo):
    from git_brat.grite.model import events as ev
    from git_brat.grite.log.wal import Draft
    from git_brat.grite.repo import Grite
    a = grite(grepo, "issue", "create", "A").out.strip()
    b = grite(grepo, "issue", "create", "B").out.strip()
    c = grite(grepo, "issue", "create", "C").out.strip()
    g = Grite.open(str(grepo))   # what two replicas' concurrent `dep add`s merge into
    g.append([Draft(a, ev.AddTo("dep:depends_on", b)), Draft(b, ev.AddTo("dep:depends_on", a))], "x")
    order = [i["id"] for i in grite_json(grepo, "dep", "topo")]
    assert sorted(order) == sorted([a, b, c]) and order[0] == c


def test_dependencies_show_on_both_issues_they_join(grepo):
    a, b, c = issues(grepo, "a", "b", "c")
    grite(grepo, "dep", "add", a, "--on", b, "--type", "blocks")      # a blocks b
    grite(grepo, "dep", "add", a, "--on", c, "--type", "related_to")
    deps_b = grite_json(grepo, "dep", "list", b)
    assert deps_b["blocked_by"] == [a]
    assert grite_json(grepo, "issue", "show", b)["deps"]["blocked_by"] == [a]
    assert grite_json(grepo, "dep", "list", c)["related_to"] == [a]
    assert grite_json(grepo, "dep", "list", a)["related_to"] == [c]
    assert "blocked_by" in grite(grepo, "dep", "list", b).out
