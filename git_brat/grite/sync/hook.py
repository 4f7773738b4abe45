"""What the hook shims run inside git: import after a fetch or merge, publish before a push.

The parent git's command line (read from /proc, else ps) tells a fetch given refspecs and a
dry-run push apart.
"""

from __future__ import annotations

import os

from git_brat.process import command_line
from git_brat.grite.log import identity
from git_brat.errors import GriteError, UsageError
from git_brat.git.store import Store
from git_brat.grite.log.refs import is_log_ref
from git_brat.grite.log.refs import (SKIP_HOOKS_ENV, grite_dir, is_synced, log_tips, net_timeout, refspec, synced_remotes, transport_env)
from git_brat.grite.repo import Grite
from git_brat.grite.sync.imports import import_logs
from git_brat.grite.sync.publish import publish


def run_hook(name: str, args: list[str], stdin: bytes) -> str | None:
    """What the shims run (after the user's own hook): returns a warning worth one line, if any.

    Raises GriteError; the CLI turns it into one warning line and exit 0.
    """
    if os.environ.get(SKIP_HOOKS_ENV):
        return None
    store = Store.discover()
    if not identity.is_initialized(grite_dir(store)):
        return None
    g = Grite(store)
    if name in ("reference-transaction", "post-merge", "post-rewrite"):
        hint = []
        if name == "reference-transaction":
            for line in stdin.decode("utf-8", "replace").splitlines():
                parts = line.split()
                if len(parts) == 3:
                    hint.append((parts[2], parts[0]))
            if hint and not any(is_log_ref(r) for r, _old in hint):
                return _after_named_fetch(g, [r for r, _old in hint])
        imported = import_logs(g, hint=hint, warm_list=name != "reference-transaction",
                               cap=True)
        found = imported.warnings()
        if found:
            return "; ".join(found)
    elif name == "pre-push":
        if len(args) < 2:
            raise UsageError("pre-push hook needs REMOTE and URL")
        remote, url = args[0], args[1]
        if remote == url or not is_synced(store, remote):
            return None   # a push to a bare URL, or a remote not set up for grite
        if _push_is_dry_run(os.environ.get("GRITE_PUSH_PID", "")):
            return None
        pub = publish(g, remote, dest=url)
        if pub.status == "failed":
            raise GriteError(f"could not publish {pub.ref} to {remote}: {pub.error} "
                             f"(your push is not affected; `git grite sync` fetches and "
                             f"says why)")
        if pub.relay_error:
            return f"{remote} refused relayed logs: {pub.relay_error}"
    else:
        raise UsageError(f"unknown hook {name!r}")
    return None


def _after_named_fetch(g: Grite, moved: list[str]) -> str | None:
    """A fetch moved remote-tracking branches and no grite ref: if it was given refspecs
    (`git fetch origin main`, `git pull origin main`), it skipped grite's; fetch them from the
    same remote now, so the state after it is that remote's."""
    store = g.store
    argv = command_line(os.environ.get("GRITE_FETCH_PID", ""))
    if argv is not None and not _fetch_has_refspecs(argv):
        return None   # a plain fetch: grite refs came with it and did not change
    remotes = sorted((r for r in synced_remotes(store)), key=len, reverse=True)
    hit = next((r for ref in moved for r in remotes if ref.startswith(f"refs/remotes/{r}/")), None)
    if hit is None:
        return None
    before = log_tips(store)
    proc = store.remote.fetch(hit, [refspec(hit)], transport_env(), net_timeout())
    if not proc.ok:
        raise GriteError(f"could not fetch grite state from {hit}: {proc.error_line()} "
                         f"(`git grite sync {hit}` retries)")
    found = import_logs(g, before=before, cap=True).warnings()
    return "; ".join(found) if found else None


# Options of `git fetch` that take their value as the next argument.
_FETCH_VALUE_OPTS = {"--depth", "--deepen", "--shallow-since", "--shallow-exclude", "-j", "--jobs",
                     "--upload-pack", "-o", "--server-option", "--negotiation-tip", "--refmap",
                     "--filter", "--recurse-submodules-default", "--submodule-prefix"}


def _fetch_has_refspecs(argv: list[str]) -> bool:
    """Whether a `git fetch` command line names refspecs after its remote."""
    if "fetch" not in argv:
        return False
    args = argv[argv.index("fetch") + 1:]
    positional, skip = [], False
    for i, arg in enumerate(args):
        if skip:
            skip = False
        elif arg == "--":
            positional += args[i + 1:]
            break
        elif arg in ("--all", "--multiple", "--stdin"):
            return arg == "--stdin"
        elif arg in _FETCH_VALUE_OPTS:
            skip = True
        elif not arg.startswith("-") or arg == "-":
            positional.append(arg)
    return len(positional) >= 2


def _push_is_dry_run(pid: str) -> bool:
    """Whether the `git push` that ran the pre-push hook (process pid) has --dry-run / -n."""
    argv = command_line(pid) or []
    if "push" not in argv:
        return False
    for arg in argv[argv.index("push") + 1:]:
        if arg == "--":
            break
        if arg == "--dry-run" or (arg[:1] == "-" and arg[1:2] != "-" and "n" in arg
                                  and set(arg[1:]) <= set("vqnfud46")):
            return True
    return False
