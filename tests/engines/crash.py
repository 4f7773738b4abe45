"""A witness killed in the middle of a real engine's session, then a second witness.

    python crash.py MARKER OUT1 OUT2 -- git brat witness run --once ...

Runs (under pair.py, next to the fake model) the witness command once, waits for MARKER (the
fake model creates it when it leaves the engine hanging, FAKE-HANG), SIGKILLs that witness alone
(its engine, in a process group of its own, lives on, as after a crash), then runs the same
command again with --json and exits with that one's status. 3: the first never hung.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time


def main() -> int:
    marker, out1, out2 = sys.argv[1:4]
    argv = sys.argv[5:] if sys.argv[4] == "--" else sys.argv[4:]
    with open(out1, "wb") as f:
        first = subprocess.Popen(argv, stdout=f, stderr=subprocess.STDOUT,
                                 stdin=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 90
    while not os.path.exists(marker) and first.poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    if not os.path.exists(marker):
        os.killpg(first.pid, signal.SIGKILL)
        first.wait()
        return 3
    time.sleep(0.5)
    os.kill(first.pid, signal.SIGKILL)
    first.wait()
    with open(out2, "wb") as f:
        second = subprocess.run([*argv, "--json"], stdout=f, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, timeout=150)
    return second.returncode


if __name__ == "__main__":
    sys.exit(main())
