"""Run one command next to a fake model server, optionally in a loopback-only network namespace.

    python pair.py --port P --log LOG [--lo-up] [--timeout S] [--stdin FILE] [--cwd DIR]
                   [--reply-file FILE] [--limit-file FILE] --output OUT -- ARGV...

Started as `unshare -n python pair.py --lo-up ...`, the server and the command share a network
namespace holding only loopback: the command can reach 127.0.0.1:P and nothing else. The command
runs in its own process group, its stdout and stderr both in OUT (as the witness's runner
keeps them), killed whole when it outlives --timeout (exit 124). The exit
status is the command's. Every request the server saw is in LOG, one JSON line each.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from fakemodel import FakeModel  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--log", required=True)
    ap.add_argument("--lo-up", action="store_true")
    ap.add_argument("--timeout", type=float, default=120)
    ap.add_argument("--stdin")
    ap.add_argument("--output", required=True)
    ap.add_argument("--cwd")
    ap.add_argument("--hang-marker", default="")
    ap.add_argument("--reply-file", help="the final answer to a request with no FAKE-EDIT task")
    ap.add_argument("--limit-file", help="a JSON limit script: the server answers 429 (fakemodel)")
    ap.add_argument("argv", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    argv = a.argv[1:] if a.argv[:1] == ["--"] else a.argv
    if a.lo_up:
        subprocess.run(["ip", "link", "set", "lo", "up"], check=True, timeout=10)
    reply = open(a.reply_file).read() if a.reply_file else ""
    limit = None
    if a.limit_file:
        with open(a.limit_file) as f:
            limit = json.load(f)
    with FakeModel(log_path=a.log, port=a.port, workdir=a.cwd or os.getcwd(),
                   hang_marker=a.hang_marker, reply=reply, limit=limit), \
            open(a.output, "wb") as out, \
            open(a.stdin or os.devnull, "rb") as inp:
        proc = subprocess.Popen(argv, stdin=inp, stdout=out, stderr=subprocess.STDOUT, cwd=a.cwd,
                                start_new_session=True)
        try:
            rc = proc.wait(timeout=a.timeout)
        except subprocess.TimeoutExpired:
            rc = 124
        # Whatever it left in its group goes too (engines start helpers of their own).
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        proc.wait()
    return rc


if __name__ == "__main__":
    sys.exit(main())
