"""Landing a branch in a work tree: rebase, squash or merge, with the committer the caller names."""

from __future__ import annotations

from git_brat.git import run as git
from git_brat.git import worktree

Ident = tuple[str, str]   # (name, email)


def _git(path: str, args: list[str], *, check: bool = False,
         fallback: Ident | None = None) -> git.Result:
    """git in the work tree at path, hooks off and nothing of the tree's run (it holds what
    agents wrote: git.TREE_PINS); fallback: the committer (and author) when git has no
    identity of its own (a hub run by a daemon has no user.name)."""
    env = git.environment("worktree")
    if fallback is not None and not git.run(["var", "GIT_COMMITTER_IDENT"], cwd=path,
                                            env=env).ok:
        name, email = fallback
        env.update({"GIT_COMMITTER_NAME": name, "GIT_COMMITTER_EMAIL": email,
                    "GIT_AUTHOR_NAME": name, "GIT_AUTHOR_EMAIL": email})
    return git.run(git.argv(args, tree=True), cwd=path, env=env, timeout=worktree.TIMEOUT,
                   check=check)


def conflicted_files(path: str) -> list[str]:
    res = _git(path, ["diff", "--name-only", "--diff-filter=U", "-z"])
    return sorted({p for p in res.out.split("\0") if p})


def _conflicts(path: str, res: git.Result) -> list[str]:
    return conflicted_files(path) or ["(unknown: " + res.error_line() + ")"]


def apply_rebase(path: str, head: str, ident: Ident,
                 merge_message: str = "") -> tuple[bool, list[str]]:
    """Replay head's own commits onto the work tree's HEAD: (landed, conflicting files).

    A branch that already holds the work tree's HEAD (its author merged the target into it to
    resolve a conflict) is taken as it is, a fast-forward; one with such merges on an older
    target, whose replay conflicts (a replay drops the resolving merge), is merged instead
    with merge_message, when one is given.
    """
    onto = worktree.head(path)
    base = _git(path, ["merge-base", "--end-of-options", onto, head], check=True).out.strip()
    if base == head:
        return True, []                        # nothing new: already in
    if base == onto:                           # it contains the target: nothing to replay
        _git(path, ["merge", "--ff-only", "-q", "--end-of-options", head], check=True)
        return True, []
    res = _git(path, ["rebase", "-q", "--onto", onto, "--end-of-options", base, head],
               fallback=ident)
    if res.ok:
        return True, []
    files = _conflicts(path, res)
    _git(path, ["rebase", "--abort"])
    _git(path, ["checkout", "--detach", "-f", onto])   # a sha (no --end-of-options in checkout)
    merges = _git(path, ["rev-list", "--min-parents=2", "--count", "--end-of-options",
                         f"{base}..{head}"]).out.strip()
    if merge_message and merges not in ("", "0"):
        return apply_merge(path, head, merge_message, ident)
    return False, files


def apply_squash(path: str, head: str, message: str, ident: Ident) -> tuple[bool, list[str]]:
    """All of head's changes as one commit on the work tree's HEAD: (landed, conflicting files)."""
    onto = worktree.head(path)
    res = _git(path, ["merge", "--squash", "-q", "--end-of-options", head], fallback=ident)
    if not res.ok:
        files = _conflicts(path, res)
        _git(path, ["reset", "-q", "--hard", onto])
        return False, files
    if not _git(path, ["diff", "--cached", "--quiet"]).ok:
        _git(path, ["commit", "-q", "--no-verify", "-m", message], check=True, fallback=ident)
    return True, []


def apply_merge(path: str, head: str, message: str, ident: Ident) -> tuple[bool, list[str]]:
    """head merged into the work tree's HEAD with a merge commit: (landed, conflicting files)."""
    onto = worktree.head(path)
    res = _git(path, ["merge", "-q", "--no-ff", "--no-verify", "-m", message, "--end-of-options",
                      head], fallback=ident)
    if not res.ok:
        files = _conflicts(path, res)
        _git(path, ["merge", "--abort"])
        _git(path, ["reset", "-q", "--hard", onto])
        return False, files
    return True, []


def ff_checkout(path: str, new: str) -> git.Result:
    """Bring a checkout of the target forward exactly as `git merge --ff-only` does (local
    edits carried; refused, changing nothing, if they collide)."""
    return _git(path, ["merge", "--ff-only", "-q", "--end-of-options", new])


def follow_ref_move(path: str, old: str, new: str) -> git.Result:
    """A checkout whose branch was moved from old to new under it (its index and files still
    old's) brought along, as a checkout of new would: refused, changing nothing, when local
    changes are in the way."""
    # (read-tree takes no --end-of-options in git 2.39: old and new are shas the caller read)
    return _git(path, ["read-tree", "-m", "-u", old, new])
