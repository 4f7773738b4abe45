"""What reading a session's ending costs at its end: engines/ending.classify (the engine's
limit, auth and transient patterns, the reset's clock) on each engine's real output shapes,
padded to a long session's log (the witness reads up to its last 64 KB), first call included
(the patterns compile once per process). Goal: < 5 ms per session end.

Usage: python bench/bench_limits.py [--rounds N]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from git_brat.brat.engines import PRESETS, ending  # noqa: E402

TOOL_LINE = json.dumps({"type": "item.completed", "item": {
    "type": "command_execution", "command": "pytest -q", "aggregated_output": "." * 400}})
ENDS = {
    "claude": json.dumps({"type": "result", "is_error": True, "api_error_status": 429,
                          "result": "API Error: Request rejected (429)"}),
    "codex": json.dumps({"type": "turn.failed", "error": {
        "message": "You\u2019ve hit your usage limit. ... or try again at 9:21 PM."}}),
    "gemini": json.dumps({"error": {"message": "You have exhausted your daily quota",
                                    "code": 429}}),
    "opencode": "",
    "cn": json.dumps({"response": "done", "status": "success"}),
    "copilot": json.dumps({"type": "session.error", "data": {"errorType": "rate_limit",
                                                            "statusCode": 429}}),
    "aider": "litellm.RateLimitError: rate limited\nRetrying in 0.2 seconds...",
}


def output(name: str, size: int) -> str:
    body = "\n".join([TOOL_LINE] * (size // len(TOOL_LINE) + 1))
    return body + "\n" + ENDS[name] + "\n"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=200)
    args = ap.parse_args()
    first = time.perf_counter()
    ending.classify(PRESETS["claude"], output("claude", 64 << 10), 1)
    print(f"first call (compiling claude's patterns): {(time.perf_counter() - first) * 1e3:.2f} ms")
    worst = 0.0
    for name in ENDS:
        text = output(name, 256 << 10)   # longer than the scan: what a long session leaves
        times = []
        for _ in range(args.rounds):
            t = time.perf_counter()
            end = ending.classify(PRESETS[name], text, 1, idle=name == "opencode")
            times.append(time.perf_counter() - t)
        median = statistics.median(times) * 1e3
        worst = max(worst, median)
        print(f"{name:9s} {end.kind:9s} median {median:.3f} ms  p95 "
              f"{sorted(times)[int(len(times) * 0.95)] * 1e3:.3f} ms")
    print(f"worst median {worst:.3f} ms (goal < 5 ms): {'ok' if worst < 5 else 'MISSED'}")


if __name__ == "__main__":
    main()
