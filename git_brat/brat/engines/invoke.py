"""An engine run as data: the argv and env a preset makes for one prompt, and what its output said."""

from __future__ import annotations

import os
import re
from typing import Any, Mapping

import msgspec

from git_brat.brat.engines.presets import ANY_ID, PRESETS, Preset, meter
from git_brat.errors import NotFound, UsageError


class Invocation(msgspec.Struct):
    """What the runner starts: argv, extra env, and the prompt's way in."""
    argv: list[str]
    env: dict[str, str]
    stdin: str | None            # path of a file fed on stdin (prompt=stdin), else None
    resumed: bool                # argv continues an earlier conversation


class EngineResult(msgspec.Struct):
    """What an engine reported, read from its output."""
    is_error: bool
    message: str
    session_id: str
    json_found: bool


def resolve(name: str, configured: "Mapping[str, Any] | None" = None) -> Preset:
    """The preset `name` with .brat/config.toml's [engines.<name>] (`configured`: the
    config's `engines` table) applied, or defined there."""
    configured = configured or {}
    base = PRESETS.get(name)
    over = configured.get(name)
    if base is None and over is None:
        known = sorted(set(PRESETS) | set(configured))
        raise NotFound(f"no engine named {name!r} (presets and configured engines: "
                       f"{', '.join(known)})")
    if over is None:
        return base
    fields: dict[str, Any] = msgspec.structs.asdict(base) if base else {"name": name, "argv": []}
    fields["builtin"] = base is not None and over.command is None
    if over.command is not None:
        fields["argv"] = list(over.command)
        if base is not None and base.name != "shell":
            # Your own argv: the preset's resume and result rules may not fit it any more.
            fields.update(resume=None, new_session_args=[], resume_id_format=ANY_ID)
    for key in ("prompt", "result", "model", "timeout"):
        value = getattr(over, key)
        if value is not None:
            fields[key] = value
    for key in ("resume", "scratch", "state"):
        value = getattr(over, key)
        if value is not None:
            fields[key] = list(value)
    if over.instructions is not None:   # a file in the tree, not the preset's argv
        fields.update(instructions=over.instructions, instructions_args=[])
    if over.skills is not None:
        fields["skills"] = over.skills.rstrip("/")
    if over.meter is not None:
        fields["usage"] = meter(over.meter)
    fields["extra_args"] = list(over.extra_args)
    fields["env"] = {**fields.get("env", {}), **over.env}
    return msgspec.convert(fields, Preset)


def _fill(template: list[str], values: dict[str, str]) -> list[str]:
    out = []
    for arg in template:
        for key, value in values.items():
            if key in arg:
                arg = arg.replace(key, value)
        out.append(arg)
    return out


def resume_id_ok(p: Preset, resume_id: str) -> bool:
    """Whether a conversation id (from the log: any replica writes it) fits the engine's format,
    so it cannot land in its argv as an option or as anything but the one id."""
    return isinstance(resume_id, str) and re.fullmatch(p.resume_id_format, resume_id) is not None \
        and not resume_id.startswith("-")


def invocation(p: Preset, prompt: str, workdir: str, session_dir: str,
               resume_id: str = "", session_uuid: str = "", trusted: bool = False,
               checked: bool = False, brief: str = "") -> Invocation:
    """The argv for one session; `resume_id` continues that conversation when the engine can.

    trusted: the repository's engine settings are approved (`git brat trust`), so the engine
    may trust the workspace (its trust_env); checked: the run is not sandboxed, so the engine
    keeps its own permission checks (its `unchecked` arguments are left out); brief: the file
    of the project's instructions, for an engine that reads them through its argv."""
    if not p.argv:
        raise UsageError(f"engine {p.name} has no command: set engines.{p.name}.command in "
                         f".brat/config.toml (an argv list, e.g. [\"my-agent\", \"{{prompt}}\"])")
    resumed = bool(resume_id and p.resume)
    if resumed and not resume_id_ok(p, resume_id):
        raise UsageError(f"the conversation id {resume_id!r} to resume is not a {p.name} "
                         f"conversation id (format {p.resume_id_format}): refused, it would "
                         f"reach the engine's command line")
    template = list(p.resume if resumed else p.argv)
    if not resumed and session_uuid:
        template += p.new_session_args
    if p.model:
        template += p.model_args
    template += p.extra_args
    if brief:
        template += p.instructions_args
    prompt_file = os.path.join(session_dir, "prompt.txt")
    values = {"{prompt_file}": prompt_file, "{model}": p.model, "{workdir}": workdir,
              "{session_dir}": session_dir, "{session_uuid}": session_uuid,
              "{resume_id}": resume_id, "{brief}": brief}
    stdin = None
    if p.prompt == "arg":
        if not any("{prompt}" in a for a in template):
            template.append("{prompt}")
        values["{prompt}"] = prompt
    else:
        values["{prompt}"] = ""
        template = [a for a in template if a != "{prompt}"]
        if p.prompt == "stdin":
            stdin = prompt_file
    if checked:
        template = [a for a in template if a not in p.unchecked]
    env = {**p.env, **(p.trust_env if trusted else {})}
    return Invocation(_fill(template, values), env, stdin, resumed)


def shown_argv(argv: list[str], prompt: str) -> list[str]:
    """argv with the prompt elided: it is recorded, and may be long or private."""
    return [a.replace(prompt, "<prompt>") if prompt and prompt in a else a for a in argv]


def _dig(obj: Any, dotted: str) -> Any:
    for part in dotted.split("."):
        if not isinstance(obj, dict) or part not in obj:
            return None
        obj = obj[part]
    return obj


def json_objects(text: str) -> list[dict]:
    """Every JSON object in an engine's output: one document, or one per line (JSONL)."""
    stripped = text.strip()
    if stripped.startswith("{"):
        try:
            whole = msgspec.json.decode(stripped)
            if isinstance(whole, dict):
                return [whole]
        except msgspec.DecodeError:
            pass
    out, pos, past = [], 0, 0
    decoder = None
    for line in text.splitlines(keepends=True):
        start, pos = pos, pos + len(line)
        stripped = line.strip()
        if not stripped.startswith("{") or start < past:
            continue
        try:
            obj = msgspec.json.decode(stripped)
        except msgspec.DecodeError:
            # A pretty-printed document after other output: decode from here on.
            import json
            decoder = decoder or json.JSONDecoder()
            try:
                obj, past = decoder.raw_decode(text, start + len(line) - len(line.lstrip()))
            except ValueError:
                continue
        if isinstance(obj, dict):
            out.append(obj)
    return out


def read_result(p: Preset, output: str) -> EngineResult:
    """The engine's verdict, final message and own session id from what it printed."""
    if p.result != "json":
        return EngineResult(False, _last_line(output), "", False)
    objs = json_objects(output)
    session = message = ""
    error = False
    for obj in objs:
        for key in p.session_keys:
            value = _dig(obj, key)
            if isinstance(value, str) and value and not session:
                session = value
        for key in p.message_keys:
            value = _dig(obj, key)
            if isinstance(value, str) and value:
                message = value
        for key, bad in p.error_when.items():
            if _dig(obj, key) == bad:
                error = True
                message = _error_text(obj) or message
    return EngineResult(error, message or _last_line(output), session, bool(objs))


def _error_text(obj: dict) -> str:
    """The message of an error event, wherever the engine puts it."""
    for key in ("error.message", "data.message", "message", "error", "data.error"):
        value = _dig(obj, key)
        if isinstance(value, str) and value:
            return value
    return ""


def _last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1][:500] if lines else ""
