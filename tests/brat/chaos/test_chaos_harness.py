"""The harness under a seeded chaos schedule: three clones over `git daemon`, each running a
witness, a refinery and a deacon, through SIGKILLs, Ctrl-C, hub outages and human moves; after
it settles, no file is lost, nothing lands twice or unbidden, no task is run twice, every clone
holds the same state and nothing shows running without a witness.

CHAOS_SEED (comma-separated) / CHAOS_STEPS run other schedules (scripts/chaos-harness runs many
and long ones). SCHEDULES are the ones CI runs: (seed, steps), each schedule that once broke an
invariant added with what it broke.
"""

from __future__ import annotations

import os

import pytest

import chaoskit

SCHEDULES = [
    (1, 10),   # a session's end unpublished (hub down) and its witness killed: recovery re-ran
               # the merged task, which then failed "done without any commit" with its change
               # on main (issue 24 items 2 and 3)
    # A lease held by a session no clone ever recorded made every witness wait for "its log"
    # forever (issue 24 item 2; r11 b). Open: the schedule now ends with a task recorded merged
    # whose change is not on the hub's main (a refinery that landed on a clone's own target and
    # could not push it): marked until that is fixed, so CI shows it every run.
    pytest.param(5, 10, marks=pytest.mark.xfail(
        reason="issue 24: a task recorded merged whose change is not on the hub's main",
        strict=False)),
]
if os.environ.get("CHAOS_SEED"):
    SCHEDULES = [(int(s), int(os.environ.get("CHAOS_STEPS", "10")))
                 for s in os.environ["CHAOS_SEED"].split(",")]


@pytest.mark.parametrize("seed,steps", SCHEDULES)
def test_three_clones_under_a_seeded_chaos_schedule_keep_every_invariant(tmp_path, seed, steps):
    bad, ch = chaoskit.run(tmp_path, seed, steps)
    assert not bad, (f"seed {seed}, {steps} steps broke:\n  " + "\n  ".join(bad)
                     + "\nschedule:\n  " + "\n  ".join(ch.log))
