"""Logs anyone can push that once bricked every clone: each is rejected or skipped, and reported."""

from __future__ import annotations

import json

import msgspec

from gritekit import forge_log
from helpers import git, grite, grite_json, issues, run

from git_brat.grite.model import events as ev

FORGER = "f" * 16


def _every_read_works(repo, iid: str) -> None:
    for args in (["issue", "list"], ["issue", "show", iid], ["log", "-n", "3"], ["export"],
                 ["issue", "list", "--json"], ["log", "--json"]):
        proc = grite(repo, *args, check=False)
        assert proc.returncode == 0 and "Traceback" not in proc.err, (args, proc.err)


def test_a_clock_of_2_64_minus_1_is_rejected_and_every_later_write_still_works(grepo):
    (iid,) = issues(grepo, "before")
    poison = ev.make_event(iid, "cc" * 8, (1 << 64) - 1, 0, ev.Comment("hi"))
    bad = forge_log(grepo, FORGER, [poison])
    grite(grepo, "issue", "comment", iid, "-m", "still there?")
    issues(grepo, "after")
    shown = grite_json(grepo, "issue", "show", iid)
    assert [c["body"] for c in shown["comments"]] == ["still there?"]
    # (Far above anything its writer had seen: the whole batch is not believed.)
    report = json.loads(grite(grepo, "doctor", "--json", check=False).out)
    assert any(f["kind"] == "rejected-batch" and f["subject"] == bad and
               "Lamport clock" in f["detail"] for f in report["findings"])
    _every_read_works(grepo, iid)


def test_a_timestamp_of_2_62_breaks_no_view(grepo):
    (iid,) = issues(grepo, "an issue")
    poison = ev.make_event(iid, "cc" * 8, 7, 1 << 62, ev.Comment("from the future"))
    forge_log(grepo, FORGER, [poison])
    _every_read_works(grepo, iid)
    logged = {e["event"]: e for e in json.loads(grite(grepo, "log", "--json").out)}
    assert "timestamp" in logged[poison.id]["rejected"]
    assert grite_json(grepo, "issue", "show", iid)["comments"] == []


def _deep_batch(entity: str, depth: int) -> bytes:
    val = b"\x91" * depth + b"\xa1x"
    op = b"\x92" + msgspec.msgpack.encode("s") + b"\x81" + msgspec.msgpack.encode("title") + val
    event = b"\x96" + b"".join(msgspec.msgpack.encode(x) for x in ["e" * 32, entity, "x", 9, 0]) + op
    return b"\x94" + b"".join(msgspec.msgpack.encode(x) for x in [1, FORGER, 9]) + b"\x91" + event


def test_a_value_nested_200000_deep_is_skipped_as_corrupt_and_doctor_fix_quarantines_it(grepo):
    (iid,) = issues(grepo, "an issue")
    bad = forge_log(grepo, FORGER, _deep_batch(iid, 200_000))
    _every_read_works(grepo, iid)
    assert bad in grite(grepo, "issue", "list").err   # skipped, and said
    proc = grite(grepo, "doctor", "--json", check=False)
    assert proc.returncode == 6
    assert any(f["kind"] == "corrupt" and f["subject"] == bad and "nested too deep" in f["detail"]
               for f in json.loads(proc.out)["findings"])
    grite(grepo, "doctor", "--fix")
    report = grite_json(grepo, "doctor")
    assert report["ok"] and any(f["kind"] == "quarantined" and f["subject"] == bad
                                for f in report["findings"])
    assert bad in git(grepo, "rev-parse", f"refs/grite/replicas/{FORGER}")   # kept, set aside
    proc = grite(grepo, "issue", "list")
    assert bad not in proc.err and iid[:7] in proc.out


def test_a_batch_of_too_many_entities_is_skipped_whole(grepo):
    (iid,) = issues(grepo, "an issue")
    spam = [ev.make_event(f"{i:032x}", "cc" * 8, 60, 0, ev.Create("issue", {"title": "spam", "state": "open"}))
            for i in range(ev.MAX_BATCH_ENTITIES + 1)]
    bad = forge_log(grepo, FORGER, spam)
    proc = grite(grepo, "issue", "list", "--json")
    assert [i["id"] for i in json.loads(proc.out)] == [iid]
    assert bad in proc.err


def test_an_events_blob_past_the_batch_size_is_skipped_unread(grepo):
    (iid,) = issues(grepo, "an issue")
    huge = ev.make_event(iid, "cc" * 8, 50, 0, ev.Comment("A" * (ev.MAX_BATCH_BYTES + 16)))
    bad = forge_log(grepo, FORGER, [huge])
    for args in (["issue", "list"], ["rebuild", "--full"]):
        proc = run(["/usr/bin/time", "-f", "rss=%M", "git", "grite", *args], grepo)
        assert bad in proc.err and "skipped unread" in proc.err
        peak_kb = int(proc.err.rpartition("rss=")[2].split()[0])
        assert peak_kb < 48 * 1024, (args, peak_kb)   # never the 64 MB blob in memory
    assert grite_json(grepo, "issue", "show", iid)["comments"] == []
