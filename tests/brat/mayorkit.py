"""Fixtures for the mayor's tests: a repository whose config defines one fake engine per answer."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from git_brat.brat import config
from helpers import brat, git, status

FAKE = str(Path(__file__).with_name("fake_mayor.py"))
MODES = ("plan", "prose", "fenced", "malformed", "cycle", "unknown-need", "empty-title",
         "priority", "many", "hang", "fail", "workflow", "no-workflow", "prose-only", "edit", "echo")


def _argv(mode: str, record: Path, *extra: str) -> str:
    return json.dumps([sys.executable, FAKE, mode, str(record), *extra, "{prompt}"])


@pytest.fixture
def record(tmp_path) -> Path:
    return tmp_path / "record"


@pytest.fixture
def mrepo(brepo, record):
    """A repository whose config defines one fake engine per answer (committed: status clean)."""
    path = brepo / ".brat" / "config.toml"
    text = path.read_text()
    # Unconfined: the fake engines record each run under the test's tmp_path, which the
    # mayor's sandbox keeps read-only (tests/brat/mayor/test_mayor_confined.py runs it boxed).
    settings = {"mayor.max_tasks": "4", "mayor.timeout": "30", "witness.sandbox": "none"}
    for mode in MODES:
        settings[f"engines.{mode}.command"] = _argv(mode, record)
    # A claude-shaped fake: a JSON result with session_id, and a resume template.
    settings["engines.claude.command"] = _argv("claude-json", record)
    settings["engines.claude.resume"] = _argv("claude-json", record, "--resume", "{resume_id}")
    settings["engines.gemini.command"] = _argv("gemini-stream", record)
    settings["engines.stdin.command"] = json.dumps([sys.executable, FAKE, "stdin", str(record)])
    settings["engines.stdin.prompt"] = "stdin"
    # Resumes, but reports no id (as aider): its session directory is the conversation's id.
    settings["engines.dirs.command"] = _argv("plan", record)
    settings["engines.dirs.resume"] = _argv("plan", record, "--resume", "{resume_id}")
    settings["mayor.engine"] = "plan"   # once engines.plan is defined: an unknown one is refused
    for key, value in settings.items():
        text = config.set_text(text, key, value)[0]
    path.write_text(text)
    brat(brepo, "trust")   # written here, not by `config set`: approved as a user would
    (brepo / "src").mkdir()
    (brepo / "src" / "parser.py").write_text("def parse(s):\n    return s.split(' ')\n")
    (brepo / "AGENTS.md").write_text("Agents: run `make test` before committing.\n")
    git(brepo, "add", "-A")
    git(brepo, "commit", "-q", "-m", "brat config with fake engines")
    assert status(brepo) == ""
    return brepo


def runs(record: Path) -> list[dict]:
    if not record.exists():
        return []
    return [json.loads((record / f"run-{k}.json").read_text())
            for k in range(1, len(os.listdir(record)) + 1)]


__all__ = ["FAKE", "MODES", "record", "mrepo", "runs"]
