"""The harness under a seeded chaos schedule: three clones over `git daemon`, each running a
witness, a refinery and a deacon, through SIGKILLs, Ctrl-C, hub outages and human moves; after
it settles, no file is lost, nothing lands twice or unbidden, no task is run twice, every clone
holds the same state and nothing shows running without a witness.

CHAOS_SEED / CHAOS_STEPS run another schedule (scripts/chaos-harness runs many); SEEDS are the
schedules CI runs, failing ones added as they are found.
"""

from __future__ import annotations

import os

import pytest

import chaoskit

SEEDS = [int(s) for s in os.environ.get("CHAOS_SEED", "1").split(",")]
STEPS = int(os.environ.get("CHAOS_STEPS", "6"))


@pytest.mark.parametrize("seed", SEEDS)
def test_three_clones_under_a_seeded_chaos_schedule_keep_every_invariant(tmp_path, seed):
    bad, ch = chaoskit.run(tmp_path, seed, STEPS)
    assert not bad, (f"seed {seed}, {STEPS} steps broke:\n  " + "\n  ".join(bad)
                     + "\nschedule:\n  " + "\n  ".join(ch.log))
