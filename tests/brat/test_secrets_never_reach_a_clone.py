"""No credential an agent or a check prints reaches another clone: every synced path (a comment,
a block reason, a session's record and summary, a failed check's record) is redacted, as a
second clone of the hub sees it after a real push and fetch; the full text stays local, 0600."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from helpers import brat_json, git, run
from secret_shapes import SHAPES
from sync_helpers import clone, seeded_hub
from witnesskit import make_bench

SECRETS = [secret for _, secret in SHAPES]

# The agent reads the lines from a file outside the repository (no commit holds them) and
# says them every way the log records an agent's words; a task titled "finish" is done.
AGENT = r'''
S=$(cat "$LEAKS")
echo "$S"
git brat task comment -m "config: $S"
case "$1" in
  *"finish it"*) echo w > work.txt && git add work.txt && git commit -qm "work" && git brat task done -m "done; used $S" ;;
  *) git brat task block -m "need: $S" ;;
esac
'''


def _every_object(repo: Path) -> bytes:
    """The content of every object the clone holds (packed ones too), and its refs' log."""
    out = run(["git", "cat-file", "--batch-all-objects", "--batch"], repo).stdout
    return out + run(["git", "log", "-p", "-a", "--all"], repo).stdout


@pytest.mark.slow
def test_credentials_an_agent_and_a_check_print_reach_no_other_clone(tmp_path):
    leaks = tmp_path / "leaks.txt"
    leaks.write_text("\n".join(line for line, _ in SHAPES) + "\n")
    hub = seeded_hub(tmp_path)
    here = clone(str(hub), tmp_path / "here", init=False)
    bench = make_bench(here, tmp_path / "bench")
    bench.config(engines__leaky__command=json.dumps(["sh", "-c", AGENT, "x", "{prompt}"]),
                 witness__engine="leaky", witness__max_retries="0",
                 refinery__check=f'cat "{leaks}"; test ! -e work.txt', refinery__on_fail="fail",
                 refinery__review="auto")   # (the check fails on the task's work, not main)
    git(here, "add", "-A")
    git(here, "commit", "-q", "-m", "brat config")
    git(here, "push", "-q", "origin", "main")
    cid = bench.convoy()
    blocked, finished = bench.task(cid, "block it"), bench.task(cid, "finish it")
    env = {"LEAKS": str(leaks)}
    for _ in range(2):
        bench.brat("witness", "run", "--once", env=env, check=False)
    report = brat_json(here, "refinery", "run", "--once")
    run(["git", "grite", "sync"], here)

    # What the records say, here: each path was taken, and redacted.
    assert bench.show(blocked)["status"] == "blocked"
    assert bench.show(finished)["status"] == "failed"
    sessions = bench.sessions()
    assert {s["status"] for s in sessions} >= {"done", "blocked"}
    assert all("[redacted]" in s["output_tail"] for s in sessions)
    # The check's whole output stays here, 0600, named by the refinery's local report only.
    (failed,) = [o for p in report["passes"] for o in p["outcomes"] if o["result"] == "failed"]
    full = Path(failed["log"])
    assert stat.S_IMODE(full.stat().st_mode) == 0o600
    assert all(s in full.read_text() for s in SECRETS)

    other = clone(str(hub), tmp_path / "other")
    run(["git", "grite", "sync"], other)
    seen = json.loads(run(["git", "grite", "log", "--json"], other).out)
    texts = json.dumps(seen)
    assert finished in texts and blocked in texts
    assert texts.count("[redacted]") >= len(SECRETS)
    leaked = [s for s in SECRETS if s.encode() in _every_object(other)]
    assert leaked == []
    for tid in (blocked, finished):
        shown = run(["git", "brat", "task", "show", tid, "--json"], other).out
        assert [s for s in SECRETS if s in shown] == []
