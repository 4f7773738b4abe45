"""The inbox's delivery claims are pruned once their items are long gone, never while an item
waits (so nothing is sent twice); a sink added later starts from then (no backlog)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from bratkit import convoy, move, task
from helpers import brat, git, grite
from refinerykit import two_clones

RECORD = """import sys
data = sys.stdin.read()
with open(sys.argv[1], "a") as f:
    f.write(data.replace("\\n", " ") + "\\n")
"""
EIGHT_DAYS_MS = 8 * 86_400_000


def _command_sink(clone: Path, out: Path, name: str = "brat.inbox.command") -> None:
    script = out.parent / "record.py"
    script.write_text(RECORD)
    git(clone, "config", name, f"{sys.executable} {script} {out}")
    brat(clone, "config", "set", "--local", "inbox.debounce", "0")


def _sent(out: Path) -> list[dict]:
    return [json.loads(line) for line in out.read_text().splitlines()] if out.exists() else []


def _claims(repo) -> list[str]:
    listed = git(repo, "for-each-ref", "--format=%(refname)", "refs/grite/locks/inbox/")
    return listed.split()


def _prune(repo, later_ms: int = 0) -> list[str]:
    from git_brat import process
    from git_brat.brat import inbox, trust
    from git_brat.grite.repo import Grite
    g = Grite.open(str(repo))
    waiting = inbox.items(g, trust.load(g.store).config)
    return inbox.prune_claims(g, waiting, process.now_ms() + later_ms)


def test_the_claims_of_items_gone_for_a_week_are_pruned_a_bounded_number_a_pass(brepo, tmp_path,
                                                                               monkeypatch):
    out = tmp_path / "events.jsonl"
    _command_sink(brepo, out)
    c = convoy(brepo, "Work")
    asked, broke, other = (task(brepo, c, f"Task {i}") for i in range(3))
    brat(brepo, "task", "update", asked, "--status", "blocked", "-m", "which db?")
    brat(brepo, "task", "update", other, "--status", "blocked", "-m", "which port?")
    move(brepo, broke, "running", "failed")
    brat(brepo, "deacon", "run", "--once")
    assert len(_sent(out)) == 3 and len(_claims(brepo)) == 3
    brat(brepo, "task", "reply", asked, "-m", "postgres")     # these two no longer wait
    brat(brepo, "task", "reply", other, "-m", "8080")
    assert _prune(brepo) == []                                # delivered today: kept
    from git_brat.brat import inbox
    monkeypatch.setattr(inbox, "PRUNED_PER_PASS", 1)
    assert len(_prune(brepo, EIGHT_DAYS_MS)) == 1             # bounded per pass
    assert len(_prune(brepo, EIGHT_DAYS_MS)) == 1
    assert _prune(brepo, EIGHT_DAYS_MS) == []
    # What is left is the claim of the failure, still waiting: never sent again.
    [left] = _claims(brepo)
    from git_brat.brat.inbox import claim_name
    failure = [e["key"] for e in _sent(out) if e["task"] == broke][0]
    assert left.endswith(claim_name(failure).split(":")[1])
    (brepo / ".git" / "brat" / "inbox-seen.json").unlink(missing_ok=True)   # (this clone forgets)
    brat(brepo, "deacon", "run", "--once")
    assert len(_sent(out)) == 3


@pytest.mark.slow
def test_through_a_hub_a_waiting_items_claim_is_never_pruned_so_no_clone_sends_it_twice(tmp_path):
    hub, a, b = two_clones(tmp_path)
    out = tmp_path / "events.jsonl"
    for clone in (a, b):
        _command_sink(clone, out)
    c = convoy(a, "Shared")
    waits, ends = task(a, c, "Still waits"), task(a, c, "Answered")
    for tid in (waits, ends):
        brat(a, "task", "update", tid, "--status", "blocked", "-m", "a question")
    brat(a, "deacon", "run", "--once")
    brat(b, "deacon", "run", "--once")
    assert len(_sent(out)) == 2 and len(_claims(hub)) == 2    # claimed on the hub
    brat(a, "task", "reply", ends, "-m", "the answer")
    grite(a, "sync")
    grite(b, "sync")
    pruned = _prune(b, EIGHT_DAYS_MS)
    assert len(pruned) == 1 and len(_claims(hub)) == 1        # on the hub, and here
    assert not any(r.endswith(pruned[0]) for r in _claims(b))
    assert len(_claims(a)) == 2                               # a's copy, until a prunes too
    assert _prune(a, EIGHT_DAYS_MS) == pruned and len(_claims(a)) == 1
    # A clone that never looked at the waiting item (its record of what it saw is gone)
    # finds its claim taken: it is not sent again.
    for clone in (a, b):
        (clone / ".git" / "brat" / "inbox-seen.json").unlink(missing_ok=True)
        brat(clone, "deacon", "run", "--once")
    assert sorted(e["task"] for e in _sent(out)) == sorted([waits, ends])


def test_a_sink_added_later_is_sent_only_what_arrives_after_it(brepo, tmp_path):
    first, later = tmp_path / "first.jsonl", tmp_path / "later.jsonl"
    _command_sink(brepo, first)
    brat(brepo, "config", "set", "--local", "inbox.backlog_grace", "0")   # (no waiting a while)
    brat(brepo, "deacon", "run", "--once")                     # the first sink is seen: nothing waits
    c = convoy(brepo, "Work")
    backlog = [task(brepo, c, f"Old {i}") for i in range(3)]
    for tid in backlog:
        brat(brepo, "task", "update", tid, "--status", "blocked", "-m", "waiting already")
    script = tmp_path / "record.py"
    brat(brepo, "config", "set", "--local", "inbox.command",
         json.dumps([sys.executable, str(script), str(later)]))
    brat(brepo, "deacon", "run", "--once")
    assert sorted(e["task"] for e in _sent(first)) == sorted(backlog)
    assert _sent(later) == []                                  # the backlog stays in the inbox
    fresh = task(brepo, c, "New")
    brat(brepo, "task", "update", fresh, "--status", "blocked", "-m", "a new question")
    brat(brepo, "deacon", "run", "--once")
    assert [e["task"] for e in _sent(later)] == [fresh]
    assert sorted(e["task"] for e in _sent(first)) == sorted(backlog + [fresh])
