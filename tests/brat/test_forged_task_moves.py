"""A pushed log that moves a task where the state machine does not allow is rejected on replay."""

from __future__ import annotations

import time

from bratkit import convoy, status_of, task
from gritekit import forge_log
from helpers import brat, brat_json, grite_json

from git_brat.grite.model import events as ev


def test_a_forged_queued_to_merged_move_is_rejected_and_its_dependant_stays_blocked(brepo):
    conv = convoy(brepo)
    first = task(brepo, conv, "first")
    second = task(brepo, conv, "second", "--needs", first)
    # Anyone with push access: one event claiming the task went from needs-review to merged.
    forged = ev.make_event(first, "ee" * 8, 1000, int(time.time() * 1000),
                           ev.SetFields({"status": "merged", "status_from": "needs-review"}))
    forge_log(brepo, "0" * 16, [forged])

    assert status_of(brepo, first) == "queued"
    shown = brat_json(brepo, "task", "show", second)
    assert shown["status"] == "queued" and not shown["ready"]
    assert all(h["to_status"] != "merged" for h in brat_json(brepo, "task", "show", first)["history"])
    findings = grite_json(brepo, "doctor")["findings"]
    assert any(f["kind"] == "rejected" and f["subject"] == forged.id and
               "queued -> merged" in f["detail"] for f in findings)
    assert brat_json(brepo, "status")["recovery"]["rejected_events"] == 1
    assert "events rejected on replay" in brat(brepo, "status").out
    # The genuine path still works after it.
    for s in ("running", "needs-review", "merging", "merged"):
        brat(brepo, "task", "update", first, "--status", s)
    assert status_of(brepo, first) == "merged"
    assert brat_json(brepo, "task", "show", second)["ready"]
