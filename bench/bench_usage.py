"""The usage parse's cost at a session's end: reading what each engine reported spending.

For every preset with a Meter, a session output of realistic shape (the engine's own JSON lines
or aider's text, repeated to N model calls with tool output between them: a long session) is
read by engines.usage.measure, as the witness does once per session end. The goal is < 5 ms per
session end. Side-channel engines (cn, copilot) read their file: measured on a file of the same
shape.

Usage: python bench/bench_usage.py [--calls N] [--rounds N]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from git_brat.brat.engines import PRESETS, usage  # noqa: E402

TOOL_OUTPUT = json.dumps({"type": "tool_use", "part": {"state": {"output": "x" * 2000}}})


def output_of(name: str, calls: int) -> str:
    """A session's output as engine `name` prints it over `calls` model calls."""
    lines = []
    for i in range(calls):
        lines.append(TOOL_OUTPUT)
        if name == "opencode":
            lines.append(json.dumps({"type": "step_finish", "part": {"tokens": {
                "input": 1000 + i, "output": 50, "reasoning": 0, "cache": {"read": 0, "write": 0}},
                "cost": 0.001}}))
        elif name == "aider":
            lines.append(f"Tokens: {2 + i / 10:.1f}k sent, {30 + i} received. Cost: $0.0077 "
                         f"message, $0.{i:04d} session.")
        elif name == "copilot":
            lines.append(json.dumps({"type": "session.usage_record", "data": {"usage": {
                "inputTokens": 1000, "outputTokens": 50, "cacheReadTokens": 0,
                "cacheWriteTokens": 0, "cost": 0.0}}}))
    if name == "claude":
        lines.append(json.dumps({"type": "result", "modelUsage": {"m": {
            "inputTokens": 1000 * calls, "outputTokens": 50 * calls, "costUSD": 0.5}}}))
    elif name == "codex":
        lines.append(json.dumps({"type": "turn.completed", "usage": {
            "input_tokens": 1000 * calls, "output_tokens": 50 * calls}}))
    elif name == "gemini":
        lines.append(json.dumps({"type": "result", "stats": {
            "input_tokens": 1000 * calls, "output_tokens": 50 * calls, "models": {"g": {}}}}))
    elif name == "cn":
        return json.dumps({"workspaceDirectory": "/w", "usage": {
            "promptTokens": 1000 * calls, "completionTokens": 50 * calls, "totalCost": 0.1}})
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=20)
    a = ap.parse_args()
    print(f"usage parse per session end ({a.calls} model calls, {a.rounds} rounds):")
    with tempfile.TemporaryDirectory() as tmp:
        for name, p in PRESETS.items():
            if p.usage is None:
                continue
            text = output_of(name, a.calls)
            env = {"HOME": tmp, "CONTINUE_GLOBAL_DIR": tmp, "COPILOT_HOME": tmp}
            if p.usage.file:
                target = (os.path.join(tmp, "sessions", "s.json") if name == "cn"
                          else os.path.join(tmp, "session-state", "conv", "events.jsonl"))
                os.makedirs(os.path.dirname(target), exist_ok=True)
                Path(target).write_text(text)
                text = ""
            times = []
            for _ in range(a.rounds):
                t0 = time.perf_counter()
                u = usage.measure(p, text, env=env, workdir="/w", engine_session="conv")
                times.append((time.perf_counter() - t0) * 1000)
            assert u.reported, name
            size = len(text) if text else os.path.getsize(target)
            print(f"  {name:<9} median {statistics.median(times):6.2f} ms, best {min(times):5.2f} ms  "
                  f"({size / 1024:.0f} KB, "
                  f"{usage.summary(u)})")


if __name__ == "__main__":
    main()
