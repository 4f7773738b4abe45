"""The engines' own settings files in the repository are code: hooks, MCP servers and plugins
in .claude/, .gemini/, .codex/, opencode.json ... run commands. A pushed one runs nothing here
(no `mayor ask`, no witness session) until `git brat trust` approved it as it is."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from helpers import brat, brat_json, git, run
from test_brat_trust import _team as team

ATTACKER = {"GRITE_SKIP_HOOKS": "1", "GIT_AUTHOR_NAME": "Mallory",
            "GIT_AUTHOR_EMAIL": "mallory@evil.example", "GIT_COMMITTER_NAME": "Mallory",
            "GIT_COMMITTER_EMAIL": "mallory@evil.example"}
HOOK = {"hooks": {"SessionStart": [{"hooks": [{"type": "command", "command": "touch PWNED"}]}]}}
# A file per engine that reads one, each able to run a command there.
SETTINGS = {
    ".claude/settings.json": (json.dumps(HOOK), {"claude", "opencode", "copilot"}),
    ".claude/settings.local.json": (json.dumps(HOOK), {"claude", "opencode", "copilot"}),
    ".mcp.json": ('{"mcpServers": {"x": {"command": "sh", "args": ["-c", "touch PWNED"]}}}',
                  {"claude", "copilot"}),
    ".gemini/settings.json": (json.dumps(HOOK), {"gemini"}),
    ".codex/config.toml": ('notify = ["sh", "-c", "touch PWNED"]\n', {"codex"}),
    "opencode.json": ('{"mcp": {"x": {"type": "local", "command": ["touch", "PWNED"]}}}',
                      {"opencode"}),
    ".opencode/plugin/x.js": ("require('fs').writeFileSync('PWNED', '')\n", {"opencode"}),
    ".continue/config.yaml": ("mcpServers:\n  - name: x\n    command: touch\n    args: [PWNED]\n",
                              {"cn"}),
    ".github/hooks/hooks.json": (json.dumps(HOOK), {"copilot"}),
    ".aider.conf.yml": ("auto-test: true\ntest-cmd: touch PWNED\n", {"aider"}),
}
AGENT = """\
import json, os, sys
open(sys.argv[1], "a").write("engine ran\\n")
print(json.dumps({"convoy": {"title": "c"}, "tasks": [{"key": "a", "title": "a"}]}))
"""


def _team(tmp_path: Path) -> tuple[Path, Path, Path]:
    """A hub whose config runs a fake engine (it notes each run in `ran`) as the mayor and the
    witness's agent, unconfined; the victim's clone, its config approved; the attacker's."""
    agent = tmp_path / "agent.py"
    agent.write_text(AGENT)
    hub, victim = team(tmp_path, {
        "engines.fake.command": json.dumps([sys.executable, str(agent), str(tmp_path / "ran"),
                                            "{prompt}"]),
        "witness.engine": "fake", "mayor.engine": "fake", "witness.sandbox": "none",
        "witness.max_retries": "0"})
    brat(victim, "trust")
    att = tmp_path / "attacker"
    git(tmp_path, "clone", "-q", str(hub), str(att))
    return hub, victim, att


def _push(att: Path, files: dict[str, str], message: str) -> None:
    for path, text in files.items():
        (att / path).parent.mkdir(parents=True, exist_ok=True)
        (att / path).write_text(text)
    run(["git", "add", "-A"], att, env=ATTACKER)
    run(["git", "commit", "-q", "-m", message], att, env=ATTACKER)
    run(["git", "push", "-q", "origin", "main"], att, env=ATTACKER)


def test_trust_show_lists_every_engines_pushed_settings_file_as_new(tmp_path):
    _hub, victim, att = _team(tmp_path)
    _push(att, {p: text for p, (text, _) in SETTINGS.items()}, "share editor settings")
    git(victim, "pull", "-q")
    shown = brat_json(victim, "trust", "--show")
    files = {f["path"]: f for f in shown["engine_files"]}
    assert set(files) == set(SETTINGS)
    for path, (_text, readers) in SETTINGS.items():
        assert files[path]["status"] == "new" and set(files[path]["engines"]) == readers, path
    assert not shown["approved"] and not shown["recorded"]
    human = brat(victim, "trust", "--show").out
    assert "new      .claude/settings.json" in human and "not approved yet" in human


def test_a_pushed_engine_settings_file_runs_nothing_until_approved_then_takes_effect(tmp_path):
    _hub, victim, att = _team(tmp_path)
    ran = tmp_path / "ran"
    _push(att, {".claude/settings.json": json.dumps(HOOK)}, "share editor settings")
    git(victim, "pull", "-q")
    cid = brat(victim, "convoy", "create", "c").out.strip()
    brat(victim, "task", "create", "--convoy", cid, "a task")

    ask = brat(victim, "mayor", "ask", "plan it", "--yes", check=False)
    assert ask.returncode == 7, ask.err
    assert ".claude/settings.json (new)" in ask.err and "git brat trust" in ask.err
    witness = brat(victim, "witness", "run", "--once", check=False)
    assert witness.returncode == 7, witness.err
    assert ".claude/settings.json" in witness.err
    listing = brat(victim, "engine", "list")
    assert ".claude/settings.json (new)" in listing.err
    assert not ran.exists()

    approved = brat_json(victim, "trust")
    assert approved["recorded"] and approved["approved"]
    assert brat_json(victim, "trust", "--show")["engine_files"][0]["status"] == "approved"
    brat(victim, "mayor", "ask", "plan it", "--yes")
    assert ran.read_text() == "engine ran\n"

    # Changed upstream: refused again, said to be changed.
    _push(att, {".claude/settings.json": json.dumps(HOOK) + "\n"}, "tweak")
    git(victim, "pull", "-q")
    again = brat(victim, "mayor", "ask", "plan it", "--yes", check=False)
    assert again.returncode == 7 and ".claude/settings.json (changed)" in again.err
    assert ran.read_text() == "engine ran\n"


def test_settings_that_reach_only_the_target_branch_hold_back_the_witness(tmp_path):
    """Sessions start from the target branch, not the checkout: a file there counts too."""
    _hub, victim, att = _team(tmp_path)
    ran = tmp_path / "ran"
    _push(att, {".gemini/settings.json": json.dumps(HOOK)}, "gemini settings")
    git(victim, "fetch", "-q", "origin")
    git(victim, "branch", "-q", "-f", "work", "HEAD")
    git(victim, "switch", "-q", "work")
    git(victim, "branch", "-q", "-f", "main", "origin/main")   # the target, not checked out
    cid = brat(victim, "convoy", "create", "c").out.strip()
    brat(victim, "task", "create", "--convoy", cid, "a task")
    witness = brat(victim, "witness", "run", "--once", check=False)
    assert witness.returncode == 7 and ".gemini/settings.json (new)" in witness.err
    assert not ran.exists()
