"""Engine presets as data: how each coding agent runs headless, gets its prompt, reports, resumes."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
from typing import TYPE_CHECKING, Any

import msgspec

from git_brat.grite.errors import NotFound, UsageError

if TYPE_CHECKING:
    from git_brat.brat.config import Config

# Placeholders an argv template may hold; each is replaced inside one argv element, never
# through a shell, so task text in {prompt} stays one inert argument.
PLACEHOLDERS = ("{prompt}", "{prompt_file}", "{model}", "{workdir}", "{session_dir}",
                "{session_uuid}", "{resume_id}")


class Preset(msgspec.Struct, kw_only=True):
    """One engine: an argv template plus how the prompt goes in and the result comes out."""
    name: str
    argv: list[str]                        # argv[0] is the binary, looked up on PATH
    package: str = ""                      # where it installs from (shown by `engine list`)
    prompt: str = "arg"                    # arg ({prompt} in argv) | stdin | file ({prompt_file})
    result: str = "exit"                   # exit: the exit code alone | json: also JSON on stdout
    env: dict[str, str] = {}
    model: str = ""                        # default model (none: the engine's own default)
    model_args: list[str] = []             # added when a model is set, e.g. ["--model", "{model}"]
    # A new conversation named up front ({session_uuid}, a UUID4 we choose), so a crashed
    # session's conversation id is known even if the engine never printed it.
    new_session_args: list[str] = []
    resume: list[str] | None = None        # argv template to continue conversation {resume_id}
    session_keys: list[str] = []           # JSON keys (dotted) holding the engine's session id
    message_keys: list[str] = []           # JSON keys holding the final message
    error_when: dict[str, Any] = {}        # JSON key -> value that marks the run as failed
    version_args: list[str] = msgspec.field(default_factory=lambda: ["--version"])
    timeout: float | None = None           # per-engine session timeout (None: witness.timeout)
    extra_args: list[str] = []             # appended after the template (config)
    builtin: bool = True                   # a shipped preset (False: defined in the config)
    # Files the engine leaves in the work tree that are its own, not work (caches): never
    # committed for it.
    scratch: list[str] = []

    @property
    def binary(self) -> str:
        return self.argv[0] if self.argv else ""

    @property
    def resumes(self) -> bool:
        return self.resume is not None


PRESETS: dict[str, Preset] = {p.name: p for p in (
    Preset(
        name="claude", package="npm @anthropic-ai/claude-code",
        # Not acceptEdits: it refuses every write under .git/ ("a sensitive file"), and the
        # session work trees live in .git/brat/worktrees/. Skipping permissions needs
        # IS_SANDBOX=1 when running as root.
        argv=["claude", "-p", "{prompt}", "--output-format", "json",
              "--dangerously-skip-permissions"],
        result="json", model_args=["--model", "{model}"],
        env={"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_AUTOUPDATER": "1",
             "IS_SANDBOX": "1"},
        new_session_args=["--session-id", "{session_uuid}"],
        resume=["claude", "-p", "{prompt}", "--resume", "{resume_id}", "--output-format", "json",
                "--dangerously-skip-permissions"],
        session_keys=["session_id"], message_keys=["result"], error_when={"is_error": True}),
    Preset(
        name="aider", package="pypi aider-chat", scratch=[".aider*"],
        # --no-detect-urls: with --yes-always it would fetch every URL in the task text.
        argv=["aider", "--message", "{prompt}", "--yes-always", "--no-check-update",
              "--no-analytics", "--no-gitignore", "--no-show-model-warnings", "--no-pretty",
              "--no-detect-urls", "--chat-history-file", "{session_dir}/aider.chat.md",
              "--input-history-file", "{session_dir}/aider.input.history"],
        model_args=["--model", "{model}"], env={"LITELLM_LOCAL_MODEL_COST_MAP": "True"},
        resume=["aider", "--message", "{prompt}", "--yes-always", "--no-check-update",
                "--no-analytics", "--no-gitignore", "--no-show-model-warnings", "--no-pretty",
                "--no-detect-urls", "--restore-chat-history",
                "--chat-history-file", "{resume_id}/aider.chat.md",
                "--input-history-file", "{resume_id}/aider.input.history"]),
    Preset(
        name="codex", package="npm @openai/codex",
        argv=["codex", "exec", "--json", "--skip-git-repo-check",
              "--dangerously-bypass-approvals-and-sandbox", "-C", "{workdir}", "{prompt}"],
        result="json", model_args=["-m", "{model}"],
        resume=["codex", "exec", "--json", "--skip-git-repo-check",
                "--dangerously-bypass-approvals-and-sandbox", "-C", "{workdir}", "resume",
                "{resume_id}", "{prompt}"],
        session_keys=["thread_id"], message_keys=["item.text"],
        error_when={"type": "error"}),
    Preset(
        name="opencode", package="npm opencode-ai",
        argv=["opencode", "run", "--format", "json", "--dir", "{workdir}", "{prompt}"],
        result="json", model_args=["-m", "{model}"],
        resume=["opencode", "run", "--format", "json", "--dir", "{workdir}", "-s", "{resume_id}",
                "{prompt}"],
        session_keys=["sessionID"], message_keys=["part.text"], error_when={"type": "error"}),
    Preset(
        name="gemini", package="npm @google/gemini-cli",
        # stream-json, not json: json is one pretty-printed document, unreadable line by line
        # once its stderr warnings (always some) are mixed in; stream-json is JSONL.
        argv=["gemini", "-p", "{prompt}", "--output-format", "stream-json", "--yolo"],
        result="json", model="gemini-2.5-flash", model_args=["-m", "{model}"],
        env={"GEMINI_CLI_TRUST_WORKSPACE": "true"},
        new_session_args=["--session-id", "{session_uuid}"],
        resume=["gemini", "-p", "{prompt}", "--output-format", "stream-json", "--yolo",
                "--resume", "{resume_id}"],
        # A failed tool call is {"type": "tool_result", "status": "error"} too: the exit
        # status (non-zero when the model fails) is the verdict.
        session_keys=["session_id"], message_keys=["content", "response"], error_when={}),
    Preset(
        name="cn", package="npm @continuedev/cli",
        argv=["cn", "-p", "{prompt}", "--format", "json", "--auto"],
        result="json", session_keys=[], message_keys=["response"],
        error_when={"status": "error"}),
    Preset(
        name="copilot", package="npm @github/copilot",
        argv=["copilot", "-p", "{prompt}", "--output-format", "json", "--allow-all-tools",
              "-C", "{workdir}"],
        result="json", model_args=["--model", "{model}"],
        new_session_args=["--session-id", "{session_uuid}"],
        resume=["copilot", "-p", "{prompt}", "--output-format", "json", "--allow-all-tools",
                "-C", "{workdir}", "--resume", "{resume_id}"],
        session_keys=["sessionId", "session_id"], message_keys=["data.content"],
        error_when={"type": "session.error"}),
    # Any command: [engines.shell] command = [...] in .brat/config.toml.
    Preset(name="shell", argv=[], version_args=[]),
    # The scripted agent of `git brat demo` (not an AI): fixes the demo project's bugs.
    Preset(name="demo", package="ships with git-brat (a scripted agent, not an AI)",
           argv=[sys.executable, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                              "demo_agent.py"), "{prompt}"],
           version_args=[]),
)}
PRESET_NAMES = tuple(PRESETS)


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


def resolve(name: str, cfg: "Config | None" = None) -> Preset:
    """The preset `name` with .brat/config.toml's [engines.<name>] applied (or defined there)."""
    base = PRESETS.get(name)
    over = cfg.engines.get(name) if cfg is not None else None
    if base is None and over is None:
        known = sorted(set(PRESETS) | set(cfg.engines if cfg else ()))
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
            fields.update(resume=None, new_session_args=[])
    for key in ("prompt", "result", "model", "timeout"):
        value = getattr(over, key)
        if value is not None:
            fields[key] = value
    for key in ("resume", "scratch"):
        value = getattr(over, key)
        if value is not None:
            fields[key] = list(value)
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


def invocation(p: Preset, prompt: str, workdir: str, session_dir: str,
               resume_id: str = "", session_uuid: str = "") -> Invocation:
    """The argv for one session; `resume_id` continues that conversation when the engine can."""
    if not p.argv:
        raise UsageError(f"engine {p.name} has no command: set engines.{p.name}.command in "
                         f".brat/config.toml (an argv list, e.g. [\"my-agent\", \"{{prompt}}\"])")
    resumed = bool(resume_id and p.resume)
    template = list(p.resume if resumed else p.argv)
    if not resumed and session_uuid:
        template += p.new_session_args
    if p.model:
        template += p.model_args
    template += p.extra_args
    prompt_file = os.path.join(session_dir, "prompt.txt")
    values = {"{prompt_file}": prompt_file, "{model}": p.model, "{workdir}": workdir,
              "{session_dir}": session_dir, "{session_uuid}": session_uuid,
              "{resume_id}": resume_id}
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
    return Invocation(_fill(template, values), dict(p.env), stdin, resumed)


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


# -- what is installed ------------------------------------------------------------

class EngineInfo(msgspec.Struct):
    name: str
    binary: str
    path: str | None             # where it is on PATH (None: not installed)
    version: str
    package: str
    builtin: bool
    resumes: bool
    prompt: str
    result: str
    model: str
    argv: list[str]              # what a session would run (prompt shown as <prompt>)
    env: dict[str, str]
    timeout: float | None


def version_of(p: Preset, path: str | None, timeout: float = 60.0) -> str:
    """The first line `path --version` prints (a preset's version_args); "" if it says nothing.
    Remembered per binary file (its real path, size and mtime): node tools take seconds to
    start, and an installed file's version never changes."""
    if not path or not p.version_args:
        return ""
    key = _version_key(path, p.version_args)
    known = _known_versions()
    if key and key in known:
        return known[key]
    try:
        proc = subprocess.run([path, *p.version_args], stdin=subprocess.DEVNULL,
                              capture_output=True, timeout=timeout)
    except (OSError, subprocess.SubprocessError):
        return ""
    text = (proc.stdout or proc.stderr).decode("utf-8", "replace").strip()
    version = text.splitlines()[0][:80] if text else ""
    if key and version and proc.returncode == 0:
        _remember_version(key, version)
    return version


_versions_lock = threading.Lock()


def _version_key(path: str, args: list[str]) -> str:
    try:
        real = os.path.realpath(path)
        st = os.stat(real)
    except OSError:
        return ""
    return "\0".join([real, str(st.st_size), str(st.st_mtime_ns), *args])


def _versions_file() -> str:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "git-brat", "engine-versions.json")


def _known_versions() -> dict[str, str]:
    try:
        with open(_versions_file(), "rb") as f:
            return msgspec.json.decode(f.read(), type=dict[str, str])
    except (OSError, msgspec.DecodeError, msgspec.ValidationError):
        return {}


def _remember_version(key: str, version: str) -> None:
    """Best effort (a read-only HOME just probes each time); probes run in threads at once,
    so each write is a whole new file renamed into place."""
    import tempfile
    with _versions_lock:
        path = _versions_file()
        known = {k: v for k, v in _known_versions().items() if os.path.exists(k.split("\0")[0])}
        known[key] = version
        tmp = ""
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".versions-")
            with os.fdopen(fd, "wb") as f:
                f.write(msgspec.json.encode(known))
            os.replace(tmp, path)
        except OSError:
            if tmp and os.path.exists(tmp):
                os.unlink(tmp)


def info(p: Preset, workdir: str = "<worktree>", with_version: bool = True) -> EngineInfo:
    path = shutil.which(p.binary) if p.binary else None
    inv = invocation(p, "<prompt>", workdir, "<session-dir>", session_uuid="<uuid>") \
        if p.argv else Invocation([], dict(p.env), None, False)
    return EngineInfo(p.name, p.binary, path, version_of(p, path) if with_version else "",
                      p.package, p.builtin, p.resumes, p.prompt, p.result, p.model, inv.argv,
                      dict(p.env), p.timeout)


def all_names(cfg: "Config | None") -> list[str]:
    return [*PRESETS, *sorted(n for n in (cfg.engines if cfg else {}) if n not in PRESETS)]


__all__ = ["Preset", "PRESETS", "PRESET_NAMES", "Invocation", "EngineResult", "resolve",
           "invocation", "read_result", "shown_argv", "info", "all_names"]
