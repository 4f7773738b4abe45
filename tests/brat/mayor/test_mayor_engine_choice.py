"""`mayor ask` says which engine it asks, follows a changed mayor.engine, refuses an unknown one."""

from __future__ import annotations

import json

from bratkit import fail
from helpers import brat, git
import mayorkit
from mayorkit import runs

mrepo, record = mayorkit.mrepo, mayorkit.record   # the kit's fixtures, used here by name


def test_ask_says_its_engine_and_follows_a_changed_mayor_engine(mrepo, record):
    first = brat(mrepo, "mayor", "ask", "Plan the tab fix", "--yes")
    assert "(asked engine plan: mayor.engine)" in first.out
    brat(mrepo, "config", "set", "mayor.engine", "fenced")
    second = brat(mrepo, "mayor", "ask", "Plan it again", "--yes", "--dry-run")
    assert "(asked engine fenced: mayor.engine; conversation" in " ".join(second.out.split())
    out = json.loads(brat(mrepo, "mayor", "ask", "Plan it again", "--yes", "--json").out)
    assert out["engine"] == "fenced" and "was with plan" in out["engine_why"]
    assert [r["argv"][0] for r in runs(record)] == ["plan", "fenced", "fenced"]
    # The new engine cannot resume the old one's conversation: it is told what came before.
    assert "Earlier in this conversation" in runs(record)[-1]["prompt"]
    conv = brat(mrepo, "mayor", "status", "--json")
    assert json.loads(conv.out)["conversation"]["engine"] == "fenced"


def test_an_engine_chosen_at_start_is_kept_and_ask_says_so(mrepo, record):
    brat(mrepo, "mayor", "start", "--engine", "prose")
    brat(mrepo, "config", "set", "mayor.engine", "fenced")
    run = brat(mrepo, "mayor", "ask", "Plan the tab fix", "--yes")
    assert "(asked engine prose: chosen by `git brat mayor start --engine`" in run.out
    assert [r["argv"][0] for r in runs(record)] == ["prose"]


def test_an_unknown_mayor_engine_is_refused_naming_the_known_ones(mrepo):
    before = (mrepo / ".brat" / "config.toml").read_text()
    rc, err = fail(mrepo, "config", "set", "mayor.engine", "nope")
    assert rc == 2 and "mayor.engine = \"nope\" is not allowed" in err
    assert "claude" in err and "plan" in err and "[engines.nope]" in err
    assert (mrepo / ".brat" / "config.toml").read_text() == before
    assert git(mrepo, "status", "--porcelain") == ""
