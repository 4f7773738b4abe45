"""How an engine's session ended, read from its output, exit code and silence: a usage or rate
limit (with its reset where the engine gives one), a passing error, refused credentials, or a
genuine failure. The patterns are each engine's data (Preset.endings); this reads them.

Pure and quick (it runs at every session's end): one pass over the last lines of output.
What a model writes reaches some engines' output too (aider prints its replies), so an agent
could word a limit; the worst it buys is a pause of its own task and a bounded hold of its
engine (resets past resets.MAX_AHEAD are not believed). The JSON engines' patterns name their
own event keys, which a model's text cannot forge: inside a JSON string its quotes are escaped.
"""

from __future__ import annotations

import functools
import re
from datetime import datetime, timezone, tzinfo
from typing import Literal

import msgspec

from git_brat.brat.engines import resets
from git_brat.brat.engines.presets import Endings, Preset

Kind = Literal["limit", "transient", "auth", "lost", "failure"]
SCAN = 32 << 10       # characters of output read from the end: the engines say it last


class Ending(msgspec.Struct, frozen=True):
    """How a session ended, as far as its engine's output says."""
    kind: Kind
    why: str = ""                  # the line that said so (or what the witness saw)
    reset_ms: int = 0              # when the limit resets (epoch ms); 0: not said
    silent: bool = False           # the engine went silent (the idle watchdog stopped it)

    @property
    def paused(self) -> bool:
        return self.kind == "limit"


@functools.lru_cache(maxsize=256)
def _compiled(pattern: str) -> "re.Pattern[str]":
    # One regex each, not one alternation: each keeps its literal prefix, which re scans fast.
    return re.compile(pattern, re.M)


def _line_of(text: str, m: re.Match) -> str:
    """The line a pattern matched; of a JSON event, its message."""
    start = text.rfind("\n", 0, m.start()) + 1
    end = text.find("\n", m.end())
    line = text[start:end if end >= 0 else len(text)].strip()
    if line.startswith("{"):
        try:
            obj = msgspec.json.decode(line)
        except msgspec.DecodeError:
            return line
        for path in MESSAGES:
            value = _dig(obj, path)
            if isinstance(value, str) and value.strip():
                return " ".join(value.split())
    return line


# Where the JSON engines put an error's words (claude's result, codex's, copilot's, gemini's).
MESSAGES = ("result", "message", "error.message", "data.message")


def _dig(obj, dotted: str):
    for part in dotted.split("."):
        if not isinstance(obj, dict):
            return None
        obj = obj.get(part)
    return obj


def classify(preset: Preset, output: str, exit_code: int | None, *, idle: bool = False,
             now: datetime | None = None, zone: tzinfo | None = None) -> Ending:
    """How the engine's run ended. `idle`: the witness stopped it after a silence (a run that
    waits on a long retry-after says nothing); `now` and `zone` read a reset's wall clock."""
    rules: Endings = preset.endings
    text = output[-SCAN:]
    now = now or datetime.now(timezone.utc)
    found = _search(rules.limit, text)
    if found is not None or (exit_code is not None and exit_code in rules.limit_exit):
        line = _line_of(text, found) if found is not None else f"exit {exit_code}"
        # The reset is on the line that spoke of the limit, or on one of the lines after it.
        at = resets.reset_at(text[found.start():] if found is not None else "", now, zone)
        if at is not None and _search(rules.retried, text) is not None:
            at = None   # its suggested delay was spent on its own retries
        return Ending("limit", line[:300], _ms(at), idle)
    if idle and rules.silent_on_limit:
        return Ending("limit", f"{preset.name} went silent (it waits quietly on a rate "
                               f"limit's retry-after)", 0, True)
    for kind, patterns in (("lost", rules.lost), ("auth", rules.auth),
                           ("transient", rules.transient)):
        found = _search(patterns, text)
        if found is not None:
            return Ending(kind, _line_of(text, found)[:300], 0, idle)
    return Ending("failure", "", 0, idle)


def busy(rules: Endings, last_line: str) -> bool:
    """Whether the engine's last line of output says a tool of its runs (no silence)."""
    return bool(rules.busy) and _search(rules.busy, last_line) is not None


def _search(patterns: list[str], text: str) -> "re.Match | None":
    """The earliest match of any of the patterns."""
    first = None
    for pattern in patterns:
        end = min(first.end() + 1000, len(text)) if first is not None else len(text)
        m = _compiled(pattern).search(text, 0, end)
        if m is not None and (first is None or m.start() < first.start()):
            first = m
    return first


def _ms(at: datetime | None) -> int:
    return int(at.timestamp() * 1000) if at is not None else 0


__all__ = ["Ending", "Kind", "classify", "busy"]
