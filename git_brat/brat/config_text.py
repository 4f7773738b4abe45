"""The config file `git brat init` writes: every key, its value and a comment with its
default and what it allows (the settings themselves, their checks and edits: config.py)."""

from __future__ import annotations

from typing import Any

import msgspec

from git_brat.brat.config import (ENGINE_PRESETS, SECTIONS, Config, Engine, _description,
                                  _field_info, allowed, show_value)
from git_brat.brat.target_branch import default_target

HEADER = """\
# git-brat configuration. Commit this file to share the settings with everyone working here.
# Every key is listed with its default; delete a line to go back to the default.
# `git brat config set KEY VALUE` changes a value (validated) and keeps these comments.
"""


def _comment(text: str, width: int = 78) -> list[str]:
    import textwrap
    return ["# " + line for line in textwrap.wrap(text, width - 2, break_on_hyphens=False)]


def _key_lines(cls, obj, name: str) -> list[str]:
    f = _field_info(cls, name)
    text = (f"{_description(cls, name)} Default: {show_value(f.default)}. "
            f"Allowed: {allowed(f.type)}.")
    return _comment(text) + [f"{name} = {show_value(getattr(obj, name))}"]


def text_for(store) -> str:
    """default_text for this repository: work lands on its default branch (see default_target)."""
    return default_text({"refinery.target_branch": default_target(store)})


def default_text(overrides: dict[str, Any] | None = None, hub: bool = False) -> str:
    """The config file `git brat init` writes: every key, its value and a comment with its default.

    overrides ({"refinery.target_branch": "trunk"}) set values that differ per repository.
    """
    cfg = Config()
    for key, value in (overrides or {}).items():
        section, name = key.split(".")
        setattr(getattr(cfg, section), name, value)
    out = [HEADER]
    for section, cls in SECTIONS.items():
        if section == "hub" and not hub:
            continue   # read only in a hub's own file
        out.append(f"[{section}]")
        out += _comment(cls.__doc__)
        for f in msgspec.inspect.type_info(cls).fields:
            out.append("")
            out += _key_lines(cls, getattr(cfg, section), f.name)
        out.append("")
    presets = ", ".join(ENGINE_PRESETS)
    out += _comment(f"[engines.<name>]: {Engine.__doc__} Presets: {presets}. Every key is "
                    "optional; for example:")
    out.append("# [engines.claude]")
    for f in msgspec.inspect.type_info(Engine).fields:
        example = {"command": ["claude", "-p", "{prompt}"], "prompt": "arg", "result": "json",
                   "model": "sonnet", "extra_args": [], "env": {"EXAMPLE_VAR": "1"},
                   "timeout": 3600,
                   "resume": ["claude", "-p", "{prompt}", "--resume", "{resume_id}"],
                   "scratch": [".cache-of-my-agent/"], "state": ["~/.my-agent/"],
                   "instructions": "CLAUDE.md", "skills": ".claude/skills",
                   "meter": "claude-json"}[f.name]
        out += _comment(f"{f.name}: {_description(Engine, f.name)} Allowed: {allowed(f.type)}.")
        out.append(f"# {f.name} = {show_value(example)}")
    return "\n".join(out) + "\n"


__all__ = ["HEADER", "default_text", "text_for"]
