"""What configuration takes effect: approval of the committed config's code-running settings, local overrides, the hub's own file."""

from __future__ import annotations

import copy
import json
import os
import time
from typing import Any

import msgspec

from git_brat.approvals import fingerprint
from git_brat import approvals
from git_brat.brat import config, config_text, layout
from git_brat.brat.target_branch import target_branch_problem, valid_branch
from git_brat.errors import GriteError, UsageError
from git_brat.files import atomic_write
from git_brat.git.store import Store

# Settings that run code on this machine or choose what runs: from the committed file (which
# any pusher can change) they take effect only with values this user approved. The committed
# refinery.trigger never takes effect at all: hooks start the refinery only on a local setting.
# The sandbox settings too: a pusher must not be able to take every clone's sandbox away, nor
# the review gate (refinery.review = "auto" lands agents' work unread).
GUARDED = ("witness.engine", "witness.setup", "refinery.check", "mayor.engine", "locks.remote",
           "engines", "hub", "witness.sandbox", "witness.sandbox_network",
           "witness.sandbox_hide", "refinery.sandbox", "refinery.review",
           "inbox.command", "inbox.ntfy", "inbox.webhook")
# (inbox.*: a committed sink would run a pusher's command, or send what waits for you to a
# pusher's URL.)
# Whether git hooks start the refinery: this clone's git config, never a committed file.
HOOK_TRIGGER = "brat.hookTrigger"
EXIT_UNAPPROVED = 7   # documented in docs/reference.md


class Unapproved(GriteError):
    """A command would run settings of the committed config that the user has not approved."""
    exit_code = EXIT_UNAPPROVED


class Change(msgspec.Struct):
    key: str
    approved: Any      # the value this user approved (or the default)
    committed: Any     # the value in the committed file now


class EngineFile(msgspec.Struct):
    """A file of the repository an engine reads as its own settings, which can run code."""
    path: str
    blob: str                   # its content's object id (a symlink: the link's text)
    engines: list[str]          # the shipped engines that read it
    status: str                 # new | changed | approved


class Approval(msgspec.Struct):
    approved: bool
    file: str                   # the file the settings come from
    changes: list[Change] = []  # guarded keys whose committed value is not the approved one
    engine_files: list[EngineFile] = []   # every engine settings file of the tree, by status
    commit: str = ""            # the last commit that changed the file
    author: str = ""
    subject: str = ""
    edited: bool = False        # the file differs from its last commit
    fingerprint: str = ""       # of the committed file's guarded values
    approved_fingerprint: str = ""
    approved_at: str = ""


class Loaded(msgspec.Struct):
    config: Any                 # the effective config.Config
    approval: Approval
    committed: Any = None       # the committed file as written (config.Config), None on a hub
    local: list[str] = []       # keys set by this clone's own settings
    hub: bool = False


# -- the values -------------------------------------------------------------------------

def _drop_none(v):
    if isinstance(v, dict):
        return {k: _drop_none(x) for k, x in v.items() if x is not None}
    return v


def guarded(cfg: config.Config) -> dict[str, Any]:
    """The code-running settings of cfg, key -> value (sections as tables)."""
    out = {}
    for key in GUARDED:
        section, _, name = key.partition(".")
        value = getattr(cfg, section)
        out[key] = getattr(value, name) if name else _drop_none(msgspec.to_builtins(value))
    return out


DEFAULTS = guarded(config.Config())


# -- the engines' own settings in the repository ----------------------------------------------

def engine_settings(store: Store, commits: list[str]) -> dict[str, set[str]]:
    """path -> the object ids it has in these commits' trees, of every file an engine reads
    from the repository as settings that can run code (.claude/, .gemini/, .mcp.json ...).

    Read from the trees the engines get (the checkout's HEAD, the commit sessions start
    from), never from the work tree: a pushed file is whoever pushed it."""
    from git_brat.brat.engines import presets
    everything = [e for p in presets.PRESETS.values() for e in p.settings]
    out: dict[str, set[str]] = {}
    for commit in dict.fromkeys(c for c in commits if c):
        tops = [n for n in store.objects.top_level(commit) if presets.settings_top(n)]
        for _mode, blob, path in store.objects.tree_files(commit, tops):
            if presets.is_settings(path, everything):
                out.setdefault(path, set()).add(blob)
    return out


def _file_views(now: dict[str, set[str]], approved: dict[str, list[str]]) -> list[EngineFile]:
    from git_brat.brat.engines import presets
    out = []
    for path in sorted(now):
        for blob in sorted(now[path]):
            ok = approved.get(path, [])
            status = "approved" if blob in ok else "changed" if ok else "new"
            out.append(EngineFile(path, blob, presets.settings_engines(path), status))
    return out


def unapproved_files(store: Store, commit: str) -> list[EngineFile]:
    """The engine settings files of a commit's tree this user has not approved as they are."""
    views = _file_views(engine_settings(store, [commit]), approvals.approved_files(_record(store)))
    return [f for f in views if f.status != "approved"]


def settings_commits(store: Store, cfg: config.Config) -> list[str]:
    """The trees whose engine settings an engine here would read: the checkout's HEAD, and
    the target branch the witness's sessions start from."""
    target = store.refs.branch_tip(cfg.refinery.target_branch) if \
        valid_branch(cfg.refinery.target_branch) else None
    return [c for c in (store.objects.main_head(), target) if c]


def _record(store: Store) -> dict:
    return approvals.record(layout.trust(store))


def approved_values(store: Store) -> dict[str, Any]:
    """What this user approved, key by key; the defaults (which run nothing) for the rest. A
    guarded section approved before it gained a key has that key's default: an upgrade that
    adds a setting does not unapprove every clone's file."""
    values = _record(store).get("values", {})
    out = {k: values.get(k, DEFAULTS[k]) for k in GUARDED}
    for k, default in DEFAULTS.items():
        if "." not in k and k != "engines" and isinstance(default, dict) and \
                isinstance(out[k], dict):
            out[k] = {**default, **out[k]}
    return out


# -- loading ------------------------------------------------------------------------------

def _set(data: dict, key: str, value: Any) -> None:
    section, _, name = key.partition(".")
    if not name:
        data[section] = copy.deepcopy(value)
        return
    table = data.setdefault(section, {})
    if isinstance(table, dict):
        table[name] = value


def _merge(base: dict, over: dict) -> dict:
    out = dict(base)
    for k, v in over.items():
        out[k] = _merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def _keys(data: dict, prefix: str = "") -> list[str]:
    out = []
    for k, v in data.items():
        if isinstance(v, dict) and not prefix and k != "engines":
            out += _keys(v, k + ".")
        else:
            out.append(prefix + k)
    return out


def _hook_trigger(store: Store, default: bool = False) -> bool:
    try:
        return store.config_bool(HOOK_TRIGGER, default)
    except GriteError as exc:
        raise UsageError(f"{exc.message}; `git config {HOOK_TRIGGER} true` lets this clone's "
                         f"hooks start the refinery") from None


def _default_target(store: Store, cfg: config.Config, data: dict) -> None:
    """With no target named, work lands on the repository's default branch."""
    if "target_branch" not in data.get("refinery", {}):
        cfg.refinery.target_branch = next(b for b in store.default_branch_candidates()
                                          if valid_branch(b))


def config_file(store: Store) -> str | None:
    """The file the settings come from: the hub's own brat/config.toml in a bare repository,
    else .brat/config.toml of the repository's own work tree (never a session's)."""
    if store.bare:
        return layout.hub_config(store)
    return config.path_in(store.main_toplevel())


def load(store: Store) -> Loaded:
    """The effective config: committed values, the approved ones for the guarded keys,
    this clone's local settings over both."""
    path = config_file(store)
    if store.bare:
        text = config.read_text(path, path)
        data = config.parse_data(text, path) if text is not None else {}
        cfg = config.validate(data, path)
        _default_target(store, cfg, data)
        # The hub's git config decides when set; else the hub's own file (which no push reaches).
        hook = _hook_trigger(store, cfg.refinery.trigger == "hook")
        cfg.refinery.trigger = "hook" if hook else "manual"
        return Loaded(cfg, Approval(True, path or ""), None, [], True)
    text = config.read_text(path)
    data = config.parse_data(text) if text is not None else {}
    committed = config.validate(data)
    local_path = layout.local_config(store)
    local_text = config.read_text(local_path, local_path)
    local = config.parse_data(local_text, local_path) if local_text is not None else {}
    if local:
        config._check_section(local, config.Config, "", local_path)
    local_keys = _keys(local)
    now, approved = guarded(committed), approved_values(store)
    changes = [Change(k, approved[k], now[k]) for k in GUARDED
               if now[k] != approved[k] and not any(lk == k or lk.startswith(k + ".")
                                                    for lk in local_keys)]
    effective = copy.deepcopy(data)
    for c in changes:
        _set(effective, c.key, c.approved)
    where = config.CONFIG_PATH + (f" with {local_path}" if local else "")
    cfg = config.validate(_merge(effective, local), where)
    _default_target(store, cfg, _merge(data, local))
    # Hooks read git config without Python: the one local switch, for both.
    cfg.refinery.trigger = "hook" if _hook_trigger(store) else "manual"
    record = _record(store)
    files = _file_views(engine_settings(store, settings_commits(store, cfg)),
                        approvals.approved_files(record))
    waiting = [f for f in files if f.status != "approved"]
    approval = Approval(not changes and not waiting, path or config.CONFIG_PATH, changes, files,
                        fingerprint=fingerprint(now, files_map(files)),
                        approved_fingerprint=record.get("fingerprint", ""),
                        approved_at=record.get("approved_at", ""))
    if changes and path:
        top = os.path.dirname(os.path.dirname(path))
        last = store.last_change(top, config.CONFIG_PATH)
        if last:
            approval.commit, approval.author, approval.subject, approval.edited = last
    return Loaded(cfg, approval, committed, local_keys)


# -- approving -----------------------------------------------------------------------------

def in_session(store: Store) -> bool:
    """Whether this runs in an agent's session (its work tree or its environment): agents are
    untrusted, and nothing they run may approve what runs on this machine."""
    if os.environ.get("BRAT_SESSION"):
        return True
    here = os.path.realpath(store.toplevel() or "")
    trees = os.path.realpath(layout.worktrees(store))
    return bool(store.toplevel()) and (here == trees or here.startswith(trees + os.sep))


def files_map(files: list[EngineFile]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for f in files:
        out.setdefault(f.path, []).append(f.blob)
    return {k: sorted(v) for k, v in out.items()}


def approve(store: Store, committed: config.Config, by: str,
            files: list[EngineFile] | None = None) -> str:
    """Record the committed file's guarded values, and the engine settings files as they are
    (None: those approved before), as approved by this user; their fingerprint."""
    refuse_in_session(store)
    values = guarded(committed)
    approved = files_map(files) if files is not None else approvals.approved_files(_record(store))
    fp = fingerprint(values, approved)
    layout.ensure_root(store)
    record = {"version": 1, "fingerprint": fp, "values": values, "files": approved, "by": by,
              "approved_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    atomic_write(layout.trust(store), (json.dumps(record, indent=1, sort_keys=True) + "\n").encode())
    return fp


def revoke(store: Store) -> bool:
    try:
        os.unlink(layout.trust(store))
        return True
    except FileNotFoundError:
        return False


# -- changing settings -----------------------------------------------------------------------

class SetResult(msgspec.Struct):
    value: Any
    file: str
    approved: bool = True


def refuse_in_session(store: Store) -> None:
    if in_session(store):
        raise UsageError("an agent's session cannot change what runs on this machine: change "
                         "the config yourself, in the repository's own work tree")


def set_committed(store: Store, key: str, raw: str) -> SetResult:
    """KEY = VALUE in the repository's .brat/config.toml. A file approved before stays
    approved: the value is the user's own."""
    refuse_in_session(store)
    top = store.main_toplevel()
    if not top:
        raise UsageError("this repository has no work tree, so it has no .brat/config.toml")
    path = config.path_in(top)
    before = load(store).approval.approved
    text = config.read_text(path)
    new, value = config.set_text(text if text is not None else config_text.text_for(store), key, raw)
    _refuse_missing_target(store, key, value)
    atomic_write(path, new.encode())
    if before:
        approve(store, config.parse(new), "git brat config set")
    return SetResult(value, path, load(store).approval.approved)


def _refuse_missing_target(store: Store, key: str, value) -> None:
    """A target branch that exists nowhere would fail every agent's work: refused when set."""
    if key != "refinery.target_branch":
        return
    problem = target_branch_problem(store, value)
    if problem:
        raise UsageError(f"refused: refinery.target_branch = {config.show_value(value)}: "
                         f"{problem}; name a branch that exists, or create it first")


def set_local(store: Store, key: str, raw: str) -> SetResult:
    """KEY = VALUE for this clone only: git config for refinery.trigger (the hooks read it
    without Python), .git/brat/config.local.toml for the rest. No approval: never synced."""
    refuse_in_session(store)
    if key == "refinery.trigger":
        value = config.parse_value(key, raw)
        config.check_value(config.Refinery, "trigger", value, key, "")
        store.config_set(HOOK_TRIGGER, "true" if value == "hook" else "false")
        return SetResult(value, f"git config {HOOK_TRIGGER}")
    path = layout.local_config(store)
    text = config.read_text(path, path) or ""
    new, value = config.set_text(text, key, raw, whole=False)
    _refuse_missing_target(store, key, value)
    top = store.main_toplevel()
    committed = config.read_text(config.path_in(top)) if top else None
    base = config.parse_data(committed) if committed is not None else {}
    config.validate(_merge(base, config.parse_data(new, path)),
                    f"{config.CONFIG_PATH} with {path}")
    layout.ensure_root(store)
    atomic_write(path, new.encode())
    return SetResult(value, path)


# -- saying it -----------------------------------------------------------------------------

def _short(value: Any) -> str:
    from git_brat.clikit import printable
    text = config.show_value(value)
    return printable(text if len(text) <= 60 else text[:57] + "...")


def origin(a: Approval) -> str:
    """Where the unapproved change comes from, in words (commit, author, subject)."""
    from git_brat.clikit import printable
    if a.commit:
        text = f"commit {a.commit} by {a.author}: {a.subject[:60]}"
        if a.edited:
            text += "; edited since"
        return printable(text)
    return "not committed: edited in the work tree" if a.edited else "no commit"


def files_summary(files: list[EngineFile]) -> str:
    from git_brat.clikit import printable
    waiting = [f for f in files if f.status != "approved"]
    shown = ", ".join(printable(f"{f.path} ({f.status})") for f in waiting[:5])
    more = f" and {len(waiting) - 5} more" if len(waiting) > 5 else ""
    return (f"engine settings that can run commands {shown}{more} (read by "
            f"{', '.join(sorted({e for f in waiting for e in f.engines}))}), not approved here")


def summary(a: Approval) -> str:
    parts = []
    if a.changes:
        keys = ", ".join(f"{c.key} = {_short(c.committed)}" for c in a.changes)
        parts.append(f"{config.CONFIG_PATH} sets {keys} ({origin(a)}), not approved here")
    if any(f.status != "approved" for f in a.engine_files):
        parts.append(files_summary(a.engine_files))
    return "; ".join(parts)


def require(loaded: Loaded, action: str) -> None:
    """Refuse (exit 7) to run anything while the committed config has unapproved settings."""
    if not loaded.approval.approved:
        raise Unapproved(f"{summary(loaded.approval)}: {action} refused; review it with "
                         f"`git brat trust`")


def notice(loaded: Loaded) -> str | None:
    """The warning a read-only command prints while the config is unapproved."""
    a = loaded.approval
    if a.approved:
        return None
    parts = []
    if a.changes:
        parts.append(f"{summary(msgspec.structs.replace(a, engine_files=[]))}: the approved "
                     f"values apply until you run `git brat trust`")
    if any(f.status != "approved" for f in a.engine_files):
        parts.append(f"{files_summary(a.engine_files)}: no engine runs here until you "
                     f"approve them with `git brat trust`")
    return "; ".join(parts)


def hook_hint(loaded: Loaded) -> str | None:
    """A committed refinery.trigger = "hook" no longer starts anything: say how to opt in."""
    committed = loaded.committed
    if committed is None or committed.refinery.trigger != "hook" or \
            loaded.config.refinery.trigger == "hook":
        return None
    return (f"{config.CONFIG_PATH} sets refinery.trigger = \"hook\", which only a local setting "
            f"turns on: `git brat config set refinery.trigger hook --local`")


__all__ = ["EngineFile", "engine_settings", "unapproved_files", "settings_commits",
           "files_map", "files_summary", "GUARDED", "HOOK_TRIGGER", "EXIT_UNAPPROVED", "Unapproved", "Change", "Approval",
           "Loaded", "guarded", "fingerprint", "approved_values", "config_file", "load",
           "in_session", "approve", "revoke", "SetResult", "refuse_in_session", "set_committed", "set_local", "origin", "summary", "require", "notice",
           "hook_hint"]
