"""Engine presets as data: how each coding agent runs headless, gets its prompt, reports, resumes.

Imports nothing of brat: the config validates engine names against this table.
"""

from __future__ import annotations

import fnmatch
import functools
import os
import re
import sys
from typing import Any, Iterable

import msgspec

# Placeholders an argv template may hold; each is replaced inside one argv element, never
# through a shell, so task text in {prompt} stays one inert argument.
# What a conversation id to resume may look like. It comes from the log (any replica writes
# it) and lands in the engine's argv: never anything that could be an option ('-' first), a
# path out of place, or a second argument.
ANY_ID = r"[A-Za-z0-9_/][A-Za-z0-9_.:@+=/-]{0,511}"
UUID = r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
# A session directory of ours (.git/brat/sessions/<32 hex>), for engines that resume from files.
SESSION_DIR = r"/(?:[^/\0\n]+/)*brat/sessions/[0-9a-f]{32}"

PLACEHOLDERS = ("{prompt}", "{prompt_file}", "{model}", "{workdir}", "{session_dir}",
                "{session_uuid}", "{resume_id}", "{brief}")


class Meter(msgspec.Struct, kw_only=True, frozen=True):
    """Where an engine reports the tokens and cost of a run (read by engines/usage.py).

    Keys are dotted paths into a JSON object ("*" steps into every entry of a map, and the
    values found are summed); `line` is a regular expression over the output's lines instead,
    its named groups input, output, cache_read, cache_write and cost."""
    when: dict[str, Any] = {}          # JSON key -> value that marks a report
    input: list[str] = []              # tokens read (the prompt, cache misses and hits alike)
    output: list[str] = []
    cache_read: list[str] = []
    cache_write: list[str] = []
    reasoning: list[str] = []
    cost: list[str] = []               # USD
    models: str = ""                   # a map keyed by the model names used
    line: str = ""
    each: bool = False                 # every report adds (one per step); else the last counts
    # A resumed conversation reports its totals so far (what earlier sessions spent too).
    cumulative: bool = False
    # A side channel: a file the engine writes beside its output ("$VAR|~/path" like `state`;
    # {engine_session} the conversation's id; a "*" picks the newest file written during the
    # run whose `file_when` keys hold ({workdir}: the session's work tree)).
    file: str = ""
    file_when: dict[str, str] = {}


class Endings(msgspec.Struct, frozen=True, kw_only=True):
    """How an engine says its run ended badly (engines/ending.py reads them): regexes, each
    matched against its output (case-sensitive unless (?i:...); ^ and $ at each line)."""
    limit: list[str] = []          # a usage or rate limit: the task pauses, the engine is held
    limit_exit: list[int] = []     # exit codes that mean a limit by themselves
    auth: list[str] = []           # its credentials were refused: a human must act
    transient: list[str] = []      # a passing error (overload, 5xx, a dropped connection)
    # The conversation to resume is gone (an engine that saved none when its first request
    # failed): the next session starts afresh, uncharged.
    lost: list[str] = []
    # It waits silently on a long retry-after (codex, opencode, cn, copilot): the idle
    # watchdog (witness.idle_timeout) watches it, and a silence it ends is a limit. Engines
    # that print nothing until they end (claude's, gemini's JSON) are not watched.
    silent_on_limit: bool = False
    # What the engine did last, for the watchdog: its last line of output matching one of
    # these says a tool of its runs (a long test suite is no silence)...
    busy: list[str] = []
    # ...and files it writes as it works ("$VAR/x|~/x"), for one that prints nothing until
    # it ends (cn): their changes count as output.
    activity: list[str] = []
    # It retried the limit itself before it gave up (gemini's "Attempt N failed"): the delay
    # it suggests was spent on its own retries, so no reset is known and the pause backs off.
    retried: list[str] = []


# What any engine's HTTP client says of a 429 or a refused key, for engines with no rules
# of their own (a configured command); the presets name their own.
GENERIC_ENDINGS = Endings(
    limit=[r"429 Too Many Requests", r"[Rr]ate[ _-]?limit(?:ed| reached| exceeded)",
           r"[Uu]sage limit", r"[Qq]uota exceeded"],
    auth=[r"401 Unauthori[sz]ed", r"[Ii]nvalid[ _-]API[ _-]key", r"invalid_api_key"],
    transient=[r"50[234] (?:Bad Gateway|Service Unavailable|Gateway Timeout)",
               r"529 Overloaded"])


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
    resume_id_format: str = ANY_ID         # regex a {resume_id} must match in full
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
    # Where the engine keeps its own state (config, sessions, caches): writable in a sandbox,
    # where the rest of HOME is read-only. "~/x/" a directory, "~/x" a file, "$VAR|~/x/" the
    # variable's value when it is set.
    state: list[str] = []
    # The repository's own files the engine reads that can run commands or add tools (hooks,
    # MCP servers, plugins, custom commands): code whoever pushed wrote, so the witness and the
    # mayor run the engine only once `git brat trust` approved them as they are. "dir/" is
    # everything under a top-level directory, any other entry a glob on a top-level path.
    settings: list[str] = []
    # argv elements that turn the engine's own permission checks off: kept only where the run
    # is sandboxed (an unconfined mayor runs without them).
    unchecked: list[str] = []
    # Environment that turns the engine's own workspace trust off: given only with the
    # repository's settings approved (never by the preset on its own).
    trust_env: dict[str, str] = {}
    # -- what the engine reads besides its prompt (the witness's brief: witness/brief.py) --
    # The file in the work tree the engine loads its instructions from ("": none). The
    # witness writes the project's instructions there, untracked, when the tree does not
    # track that file.
    instructions: str = ""
    # Or: argv that makes the engine read them from a file outside the tree ({brief}).
    instructions_args: list[str] = []
    # The folder in the work tree the engine finds skills in (<folder>/<name>/SKILL.md);
    # "": none, the skills' descriptions go into its instructions.
    skills: str = ""
    # Where its tokens and cost are reported (None: nowhere known; the session's usage is
    # unknown).
    usage: Meter | None = None
    # How it reports a usage limit, refused credentials, a passing error (engines/ending.py).
    endings: Endings = GENERIC_ENDINGS

    @property
    def binary(self) -> str:
        return self.argv[0] if self.argv else ""

    @property
    def resumes(self) -> bool:
        return self.resume is not None


PRESETS: dict[str, Preset] = {p.name: p for p in (
    Preset(
        name="claude", package="npm @anthropic-ai/claude-code",
        state=["$CLAUDE_CONFIG_DIR|~/.claude/", "~/.claude.json"],
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
        session_keys=["session_id"], message_keys=["result"], error_when={"is_error": True},
        resume_id_format=UUID,
        # settings.json and settings.local.json hooks, commands, agents, skills; MCP servers
        settings=[".claude/", ".mcp.json"], unchecked=["--dangerously-skip-permissions"],
        # not AGENTS.md, even when no CLAUDE.md exists
        instructions="CLAUDE.md", skills=".claude/skills",
        # modelUsage, not usage: on --resume, `usage` is this run's while total_cost_usd is the
        # conversation's; modelUsage holds the conversation's tokens and cost alike (measured).
        usage=Meter(when={"type": "result"}, models="modelUsage",
                    input=["modelUsage.*.inputTokens", "modelUsage.*.cacheReadInputTokens",
                           "modelUsage.*.cacheCreationInputTokens"],
                    output=["modelUsage.*.outputTokens"],
                    cache_read=["modelUsage.*.cacheReadInputTokens"],
                    cache_write=["modelUsage.*.cacheCreationInputTokens"],
                    reasoning=["modelUsage.*.thinkingTokens"], cost=["modelUsage.*.costUSD"],
                    cumulative=True)),
    Preset(
        name="aider", package="pypi aider-chat", scratch=[".aider*"], state=["~/.aider/"],
        # --no-detect-urls: with --yes-always it would fetch every URL in the task text.
        argv=["aider", "--message", "{prompt}", "--yes-always", "--no-check-update",
              "--no-analytics", "--no-gitignore", "--no-show-model-warnings", "--no-pretty",
              "--no-detect-urls", "--chat-history-file", "{session_dir}/engine/aider.chat.md",
              "--input-history-file", "{session_dir}/engine/aider.input.history"],
        model_args=["--model", "{model}"], env={"LITELLM_LOCAL_MODEL_COST_MAP": "True"},
        resume=["aider", "--message", "{prompt}", "--yes-always", "--no-check-update",
                "--no-analytics", "--no-gitignore", "--no-show-model-warnings", "--no-pretty",
                "--no-detect-urls", "--restore-chat-history",
                "--chat-history-file", "{resume_id}/engine/aider.chat.md",
                "--input-history-file", "{resume_id}/engine/aider.input.history"],
        resume_id_format=SESSION_DIR,
        # .aider.conf.yml (and .env, read from the repository's top) set test-cmd/lint-cmd,
        # which --yes-always runs
        settings=[".aider*", ".env"], unchecked=["--yes-always"],
        # no instructions file of its own: --read, a read-only file in the chat
        instructions_args=["--read", "{brief}"],
        # "Tokens: 2.6k sent, 1.2k cache write, 300 cache hit, 21 received. Cost: $0.01
        # message, $0.02 session." per message; counts over 1k are rounded to 0.1k by aider.
        usage=Meter(line=r"^Tokens: (?P<input>[\d.]+k?) sent, (?:(?P<cache_write>[\d.]+k?) "
                         r"cache write, )?(?:(?P<cache_read>[\d.]+k?) cache hit, )?"
                         r"(?P<output>[\d.]+k?) received\.(?: Cost: \$(?P<cost>[\d.]+) message)?",
                    each=True)),
    Preset(
        name="codex", package="npm @openai/codex", state=["$CODEX_HOME|~/.codex/"],
        argv=["codex", "exec", "--json", "--skip-git-repo-check",
              "--dangerously-bypass-approvals-and-sandbox", "-C", "{workdir}", "{prompt}"],
        result="json", model_args=["-m", "{model}"],
        resume=["codex", "exec", "--json", "--skip-git-repo-check",
                "--dangerously-bypass-approvals-and-sandbox", "-C", "{workdir}", "resume",
                "{resume_id}", "{prompt}"],
        session_keys=["thread_id"], message_keys=["item.text"],
        # `resume` takes the id positionally: a UUID, never an option.
        error_when={"type": "error"}, resume_id_format=UUID,
        # .codex/config.toml (MCP servers, notify, hooks), skills
        settings=[".codex/", ".agents/"],
        unchecked=["--dangerously-bypass-approvals-and-sandbox"],
        instructions="AGENTS.md", skills=".agents/skills",
        # The thread's totals: a resumed thread reports the earlier runs' tokens again.
        usage=Meter(when={"type": "turn.completed"},
                    input=["usage.input_tokens"], output=["usage.output_tokens"],
                    cache_read=["usage.cached_input_tokens"],
                    cache_write=["usage.cache_write_input_tokens"],
                    reasoning=["usage.reasoning_output_tokens"], cumulative=True)),
    Preset(
        name="opencode", package="npm opencode-ai",
        state=["$XDG_DATA_HOME/opencode|~/.local/share/opencode/",
               "$XDG_STATE_HOME/opencode|~/.local/state/opencode/",
               "$XDG_CACHE_HOME/opencode|~/.cache/opencode/",
               "$XDG_CONFIG_HOME/opencode|~/.config/opencode/"],
        argv=["opencode", "run", "--format", "json", "--dir", "{workdir}", "{prompt}"],
        result="json", model_args=["-m", "{model}"],
        resume=["opencode", "run", "--format", "json", "--dir", "{workdir}", "-s", "{resume_id}",
                "{prompt}"],
        session_keys=["sessionID"], message_keys=["part.text"], error_when={"type": "error"},
        resume_id_format=r"ses_[A-Za-z0-9]{1,64}",
        # opencode.json(c): MCP servers, commands, permissions; .opencode/: plugins (code)
        settings=["opencode.json", "opencode.jsonc", ".opencode/", ".opencode.json",
                  ".claude/", ".agents/"],
        instructions="AGENTS.md", skills=".agents/skills",
        usage=Meter(when={"type": "step_finish"}, each=True,
                    input=["part.tokens.input", "part.tokens.cache.read"],
                    output=["part.tokens.output"], reasoning=["part.tokens.reasoning"],
                    cache_read=["part.tokens.cache.read"],
                    cache_write=["part.tokens.cache.write"], cost=["part.cost"])),
    Preset(
        name="gemini", package="npm @google/gemini-cli", state=["~/.gemini/"],
        # stream-json, not json: json is one pretty-printed document, unreadable line by line
        # once its stderr warnings (always some) are mixed in; stream-json is JSONL.
        argv=["gemini", "-p", "{prompt}", "--output-format", "stream-json", "--yolo"],
        result="json", model="gemini-2.5-flash", model_args=["-m", "{model}"],
        trust_env={"GEMINI_CLI_TRUST_WORKSPACE": "true"},
        new_session_args=["--session-id", "{session_uuid}"],
        resume=["gemini", "-p", "{prompt}", "--output-format", "stream-json", "--yolo",
                "--resume", "{resume_id}"],
        # A failed tool call is {"type": "tool_result", "status": "error"} too: the exit
        # status (non-zero when the model fails) is the verdict.
        session_keys=["session_id"], message_keys=["content", "response"], error_when={},
        resume_id_format=UUID,
        # settings.json: hooks, MCP servers, tool discovery commands; extensions; commands
        settings=[".gemini/"], unchecked=["--yolo"],
        # GEMINI.md, not AGENTS.md (unless its settings' context.fileName says so)
        instructions="GEMINI.md", skills=".gemini/skills",
        usage=Meter(when={"type": "result"}, models="stats.models",
                    input=["stats.input_tokens"], output=["stats.output_tokens"],
                    cache_read=["stats.cached"])),
    Preset(
        name="cn", package="npm @continuedev/cli", state=["$CONTINUE_GLOBAL_DIR|~/.continue/"],
        argv=["cn", "-p", "{prompt}", "--format", "json", "--auto"],
        result="json", session_keys=[], message_keys=["response"],
        error_when={"status": "error"},
        # config.yaml, MCP servers, rules, prompts
        settings=[".continue/", ".continuerc.json"], unchecked=["--auto"],
        instructions="AGENTS.md", skills=".continue/skills",
        # Its output has no usage: its session file does (one per run, it cannot resume).
        usage=Meter(file="$CONTINUE_GLOBAL_DIR/sessions/*.json|~/.continue/sessions/*.json",
                    file_when={"workspaceDirectory": "{workdir}"},
                    input=["usage.promptTokens"], output=["usage.completionTokens"],
                    cache_read=["usage.promptTokensDetails.cachedTokens"],
                    cache_write=["usage.promptTokensDetails.cacheWriteTokens"],
                    cost=["usage.totalCost"])),
    Preset(
        name="copilot", package="npm @github/copilot",
        # It unpacks its bundled package under the cache directory on every start.
        state=["$COPILOT_HOME|~/.copilot/", "$XDG_CACHE_HOME/copilot|~/.cache/copilot/"],
        argv=["copilot", "-p", "{prompt}", "--output-format", "json", "--allow-all-tools",
              "-C", "{workdir}"],
        result="json", model_args=["--model", "{model}"],
        new_session_args=["--session-id", "{session_uuid}"],
        resume=["copilot", "-p", "{prompt}", "--output-format", "json", "--allow-all-tools",
                "-C", "{workdir}", "--resume", "{resume_id}"],
        session_keys=["sessionId", "session_id"], message_keys=["data.content"],
        error_when={"type": "session.error"}, resume_id_format=UUID,
        # hooks, agents, skills and MCP servers of the repository
        settings=[".github/copilot*", ".github/hooks/", ".github/agents/", ".github/skills/",
                  ".copilot/", ".vscode/mcp.json", ".mcp.json", ".claude/", ".agents/"],
        unchecked=["--allow-all-tools"], instructions="AGENTS.md", skills=".agents/skills",
        # Its output has no tokens: its conversation's event file does, one record a model
        # call, every run of the conversation in it.
        usage=Meter(file="$COPILOT_HOME/session-state/{engine_session}/events.jsonl|"
                         "~/.copilot/session-state/{engine_session}/events.jsonl",
                    when={"type": "session.usage_record"}, each=True, cumulative=True,
                    input=["data.usage.inputTokens"], output=["data.usage.outputTokens"],
                    cache_read=["data.usage.cacheReadTokens"],
                    cache_write=["data.usage.cacheWriteTokens"], cost=["data.usage.cost"])),
    # Any command: [engines.shell] command = [...] in .brat/config.toml.
    Preset(name="shell", argv=[], version_args=[]),
    # The scripted agent of `git brat demo` (not an AI): fixes the demo project's bugs.
    Preset(name="demo", package="ships with git-brat (a scripted agent, not an AI)",
           argv=[sys.executable, os.path.join(os.path.dirname(os.path.dirname(
                                                  os.path.abspath(__file__))), "demo", "agent.py"), "{prompt}"],
           version_args=[]),
)}

# -- how each engine reports a limit (measured against the fake model server answering 429:
# /work/shared/engines-real-world.md §2c). JSON engines: their own event keys.
ENDINGS: dict[str, Endings] = {
    "claude": Endings(
        limit=[r'"api_error_status":\s*429', r'"error":\s*"rate_limit"',
               r'"rate_limit_info":\s*\{[^{}]*"status":\s*"rejected"',
               r'"terminal_reason":\s*"blocking_limit"', r"^Claude AI usage limit reached\|",
               r"You've hit your [\w' -]{0,40}limit"],
        auth=[r'"api_error_status":\s*40[13]', r"Invalid API key"],
        transient=[r'"api_error_status":\s*(?:5\d\d)', r"overloaded_error"]),
    "codex": Endings(
        limit=[r"You(?:[\u2019']|\\u2019)ve hit your usage limit", r"usage_limit_reached",
               r"last status: 429"],
        auth=[r"last status: 401", r"invalid_api_key"],
        transient=[r"last status: 5\d\d", r"stream disconnected"], silent_on_limit=True,
        busy=[r'^\{"type":"item\.started"']),
    "gemini": Endings(
        limit=[r'"code":\s*429\b', r"exhausted your daily quota", r"TerminalQuotaError",
               r"^Attempt \d+ failed: Resource has been exhausted"],
        limit_exit=[173],
        # A per-minute quota it retried up to general.maxAttempts times (10: ~4-5 min).
        retried=[r"^Attempt \d+ failed: "],
        # After a limit on its first request it saved no session (measured: exit 42).
        lost=[r"^Error resuming session: No previous sessions found"],
        auth=[r'"code":\s*40[13]\b', r"API key not valid"],
        transient=[r'"code":\s*5\d\d\b']),
    "opencode": Endings(
        limit=[r"Quota exceeded\. Check your plan", r"insufficient_quota",
               r'"statusCode":\s*429\b', r"\bAPICallError\b[^\n]{0,200}\b429\b"],
        auth=[r'"statusCode":\s*40[13]'], transient=[r'"statusCode":\s*5\d\d'],
        silent_on_limit=True),
    "cn": Endings(
        limit=[r"429 (?:Too Many Requests|status code)", r"[Rr]ate limit"],
        auth=[r"401 (?:Unauthori[sz]ed|status code)"],
        transient=[r"5\d\d status code"], silent_on_limit=True,
        activity=["$CONTINUE_GLOBAL_DIR/logs/cn.log|~/.continue/logs/cn.log"]),
    "copilot": Endings(
        limit=[r'"errorType":\s*"rate_limit"', r'"errorType":\s*"quota',
               r'"statusCode":\s*429\b'],
        auth=[r'"statusCode":\s*40[13]\b'],
        transient=[r'"statusCode":\s*5\d\d\b'],
        # Out of quota (insufficient_quota) it retries quietly (measured: 5 requests in 40 s).
        silent_on_limit=True, busy=[r'^\{"type":"tool\.execution_start"']),
    "aider": Endings(
        limit=[r"^litellm\.RateLimitError", r"^The API provider has rate limited you"],
        auth=[r"^litellm\.AuthenticationError"],
        transient=[r"^litellm\.(?:ServiceUnavailableError|InternalServerError|APIConnectionError)"]),
    "demo": Endings(),
}
for _name, _endings in ENDINGS.items():
    PRESETS[_name] = msgspec.structs.replace(PRESETS[_name], endings=_endings)
PRESET_NAMES = tuple(PRESETS)

# The spending meters an engine defined in .brat/config.toml may name ([engines.X] meter): each
# preset's own, by its engine and the shape of its report.
METERS: dict[str, str] = {
    "claude-json": "claude", "codex-jsonl": "codex", "opencode-jsonl": "opencode",
    "gemini-jsonl": "gemini", "aider-lines": "aider", "cn-session-file": "cn",
    "copilot-events-file": "copilot"}
METER_NAMES = tuple(METERS)


def meter(name: str) -> Meter | None:
    """The meter named `name` (one of METER_NAMES)."""
    return PRESETS[METERS[name]].usage


@functools.lru_cache(maxsize=64)
def _matcher(entries: tuple[str, ...]) -> "re.Pattern[str]":
    """One regex for settings entries: "dir/" matches everything under it, any other a glob."""
    parts = [re.escape(e) + ".*" if e.endswith("/") else fnmatch.translate(e)[4:-3]
             for e in entries]
    return re.compile("(?s:" + "|".join(parts or ["(?!)"]) + r")\Z")


def is_settings(path: str, entries: Iterable[str]) -> bool:
    return _matcher(tuple(entries)).match(path) is not None


def settings_engines(path: str) -> list[str]:
    """The shipped engines that read the repository file `path` as settings that can run code."""
    return [p.name for p in PRESETS.values() if is_settings(path, p.settings)]


def settings_top(name: str) -> bool:
    """Whether a top-level entry of a tree may hold an engine's settings (a file or a
    directory: a directory's files are matched afterwards)."""
    return is_settings(name, _settings_tops())


@functools.lru_cache(maxsize=1)
def _settings_tops() -> tuple[str, ...]:
    return tuple(sorted({e.split("/")[0] for p in PRESETS.values() for e in p.settings}))


def all_names(configured: Iterable[str] = ()) -> list[str]:
    """The presets, then the engines only .brat/config.toml defines, by name."""
    return [*PRESETS, *sorted(n for n in configured if n not in PRESETS)]
