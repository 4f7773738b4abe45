"""An import larger than one batch is made in parts of whole issues; importing again completes it."""

from __future__ import annotations

import json

import pytest

from helpers import git, grite_json, wal_tip

from git_brat.grite.model import events as ev

BODY = 3 << 20     # bytes of each issue's body: under one event's bound, many over one batch's


@pytest.mark.slow
def test_an_import_over_one_batch_is_made_in_parts_and_again_adds_nothing(grepo, tmp_path):
    n = ev.MAX_BATCH_BYTES // BODY + 4
    items = [{"title": f"big {i}", "body": f"{i:04d}" + "x" * (BODY - 4)} for i in range(n)]
    cut = tmp_path / "cut.json"             # what a crash after a first part leaves imported
    cut.write_text(json.dumps(items[:2]))
    done = grite_json(grepo, "import", str(cut))["created"]
    f = tmp_path / "big.json"
    f.write_text(json.dumps(items))
    tip = wal_tip(grepo)
    got = grite_json(grepo, "import", str(f))          # completes it
    assert len(got["created"]) == n - 2 and sorted(got["skipped"]) == sorted(done)
    assert len(got["commits"]) >= 2 and got["commit"] == got["commits"][-1]
    assert git(grepo, "rev-list", "--count", f"{tip}..refs/grite/wal") == str(len(got["commits"]))
    listed = grite_json(grepo, "issue", "list", "--state", "all")
    assert sorted(i["title"] for i in listed) == sorted(f"big {i}" for i in range(n))
    again = grite_json(grepo, "import", str(f))
    assert again["created"] == [] and len(again["skipped"]) == n and again["commits"] == []

