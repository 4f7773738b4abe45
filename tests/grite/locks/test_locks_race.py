"""Lease races between real processes on one clone, and a holder killed with SIGKILL."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

from helpers import ROOT, git, grite, grite_json
from lock_workers import run_race


def test_eight_processes_race_200_rounds_and_exactly_one_wins_each_round(grepo):
    rounds = run_race([str(grepo)] * 8, "task:t-race", 200, remote=None, timeout=600)
    assert sorted(rounds) == list(range(200))
    tokens = []
    for r in range(200):
        winners = [(h, t) for h, t in rounds[r] if t]
        assert len(rounds[r]) == 8
        assert len(winners) == 1, f"round {r}: winners {winners}"
        tokens.append(winners[0][1])
    assert tokens == list(range(1, 201))     # one grant per round, never reused
    status = grite_json(grepo, "lock", "status", "task:t-race")
    assert status[0]["state"] == "released" and status[0]["token"] == 200
    # Every grant is in the event log as a lease token.
    leases = [e for e in grite_json(grepo, "log") if e["op"] == "lease"]
    assert sorted(e["detail"]["token"] for e in leases) == list(range(1, 201))


def test_eight_cli_processes_race_and_exactly_one_acquires_each_round(grepo):
    for r in range(4):
        resource = f"task:cli-{r}"
        procs = [subprocess.Popen(["git", "grite", "lock", "acquire", resource, "--holder", f"h{i}",
                                   "--json"], cwd=grepo, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE) for i in range(8)]
        results = [(p.wait(timeout=120), p.stdout.read(), p.stderr.read()) for p in procs]
        for p in procs:
            p.stdout.close()
            p.stderr.close()
        codes = sorted(code for code, _out, _err in results)
        assert codes == [0] + [5] * 7, results
        winner = next(json.loads(out) for code, out, _err in results if code == 0)
        assert winner["token"] == 1 and winner["state"] == "held"
        for code, _out, err in results:
            if code == 5:
                assert b"is held by " + winner["holder"].encode() in err


def test_holder_killed_with_sigkill_is_taken_over_only_after_ttl_plus_margin(grepo):
    ttl, skew = 1.5, 1.0
    git(grepo, "config", "grite.lockSkew", str(skew))
    holder = subprocess.Popen([sys.executable, str(ROOT / "tests" / "lock_workers.py"), str(grepo),
                               "task:t-kill", str(ttl), "0.3"], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "acquired 1"
        assert holder.stdout.readline().strip() == "renewed"
        os.kill(holder.pid, signal.SIGKILL)   # right after a renew: it was asleep, not mid-write
        assert holder.wait(timeout=10) == -signal.SIGKILL
    finally:
        if holder.poll() is None:
            holder.kill()
        holder.stdout.close()
        holder.stderr.close()
    last = grite_json(grepo, "lock", "status", "task:t-kill")[0]
    assert last["holder"] == "doomed"
    first = grite(grepo, "lock", "acquire", "task:t-kill", "--holder", "heir", "--json",
                  check=False)
    if first.returncode == 5:   # inside TTL + margin: refused, then taken over once it passed
        assert last["state"] == "held" and "is held by doomed" in first.err
        took = grite_json(grepo, "lock", "acquire", "task:t-kill", "--holder", "heir", "--wait",
                          "20")
    else:   # a loaded machine got here after TTL + margin: taken over at once (checked below:
        took = json.loads(first.out)   # never a moment early, by the deciding process's clock)
    assert took["holder"] == "heir" and took["token"] == 2 and took["action"] == "takeover"
    from git_brat.grite import locks
    from git_brat.grite.repo import Grite
    new, dead = locks.history(Grite.open(str(grepo)), "task:t-kill")[:2]
    assert dead.holder.id == "doomed" and dead.state == "held"
    assert new.acquired_at >= dead.expires_at + skew * 1000   # not a moment before TTL + margin
    assert new.token == dead.token + 1
