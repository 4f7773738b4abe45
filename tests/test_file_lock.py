"""The lock writers of the cache take: exclusive between processes, and a wedged holder gives an
error naming the file, not a hang."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from git_brat.files import FileLock, LockTimeout

_HOLD = """
import sys, time
sys.path.insert(0, sys.argv[2])
from git_brat.files import FileLock
with FileLock(sys.argv[1], timeout=5):
    print("held", flush=True)
    time.sleep(float(sys.argv[3]))
"""


def _holder(path, seconds: float):
    from helpers import ROOT
    proc = subprocess.Popen([sys.executable, "-c", _HOLD, str(path), str(ROOT), str(seconds)],
                            stdout=subprocess.PIPE)
    assert proc.stdout.readline().strip() == b"held"
    return proc


def test_a_second_process_waits_for_the_lock_then_gets_it(tmp_path):
    path = tmp_path / "lock"
    holder = _holder(path, 0.5)
    try:
        t0 = time.monotonic()
        with FileLock(str(path), timeout=10):
            waited = time.monotonic() - t0
        assert waited > 0.2   # it did wait for the holder
    finally:
        holder.kill()
        holder.wait()


def test_a_lock_held_past_the_timeout_is_an_error_naming_the_file(tmp_path):
    path = tmp_path / "lock"
    holder = _holder(path, 30)
    try:
        with pytest.raises(LockTimeout, match=str(path)):
            FileLock(str(path), timeout=0.3).acquire()
    finally:
        holder.kill()
        holder.wait()
    with FileLock(str(path), timeout=1):   # a killed holder's lock is gone with it
        pass
