"""The log under stress: concurrent writers lose nothing; SIGKILL never corrupts it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from helpers import ROOT, git, grite, grite_json

# A writer that appends issues in a loop and prints each id only after append() returned.
WRITER = """
import sys
sys.path.insert(0, {root!r})
from git_brat.grite.repo import Grite
from git_brat.grite import issues
g = Grite.open()
for i in range(int(sys.argv[1])):
    iid = issues.create(g, f"{{sys.argv[2]}}-{{i}}")
    print(iid, flush=True)
"""


def _writer(repo, count: int, name: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", WRITER.format(root=str(ROOT)), str(count), name],
                            cwd=repo, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_eight_concurrent_writers_lose_no_event(grepo):
    procs = [_writer(grepo, 25, f"w{n}") for n in range(8)]
    acknowledged = []
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
        acknowledged += out.split()
    assert len(acknowledged) == 200
    listed = {i["id"] for i in grite_json(grepo, "issue", "list")}
    assert set(acknowledged) <= listed and len(listed) == 200
    # The log stays one linear chain: every batch is its own commit.
    assert git(grepo, "rev-list", "--count", "--merges", "refs/grite/wal") == "0"
    assert int(git(grepo, "rev-list", "--count", "refs/grite/wal")) == 201   # + the actor record


def test_sigkill_during_appends_loses_no_acknowledged_event(grepo):
    acknowledged: list[str] = []
    for round_ in range(6):
        p = _writer(grepo, 1000, f"k{round_}")
        time.sleep(0.4 + 0.15 * round_)
        os.kill(p.pid, signal.SIGKILL)
        out, _ = p.communicate(timeout=30)
        acknowledged += [line for line in out.split() if len(line) == 32]
        # A killed writer can leave refs/grite/wal.lock behind; doctor clears it safely.
        lock = grepo / ".git" / "refs" / "grite" / "wal.lock"
        if lock.exists():
            report = grite_json(grepo, "doctor", "--stale-after", "0", check=False)
            assert any(f["kind"] == "stale-lock" for f in report["findings"])
            grite(grepo, "doctor", "--fix", "--stale-after", "0", check=False)
            assert not lock.exists()
    assert acknowledged, "the writers should have acknowledged some events"
    git(grepo, "fsck", "--no-dangling", "refs/grite/wal")
    listed = {i["id"] for i in grite_json(grepo, "issue", "list")}
    assert set(acknowledged) <= listed
    report = grite_json(grepo, "doctor")
    assert report["ok"] and not [f for f in report["findings"] if f["kind"] == "corrupt"]


def test_writer_waits_for_a_held_ref_lock_then_succeeds(grepo):
    lock = grepo / ".git" / "refs" / "grite" / "wal.lock"
    lock.write_text("held by someone else\n")
    p = subprocess.Popen(["git", "grite", "issue", "create", "Patient"], cwd=grepo,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(0.8)
    assert p.poll() is None, "the writer should still be retrying"
    lock.unlink()
    out, err = p.communicate(timeout=30)
    assert p.returncode == 0, err
    assert grite_json(grepo, "issue", "show", out.strip())["title"] == "Patient"


def test_a_lock_that_never_clears_fails_with_advice(grepo):
    lock = grepo / ".git" / "refs" / "grite" / "wal.lock"
    lock.write_text("abandoned\n")
    proc = grite(grepo, "issue", "create", "Blocked", check=False, env={"GRITE_LOCK_TIMEOUT": "0.5"})
    assert proc.returncode == 5 and "doctor --fix" in proc.err
    os.utime(lock, (time.time() - 3600, time.time() - 3600))
    report = grite_json(grepo, "doctor", check=False)
    assert not report["ok"] and report["findings"][0]["kind"] == "stale-lock"
    fixed = grite_json(grepo, "doctor", "--fix")
    assert fixed["ok"] and fixed["findings"][0]["fixed"] and not lock.exists()
    grite(grepo, "issue", "create", "Unblocked")


def test_a_ref_lock_left_by_a_killed_writer_no_longer_stops_every_append(grepo):
    # A grite writer holds the lock for one rename; one seconds old has nobody behind it.
    lock = grepo / ".git" / "refs" / "grite" / "wal.lock"
    lock.write_text("left by a SIGKILLed writer\n")
    os.utime(lock, (time.time() - 60, time.time() - 60))
    out = grite(grepo, "issue", "create", "After the crash").out.strip()
    assert grite_json(grepo, "issue", "show", out)["title"] == "After the crash"
    assert not lock.exists()
