"""The idle watchdog (witness/watchdog.silent) stops only engines that wait quietly on a rate
limit, and only when they show no sign of work: output, their activity files, a running tool."""

from __future__ import annotations

import json
import os

import msgspec

from git_brat.brat.engines import PRESETS
from git_brat.brat.witness.session import LiveSession
from git_brat.brat.witness.watchdog import silent

IDLE = 10.0


def live(tmp_path, engine: str, env: dict | None = None) -> LiveSession:
    s = LiveSession("5e55" + "0" * 28, "7" * 32, "t", PRESETS[engine], None)
    s.log, s.phase, s.env = str(tmp_path / "log"), "engine", env or {"HOME": str(tmp_path)}
    with open(s.log, "w") as f:
        f.write("[brat] engine: ...\n")
    s.engine_offset = os.path.getsize(s.log)
    return s


def look(s: LiveSession, at: float) -> bool:
    s.output_checked = 0.0   # every look counts here (the witness looks about once a second)
    return silent(s, at, IDLE)


def write(s: LiveSession, text: str) -> None:
    with open(s.log, "a") as f:
        f.write(text + "\n")


def test_a_quiet_codex_is_stopped_after_the_idle_timeout_and_not_before(tmp_path):
    s = live(tmp_path, "codex")
    write(s, json.dumps({"type": "turn.started"}))
    assert not look(s, 100.0)
    assert not look(s, 109.0)
    assert look(s, 110.5)
    assert "silent for 10s" in open(s.log).read()


def test_output_restarts_the_count(tmp_path):
    s = live(tmp_path, "codex")
    assert not look(s, 100.0)
    write(s, json.dumps({"type": "item.completed"}))
    assert not look(s, 109.0)
    assert not look(s, 115.0)
    assert look(s, 119.5)


def test_a_tool_still_running_is_no_silence(tmp_path):
    s = live(tmp_path, "codex")
    write(s, '{"type":"item.started","item":{"type":"command_execution","command":"make test"}}')
    assert not look(s, 100.0)
    assert not look(s, 1000.0)


def test_engines_that_print_only_at_their_end_are_never_watched(tmp_path):
    for engine in ("claude", "gemini", "aider"):
        s = live(tmp_path, engine)
        assert not look(s, 100.0) and not look(s, 10_000.0), engine


def test_cns_own_log_growing_is_a_sign_of_work(tmp_path):
    gdir = tmp_path / "continue"
    (gdir / "logs").mkdir(parents=True)
    cn_log = gdir / "logs" / "cn.log"
    cn_log.write_text("start\n")
    s = live(tmp_path, "cn", {"HOME": str(tmp_path), "CONTINUE_GLOBAL_DIR": str(gdir)})
    assert not look(s, 100.0)
    with open(cn_log, "a") as f:
        f.write("tool call\n")
    assert not look(s, 109.0)
    assert not look(s, 118.0)
    assert look(s, 119.5)


def test_the_watchdog_is_off_at_zero(tmp_path):
    s = live(tmp_path, "opencode")
    s.output_checked = 0.0
    assert not silent(s, 100.0, 0) and not silent(s, 10_000.0, 0)


def test_a_configured_engine_keeps_its_presets_watch():
    from git_brat.brat.config import Engine
    from git_brat.brat.engines import resolve
    p = resolve("codex", {"codex": Engine(command=["my-codex", "{prompt}"])})
    assert p.endings.silent_on_limit and p.endings.busy
    assert msgspec.structs.asdict(p.endings) == msgspec.structs.asdict(PRESETS["codex"].endings)
