"""The idle watchdog: an engine that waits quietly on a rate limit's retry-after (codex,
opencode, cn, copilot) prints nothing for as long as it waits; the witness stops it once it has
shown no sign of work for witness.idle_timeout, and its silence counts as a limit."""

from __future__ import annotations

import os

from git_brat.brat.engines import ending, runner, sandbox
from git_brat.brat.witness.session import LiveSession, log_line


def silent(live: LiveSession, now: float, idle: float) -> bool:
    """The idle watchdog: whether an engine that waits quietly on a rate limit's retry-after
    (its preset's endings.silent_on_limit) has shown no sign of work for `idle` seconds: no
    output, no change to its activity files, and its last line says no tool of its runs.
    Looked at about once a second."""
    rules = live.preset.endings
    if not idle or not rules.silent_on_limit or live.phase != "engine" or \
            now < live.output_checked + min(1.0, idle / 4):
        return False
    live.output_checked = now
    sign = _activity(live)
    if sign != live.output_size or not live.output_at or ending.busy(rules, _last_line(live)):
        live.output_size, live.output_at = sign, now
        return False
    if now - live.output_at < idle:
        return False
    log_line(live.log, f"silent for {idle:g}s: stopped (witness.idle_timeout)")
    return True


def _activity(live: LiveSession) -> int:
    """A number that changes whenever the engine shows a sign of work: its log's size plus
    its activity files' times (ns)."""
    sign = 0
    for path in [live.log, *filter(None, (sandbox.expand(a, live.env)
                                          for a in live.preset.endings.activity))]:
        try:
            st = os.stat(path)
        except OSError:
            continue
        sign += st.st_size + (st.st_mtime_ns if path != live.log else 0)
    return sign


def _last_line(live: LiveSession) -> str:
    tail = runner.read_from(live.log, live.engine_offset, 4096)
    lines = tail.rstrip("\n").rsplit("\n", 1)
    return lines[-1] if lines else ""


__all__ = ["silent"]
