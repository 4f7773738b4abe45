""".brat/config.toml → a typed Config with defaults; errors name the key and what is allowed."""

from __future__ import annotations

import math
import os
import re
import typing
from typing import Annotated, Any, Literal

import msgspec
from msgspec import Meta

from git_brat.brat.engines.presets import METER_NAMES, PRESET_NAMES
from git_brat.brat.engines.usage import spending_problem
from git_brat.brat.target_branch import valid_branch
from git_brat.errors import NotFound, UsageError

CONFIG_PATH = os.path.join(".brat", "config.toml")
# Engine presets the witness knows; [engines.<name>] may override them or define new ones.
ENGINE_PRESETS = PRESET_NAMES
MERGE_POLICIES = ("rebase", "squash", "merge")


class ConfigError(UsageError):
    """A config file that cannot be used; the message names the file and the key."""


def _d(kind, description: str, **constraints):
    """A type with its description (and constraints, applied inside an optional's None)."""
    args = typing.get_args(kind)
    if constraints and type(None) in args:
        inner = next(a for a in args if a is not type(None))
        return Annotated[inner, Meta(description=description, **constraints)] | None
    return Annotated[kind, Meta(description=description, **constraints)]


class _Section(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    pass


class Witness(_Section):
    """Spawns and supervises coding-agent sessions, one git worktree each."""
    engine: _d(str, "Engine that works on tasks: a preset (claude, aider, opencode, codex, cn, "
                    "gemini, copilot, shell, demo) or a name defined under [engines.<name>].",
               min_length=1) = "claude"
    concurrency: _d(int, "Sessions running at the same time.", ge=1, le=64) = 2
    timeout: _d(float, "Wall-clock limit for one session, in seconds.", gt=0) = 3600
    heartbeat: _d(float, "Seconds between lease renewals while a session runs.", gt=0) = 30
    lease_ttl: _d(float, "Seconds a task's lease lives without renewal; must exceed heartbeat.",
                  gt=0) = 120
    max_retries: _d(int, "Retries of a session that ends without work before the task is "
                         "marked failed.", ge=0, le=100) = 2
    backoff: _d(float, "Delay before the first retry, in seconds; doubles on every retry.",
                ge=0) = 30
    backoff_max: _d(float, "Longest delay between retries, in seconds.", ge=0) = 600
    setup: _d(str, "Command run with `sh -c` in each new session worktree before the engine "
                   "starts (e.g. \"npm ci\"); a failure ends the session as failed; empty: "
                   "none.") = ""
    allow_empty_done: _d(bool, "A session that reports `task done` without any commit sends "
                               "the task to review (true) or fails it (false).") = False
    poll: _d(float, "Seconds between looks for ready tasks when running without --once.",
             gt=0) = 5
    expired_wait: _d(float, "Seconds a witness waits for the log of another clone's session "
                            "whose lease expired (its witness died), counted from that expiry "
                            "and from the lock remote answering again, before running the "
                            "task once more: that clone may yet publish what it did.",
                     ge=0) = 60
    sandbox: Annotated[Literal["auto", "bwrap", "none"], Meta(
        description="Where sessions (setup, the engine and its children) run: bwrap, a "
                    "bubblewrap sandbox that may write only the session's work tree, its "
                    "branch, the object store, a private tmp and the engine's own state; "
                    "none, unconfined; auto, bwrap when `bwrap` is on PATH.")] = "auto"
    sandbox_network: Annotated[Literal["auto", "outbound", "none", "open"], Meta(
        description="A sandboxed session's (and sandboxed check's) network: outbound, a "
                    "namespace of its own that reaches the internet through pasta but not "
                    "this machine's loopback (save the loopback ports the engine's endpoint "
                    "variables name, e.g. ANTHROPIC_BASE_URL); none, loopback only; open, "
                    "this machine's own network, its loopback services (the board) and X11 "
                    "display included; auto, outbound when pasta is on PATH and the machine "
                    "has a route out, else open.")] = "auto"
    sandbox_hide: _d(list[str], "Paths a sandboxed session cannot read (\"~/\" is HOME), "
                                "besides ~/.ssh and ~/.gnupg, which are always hidden.") = []
    budget_task: _d(str, "Most one task may spend over all its sessions: tokens (\"200k "
                         "tokens\", \"1.5M tokens\") or dollars (\"$2.00\"); a session is "
                         "stopped at it and the task blocked for you; empty: no limit.") = ""
    budget_convoy: _d(str, "Most the tasks of one convoy may spend together, as "
                           "witness.budget_task; empty: no limit.") = ""
    prices: _d(dict[str, list[Annotated[float, Meta(ge=0)]]],
               "USD per million tokens by model or engine name: [input, output] or [input, "
               "output, cache read, cache write]; it prices a session over the engine's own "
               "figure. Without either, a session's cost is unknown.") = {}
    # usage and rate limits (witness/verdict.pause, witness/watchdog.py, engines/ending.py)
    idle_timeout: _d(float, "Seconds an engine that waits quietly on a rate limit (codex, "
                            "opencode, cn, copilot) may show no sign of work before it is "
                            "stopped and its task pauses; 0: never.", ge=0) = 600
    limit_margin: _d(float, "Seconds after a usage limit's reset before it resumes.", ge=0) = 30
    limit_backoff: _d(float, "Seconds a task pauses on a limit of no known reset; doubles on every "
                             "pause in a row.", ge=0) = 300
    limit_backoff_max: _d(float, "Longest pause on a limit of no known reset.", ge=0) = 3600


class Refinery(_Section):
    """The merge queue: integrates finished work onto the target branch."""
    target_branch: _d(str, "Branch that finished tasks are merged into.", min_length=1) = "main"
    merge_policy: Annotated[Literal["rebase", "squash", "merge"], Meta(
        description="How a task branch lands: rebase, squash or merge.")] = "rebase"
    check: _d(str, "Command run with `sh -c` in the merge worktree before the target branch "
                   "moves (e.g. \"make test\"); empty: no check.") = ""
    check_timeout: _d(float, "Seconds the check may run before it counts as failed.", gt=0) = 1800
    push: _d(bool, "Push the target branch after a merge when the remote exists.") = True
    remote: _d(str, "Remote the target branch is pushed to.", min_length=1) = "origin"
    batch: _d(int, "Requests stacked onto the target and checked together; a failing batch "
                   "is bisected to find the request(s) that broke it.", ge=1, le=64) = 1
    on_fail: Annotated[Literal["requeue", "fail"], Meta(
        description="A failed check sends the task back to queued with the check output's "
                    "tail for the agent's next attempt (requeue), or marks it failed (fail).")] \
        = "requeue"
    on_conflict: Annotated[Literal["requeue", "block"], Meta(
        description="A merge conflict sends the task back to queued naming the files, for "
                    "the agent to rebase (requeue), or blocks it for a human (block).")] \
        = "requeue"
    trigger: Annotated[Literal["manual", "hook"], Meta(
        description="manual: only `git brat refinery run` merges; hook: git hooks (after "
                    "pull, rebase, fetch or a push received) start a detached `refinery run "
                    "--once`.")] = "manual"
    max_attempts: _d(int, "Merge attempts of one request (check failures and conflicts "
                          "included) before its task is marked failed.", ge=1, le=100) = 3
    sandbox: Annotated[Literal["auto", "bwrap", "none"], Meta(
        description="Where the check runs: bwrap, a bubblewrap sandbox that reads the "
                    "repository and writes only the check's work tree and a private tmp; "
                    "none, unconfined; auto, bwrap on a hub that runs checks "
                    "(hub.run_checks) when `bwrap` is on PATH, else none.")] = "auto"
    review: Annotated[Literal["human", "auto"], Meta(
        description="What lets a finished task into the merge queue: human, an approval of "
                    "the very commit (`git brat task approve`); auto, the check alone (needs "
                    "refinery.check: without one every task waits for approval).")] = "human"
    aging: _d(float, "Seconds of waiting that raise a request by one priority level, so no "
                     "request waits forever behind newer urgent ones; 0 turns aging off.",
              ge=0) = 600


class Deacon(_Section):
    """The janitor: expired leases, orphaned sessions, stale worktrees, sync."""
    interval: _d(float, "Seconds between janitor passes.", gt=0) = 60
    sync_interval: _d(float, "Seconds between syncs with the remote; 0 turns sync off.", ge=0) = 300
    prune_worktrees: _d(bool, "Remove worktrees of ended sessions (their branches are "
                              "always kept).") = True
    log_retention_days: _d(float, "Session logs (.git/brat/sessions/*.log) older than this "
                                  "many days are deleted.", gt=0) = 14


class StatusSettings(_Section):
    """What `git brat status` reports."""
    stuck_after: _d(float, "A running or merging task with no live lease and no change for this "
                           "many seconds is reported as stuck.", gt=0) = 900


class Mayor(_Section):
    """Turns a request into a validated convoy of tasks (`git brat mayor ask`)."""
    engine: _d(str, "Engine the mayor asks: a preset or a name defined under [engines.<name>]; "
                    "empty: the witness's engine.") = ""
    max_tasks: _d(int, "Most tasks one plan may create; a bigger plan is refused whole.",
                  ge=1, le=500) = 20
    timeout: _d(float, "Seconds the engine may take to answer before it is stopped.", gt=0) = 600
    context_files: _d(int, "Most paths from `git ls-files` listed in the mayor's context; a "
                           "bigger tree is summarized as directories with file counts.",
                      ge=0, le=100000) = 300
    excerpt_chars: _d(int, "Characters of README and AGENTS.md given to the mayor, each.",
                      ge=0, le=1000000) = 4000
    history: _d(int, "Earlier exchanges summarized into the prompt when the engine cannot "
                     "resume a conversation by id.", ge=0, le=1000) = 10


class Locks(_Section):
    """Lease locks (task claims): where they are decided. Read by git grite too."""
    remote: _d(str, "Remote whose refs decide every lease, the same for every clone once this "
                    "file is committed; empty: git config grite.lockRemote, else the only "
                    "remote syncing grite state, else origin.") = ""


class Hub(_Section):
    """A bare hub (`git brat init --hub`): read only from the hub's own brat/config.toml."""
    run_checks: _d(bool, "Run refinery.check on pushed branches here: pushers' code then runs "
                         "on the hub's machine. false: with a check configured the hub lands "
                         "nothing and says why.") = False
    land_unchecked: _d(bool, "With no refinery.check, land pushed work unchecked anyway. false: "
                             "such a hub lands nothing and says why (`git brat init --hub` "
                             "takes the project's committed check when there is one).") = False


class Inbox(_Section):
    """Where what waits for you (`git brat inbox`) is sent; the deacon sends each item once."""
    command: _d(list[str], "argv given one JSON event on stdin (never a shell string).") = []
    ntfy: _d(str, "ntfy topic URL each event is POSTed to (https://ntfy.sh/<topic>).") = ""
    webhook: _d(str, "Webhook URL sent Slack-style JSON ({\"text\": ...}).") = ""
    debounce: _d(float, "Seconds an item waits before it is sent (one answered sooner is "
                        "never sent).", ge=0) = 30
    timeout: _d(float, "Seconds one delivery may take.", gt=0, le=60) = 5
    # (boardfast: a new sink and the backlog)
    backlog_grace: _d(float, "A sink this clone sees for the first time is sent only what has "
                             "waited less than this many seconds; what waited longer is a backlog "
                             "it is not sent (`git brat inbox` lists it).", ge=0) = 600


MeterName = Literal.__getitem__(METER_NAMES)


class Engine(_Section):
    """Overrides for one engine preset, or a new engine (then `command` is required)."""
    command: _d(list[str] | None, "argv template, e.g. [\"claude\", \"-p\", \"{prompt}\"]; "
                                  "never a shell string.", min_length=1) = None
    prompt: Annotated[Literal["arg", "stdin", "file"] | None, Meta(
        description="How the prompt reaches the engine: arg, stdin or file.")] = None
    result: Annotated[Literal["exit", "json"] | None, Meta(
        description="How success is read: exit (exit code) or json (JSON on stdout).")] = None
    model: _d(str | None, "Model name passed to the engine.", min_length=1) = None
    extra_args: _d(list[str], "Arguments appended to the preset's argv.") = []
    env: _d(dict[str, str], "Environment variables set for the engine.") = {}
    timeout: _d(float | None, "Session timeout for this engine, in seconds "
                              "(default: witness.timeout).", gt=0) = None
    scratch: _d(list[str] | None, "Globs of files the engine leaves in the work tree that "
                                  "are not work (its caches): never committed for it.") = None
    resume: _d(list[str] | None, "argv template that continues a conversation whose id is "
                                 "{resume_id}; unset: the engine cannot resume.",
               min_length=1) = None
    state: _d(list[str] | None, "Where the engine keeps its own state, writable in a sandbox "
                                "(\"~/x/\" a directory, \"~/x\" a file, \"$VAR|~/x/\" the "
                                "variable's value when set); unset: the preset's.") = None
    # What the engine reads besides its prompt, and where it reports its spending, as the
    # presets say it (engines/presets.py); each unset: the preset's.
    instructions: _d(str | None, "File in the work tree the engine loads its instructions "
                                 "from: the witness writes the project's instructions there, "
                                 "untracked (never over a tracked file).", min_length=1,
                     max_length=255) = None
    skills: _d(str | None, "Folder in the work tree the engine finds skills in "
                           "(<folder>/<name>/SKILL.md): the witness writes the project's skills "
                           "there, untracked.", min_length=1, max_length=255) = None
    meter: Annotated[MeterName | None, Meta(
        description="Where its tokens and cost are read from, as a preset reads them: "
                    + ", ".join(METER_NAMES) + ".")] = None


def tree_path_problem(path: str) -> str:
    """Why a path an engine setting names is not a plain path inside the work tree ("": it is)."""
    parts = path.rstrip("/").split("/")
    if path.startswith(("/", "~")):
        return "expected a path inside the work tree, not an absolute one"
    if any(p in ("", ".", "..") for p in parts):
        return "expected a path inside the work tree (no '.' or '..' part, no '//')"
    if any(p.lower() == ".git" for p in parts) or parts[0] == ".brat":
        return "expected a path inside the work tree, not in .git or .brat (git-brat's own)"
    if any(not c.isprintable() or c == "\\" for c in path):
        return "expected a path of printable characters, '/' between its parts"
    return ""


class Config(_Section):
    witness: Witness = msgspec.field(default_factory=Witness)
    refinery: Refinery = msgspec.field(default_factory=Refinery)
    deacon: Deacon = msgspec.field(default_factory=Deacon)
    status: StatusSettings = msgspec.field(default_factory=StatusSettings)
    mayor: Mayor = msgspec.field(default_factory=Mayor)
    locks: Locks = msgspec.field(default_factory=Locks)
    hub: Hub = msgspec.field(default_factory=Hub)
    inbox: Inbox = msgspec.field(default_factory=Inbox)
    engines: dict[str, Engine] = {}


SECTIONS = {"witness": Witness, "refinery": Refinery, "deacon": Deacon, "status": StatusSettings,
            "mayor": Mayor, "locks": Locks, "hub": Hub,
            "inbox": Inbox}


# -- describing types ------------------------------------------------------------

def _hints(cls) -> dict[str, Any]:
    return typing.get_type_hints(cls, include_extras=True)


def _field_info(cls, name: str):
    for f in msgspec.inspect.type_info(cls).fields:
        if f.name == name:
            return f
    return None


def _description(cls, name: str) -> str:
    hint = _hints(cls)[name]
    for h in (hint, *typing.get_args(hint)):
        for m in getattr(h, "__metadata__", ()):
            if isinstance(m, Meta) and m.description:
                return m.description
    return ""


def allowed(t) -> str:
    """What values a msgspec type accepts, in words."""
    I = msgspec.inspect
    if isinstance(t, I.Metadata):
        t = t.type
    if isinstance(t, I.UnionType):
        rest = [x for x in t.types if not isinstance(x, I.NoneType)]
        return " or ".join(allowed(x) for x in rest)
    if isinstance(t, I.LiteralType):
        return "one of " + ", ".join(f'"{v}"' for v in t.values)
    if isinstance(t, I.BoolType):
        return "true or false"
    if isinstance(t, (I.IntType, I.FloatType)):
        word = "an integer" if isinstance(t, I.IntType) else "a number"
        if t.ge is not None and t.le is not None:
            return f"{word} from {t.ge} to {t.le}"
        bounds = [f">= {t.ge}" if t.ge is not None else "", f"> {t.gt}" if t.gt is not None else "",
                  f"<= {t.le}" if t.le is not None else ""]
        return " ".join([word, *[b for b in bounds if b]])
    if isinstance(t, I.StrType):
        return "a non-empty string" if t.min_length else "a string"
    if isinstance(t, I.ListType):
        return ("a non-empty list of " if t.min_length else "a list of ") + _plural(t.item_type)
    if isinstance(t, I.DictType):
        return "a table of " + _plural(t.value_type)
    return str(t)


def _plural(t) -> str:
    words = allowed(t)
    return {"a string": "strings", "a non-empty string": "non-empty strings"}.get(words, words)


def show_value(value: Any) -> str:
    import tomlkit
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    try:
        if isinstance(value, dict):
            table = tomlkit.inline_table()
            table.update(value)
            return table.as_string()
        return tomlkit.item(value).as_string()
    except Exception:
        return repr(value)


# -- loading and validating -------------------------------------------------------

def _check_section(data: Any, cls, prefix: str, where: str) -> None:
    """Unknown keys and per-key type errors, each naming the dotted key and what is allowed."""
    if not isinstance(data, dict):
        raise ConfigError(f"{where}: {prefix.rstrip('.')} must be a table ([{prefix.rstrip('.')}])")
    hints = _hints(cls)
    names = [f.name for f in msgspec.inspect.type_info(cls).fields]
    for key, value in data.items():
        full = prefix + key
        if key not in hints:
            scope = f"in [{prefix.rstrip('.')}]" if prefix else "at the top level"
            raise ConfigError(f"{where}: unknown key {full} (allowed {scope}: {', '.join(names)})")
        if key in SECTIONS and cls is Config:
            _check_section(value, SECTIONS[key], full + ".", where)
        elif key == "engines" and cls is Config:
            if not isinstance(value, dict):
                raise ConfigError(f"{where}: engines must be tables ([engines.<name>])")
            for name, sub in value.items():
                check_engine_name(name, where)
                _check_section(sub, Engine, f"engines.{name}.", where)
        else:
            check_value(cls, key, value, full, where)


def check_value(cls, key: str, value: Any, full: str, where: str) -> Any:
    try:
        out = msgspec.convert(value, _hints(cls)[key], strict=True)
        if isinstance(out, float) and not math.isfinite(out):   # inf passes `gt=0`
            raise msgspec.ValidationError("not finite")
        return out
    except msgspec.ValidationError:
        prefix = f"{where}: " if where else ""
        raise ConfigError(f"{prefix}{full} = {show_value(value)} is not allowed: expected "
                          f"{allowed(_field_info(cls, key).type)}") from None


def check_engine_name(name: str, where: str) -> None:
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", name):
        raise ConfigError(f"{where}: engine name {name!r} is not allowed: use letters, digits, "
                          f"'.', '_' and '-'")


def _check_finite(cfg, where: str) -> None:
    """inf and 1e400 satisfy every bound; a timeout of inf would still break a sleep later."""
    sections = [(f.name, getattr(cfg, f.name)) for f in msgspec.structs.fields(cfg)]
    for name, section in sections:
        parts = section.items() if isinstance(section, dict) else [("", section)]
        for sub, struct in parts:
            if not isinstance(struct, msgspec.Struct):
                continue
            for f in msgspec.structs.fields(struct):
                v = getattr(struct, f.name)
                if isinstance(v, float) and not math.isfinite(v):
                    key = ".".join(x for x in (name, sub, f.name) if x)
                    raise ConfigError(f"{where}: {key} = {v} is not allowed: expected a finite number")


def validate(data: dict, where: str = CONFIG_PATH) -> Config:
    try:   # every command reads the file: msgspec checks it at once; the words only on failure
        cfg = msgspec.convert(data, Config, strict=True)
    except msgspec.ValidationError as exc:
        _check_section(data, Config, "", where)
        raise ConfigError(f"{where}: {exc}") from None   # what the key-by-key check missed
    for name in cfg.engines:
        check_engine_name(name, where)
    _check_finite(cfg, where)
    w = cfg.witness
    if w.heartbeat >= w.lease_ttl:
        raise ConfigError(f"{where}: witness.heartbeat ({show_value(w.heartbeat)}) must be less than "
                          f"witness.lease_ttl ({show_value(w.lease_ttl)}), or leases expire while "
                          f"sessions are alive")
    if problem := spending_problem(w.budget_task, w.budget_convoy, w.prices):
        raise ConfigError(f"{where}: {problem}")
    if w.backoff_max < w.backoff:
        raise ConfigError(f"{where}: witness.backoff_max ({show_value(w.backoff_max)}) must not be "
                          f"less than witness.backoff ({show_value(w.backoff)})")
    for name, eng in cfg.engines.items():
        for key in ("instructions", "skills"):
            value = getattr(eng, key)
            if value is not None and (why := tree_path_problem(value)):
                raise ConfigError(f"{where}: engines.{name}.{key} = {show_value(value)} is not "
                                  f"allowed: {why}")
        if name not in ENGINE_PRESETS and eng.command is None:
            raise ConfigError(f"{where}: engines.{name} is not a preset ({', '.join(ENGINE_PRESETS)}),"
                              f" so engines.{name}.command is required")
    known = sorted(set(ENGINE_PRESETS) | set(cfg.engines))
    for key, name, empty in (("witness.engine", w.engine, ""),
                             ("mayor.engine", cfg.mayor.engine, ", or empty for the witness's engine")):
        if (name or key == "witness.engine") and name not in known:
            raise ConfigError(f"{where}: {key} = {show_value(name)} is not allowed: expected one "
                              f"of {', '.join(known)}{empty} (or define [engines.{name}])")
    if w.engine == "shell" and (cfg.engines.get("shell") is None or cfg.engines["shell"].command is None):
        raise ConfigError(f"{where}: witness.engine = \"shell\" needs engines.shell.command "
                          f"(the argv to run)")
    branch = cfg.refinery.target_branch
    if not valid_branch(branch):
        raise ConfigError(f"{where}: refinery.target_branch = {show_value(branch)} is not allowed: "
                          f"expected a valid branch name")
    return cfg


def parse_data(text: str, where: str = CONFIG_PATH) -> dict:
    import tomllib
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{where}: not valid TOML: {exc}") from None


def parse(text: str, where: str = CONFIG_PATH) -> Config:
    return validate(parse_data(text, where), where)


def read_text(path: str | None, where: str = CONFIG_PATH) -> str | None:
    """A config file's text; None when there is none."""
    if path is None:
        return None
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except (FileNotFoundError, NotADirectoryError):
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{where}: cannot read: {exc}") from None


def path_in(toplevel: str | None) -> str | None:
    return os.path.join(toplevel, CONFIG_PATH) if toplevel else None


def load(toplevel: str | None) -> Config:
    """The config of the checkout at toplevel; defaults when it has none (or is bare)."""
    text = read_text(path_in(toplevel))
    return Config() if text is None else parse(text)


# -- get / set --------------------------------------------------------------------

def _locate(key: str) -> tuple[type, str, list[str]]:
    """(struct class, field name, path) for a dotted leaf key; errors list what exists."""
    parts = key.split(".")
    if parts[0] in SECTIONS:
        cls = SECTIONS[parts[0]]
        names = [f.name for f in msgspec.inspect.type_info(cls).fields]
        if len(parts) == 2 and parts[1] in names:
            return cls, parts[1], parts
        if len(parts) == 1:
            raise UsageError(f"{key} is a section; give one of its keys: "
                             + ", ".join(f"{key}.{n}" for n in names))
        raise NotFound(f"unknown config key {key} (keys in [{parts[0]}]: {', '.join(names)})")
    if parts[0] == "engines":
        names = [f.name for f in msgspec.inspect.type_info(Engine).fields]
        if len(parts) == 3 and parts[2] in names:
            check_engine_name(parts[1], key)
            return Engine, parts[2], parts
        raise NotFound(f"unknown config key {key} (engine keys are engines.<name>.KEY with KEY "
                       f"one of: {', '.join(names)})")
    raise NotFound(f"unknown config key {key} (sections: {', '.join([*SECTIONS, 'engines'])})")


def get(cfg: Config, key: str) -> Any:
    """The effective value of a dotted key, or a whole section as a dict."""
    parts = key.split(".")
    if len(parts) == 1 and parts[0] in SECTIONS:
        return msgspec.to_builtins(getattr(cfg, parts[0]))
    if key == "engines":
        return msgspec.to_builtins(cfg.engines)
    cls, name, parts = _locate(key)
    if cls is Engine:
        eng = cfg.engines.get(parts[1])
        return getattr(eng if eng is not None else Engine(), name)
    return getattr(getattr(cfg, parts[0]), name)


def parse_value(key: str, raw: str) -> Any:
    """A command-line VALUE typed for KEY: strings as given, everything else as a TOML value."""
    import tomllib
    cls, name, _parts = _locate(key)
    t = _field_info(cls, name).type
    I = msgspec.inspect
    inner = t.type if isinstance(t, I.Metadata) else t
    kinds = inner.types if isinstance(inner, I.UnionType) else (inner,)
    kinds = [k.type if isinstance(k, I.Metadata) else k for k in kinds]
    if any(isinstance(k, I.StrType) or (isinstance(k, I.LiteralType)
                                        and all(isinstance(v, str) for v in k.values))
           for k in kinds):
        return raw
    try:
        value = tomllib.loads(f"v = {raw}")["v"]
    except tomllib.TOMLDecodeError:
        raise ConfigError(f"{key} = {raw} is not allowed: expected {allowed(t)}") from None
    return check_value(cls, name, value, key, "")


def set_text(text: str, key: str, raw: str, whole: bool = True) -> tuple[str, Any]:
    """The config text with KEY set to VALUE (comments kept), validated as a whole (whole:
    else the caller validates it with what it overrides)."""
    import tomlkit
    value = parse_value(key, raw)
    if whole:
        parse(text)   # refuse to edit a file that is already invalid: fix it first
    doc = tomlkit.parse(text)
    parts = key.split(".")
    table = doc
    for i, part in enumerate(parts[:-1]):
        if part not in table:
            table[part] = tomlkit.table(is_super_table=(i == 0 and parts[0] == "engines"))
        table = table[part]
    if isinstance(value, dict):   # keep a dict on its key's line: {A = "1"}
        inline = tomlkit.inline_table()
        inline.update(value)
        value = inline
    table[parts[-1]] = value
    new = tomlkit.dumps(doc)
    if whole:
        parse(new)
    return new, value


__all__ = ["Config", "ConfigError", "load", "parse", "validate", "get",
           "set_text", "path_in", "CONFIG_PATH", "ENGINE_PRESETS"]
