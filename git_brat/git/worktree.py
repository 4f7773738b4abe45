"""Work trees: the one API the witness, the refinery and the deacon use to make, read and clean them.

`where` is a directory git is run in to reach the repository (its git dir, common dir or a
work tree of it); `path` is a work tree. Commands run without the caller's GIT_DIR & co, so a
role started from a hook never writes to the wrong repository, and, unless said otherwise,
with no hook at all: these trees are the roles' own, and nothing may wait on a person.
"""

from __future__ import annotations

import os

from git_brat.errors import GriteError
from git_brat.files import FileLock
from git_brat.git import quarantine
from git_brat.git import run as git

TIMEOUT = 600.0   # seconds any one work-tree command may take


def _git(cwd: str, args: list[str], *, check: bool = False, hooks: bool = False,
         env: dict | None = None, timeout: float | None = TIMEOUT) -> git.Result:
    base = git.environment("checkout" if hooks else "worktree", env)
    # A role's tree holds what agents wrote (nested repositories with configs of their own):
    # nothing in it may start a program, nor may a git started inside it.
    return git.run(git.argv(args, hooks=hooks, tree=not hooks), cwd=cwd, env=base,
                   timeout=timeout, check=check)


def _one_at_a_time(where: str) -> FileLock:
    """The repository's lock on adding, removing and pruning work trees.

    git does not serialize these: a `git worktree add` reads every registration under
    .git/worktrees/, and one another `add` is still writing fails it ("failed to read
    …/commondir"), which ended a session before its agent started when a witness started two
    at once. The lock lives in the common directory, where git reads no file of that name."""
    common = where
    if not os.path.isfile(os.path.join(where, "HEAD")):
        res = _git(where, ["rev-parse", "--path-format=absolute", "--git-common-dir"],
                   check=True)
        common = res.out.strip()
    return FileLock(os.path.join(common, "brat-worktrees.lock"), TIMEOUT)


def add(where: str, path: str, *, branch: str | None = None, start: str | None = None,
        hooks: bool = False) -> None:
    """A linked work tree at path: on `branch` (made from `start` when given, else the branch
    that exists), or detached at the commit `start` (forced over a stale registration).

    hooks: run the user's hooks as `git worktree add` by hand would (an agent's work tree is
    the user's to prepare); the detached trees of the roles run none."""
    with _one_at_a_time(where):
        if branch is None:
            _git(where, ["worktree", "prune"])
            _git(where, ["worktree", "add", "--detach", "--force", "--end-of-options", path,
                         start], check=True)
            return
        args = ["-b", branch, "--end-of-options", path, start] if start else \
            ["--end-of-options", path, branch]
        _git(where, ["worktree", "add", "--quiet", *args], check=True, hooks=hooks)


def remove(where: str, path: str) -> bool:
    """Remove a linked work tree, forced (its work is committed or not wanted); the branch stays."""
    with _one_at_a_time(where):
        res = _git(where, ["worktree", "remove", "--force", "--force", "--end-of-options", path])
        _git(where, ["worktree", "prune"])
    return res.ok


def prune(where: str) -> None:
    """Forget work trees whose directory is gone."""
    with _one_at_a_time(where):
        _git(where, ["worktree", "prune"])


def listing(where: str) -> list[dict[str, str]]:
    """`git worktree list --porcelain`: [{"worktree": path, "HEAD": sha, "branch": ref}, ...]
    ("branch" absent when detached; "bare", "detached", "locked" as git says)."""
    res = _git(where, ["worktree", "list", "--porcelain"], check=True)
    out, cur = [], {}
    for line in res.out.splitlines():
        if not line.strip():
            if cur:
                out.append(cur)
            cur = {}
            continue
        key, _, value = line.partition(" ")
        cur[key] = value or "true"
    if cur:
        out.append(cur)
    return out


def branches_containing(where: str, commit: str) -> list[str]:
    """The branches whose history holds commit, as git lists them: full ref names, and
    "(HEAD detached at …)" when a detached HEAD holds it."""
    res = _git(where, ["branch", "--format=%(refname)", "--contains", commit])
    return [ln.strip() for ln in res.out.splitlines() if ln.strip()] if res.ok else []


def head(path: str) -> str:
    """The commit the work tree at path has checked out."""
    return _git(path, ["rev-parse", "HEAD"], check=True).out.strip()


def dirty(common: str, path: str, base: str) -> bool:
    """Whether the files of the work tree at path differ from commit base (ignored files do not
    count), read with the witness's own git dir and config (quarantine.View): nothing the tree
    or its git dir holds is run or followed. A base that is no commit here counts as dirty."""
    try:
        return quarantine.changed(common, path, base)
    except GriteError:
        return True


def status(top: str, timeout: float | None = TIMEOUT) -> list[str]:
    """`git status --porcelain` lines of the user's checkout, untracked files listed one by one
    (none if git fails or takes longer than timeout)."""
    res = git.run(["status", "--porcelain", "--untracked-files=all"], cwd=top, timeout=timeout)
    return res.out.splitlines() if res.ok else []


def tracked(top: str, paths: list[str] | None = None, timeout: float | None = TIMEOUT) -> list[str]:
    """The files git tracks in the user's checkout at top (of paths, when given)."""
    spec = ["--", *paths] if paths is not None else []
    res = git.run(["ls-files", "-z", *spec], cwd=top, timeout=timeout)
    return [p for p in res.stdout.decode("utf-8", "surrogateescape").split("\0") if p]


def reset(path: str, commit: str) -> None:
    """Detach the work tree at commit, every change and untracked file gone (not ignored ones)."""
    gd = _private_git_dir(path)
    for marker, args in (("MERGE_HEAD", ["merge", "--abort"]),
                         ("rebase-merge", ["rebase", "--abort"]),
                         ("rebase-apply", ["rebase", "--abort"]),
                         ("CHERRY_PICK_HEAD", ["cherry-pick", "--abort"])):
        if gd is None or os.path.exists(os.path.join(gd, marker)):
            _git(path, args)   # left over from a killed run
    # (checkout takes no --end-of-options in git 2.39: commit is a sha the caller read)
    _git(path, ["checkout", "-q", "--detach", "-f", commit], check=True)
    _git(path, ["clean", "-q", "-ffd"], check=True)


def restore(path: str) -> None:
    """Put back every tracked file of the work tree at path as its HEAD has it (what was
    deleted or changed and not committed is dropped; untracked files stay)."""
    _git(path, ["reset", "-q", "--hard", "HEAD"], check=True)


def on_branch(path: str) -> str:
    """The branch the work tree at path has checked out ("" when detached or unreadable)."""
    res = _git(path, ["symbolic-ref", "-q", "HEAD"])
    return res.out.strip().removeprefix("refs/heads/") if res.ok else ""


def reflog_heads(path: str) -> list[str]:
    """The commits the work tree at path has had checked out: its HEAD and HEAD's reflog,
    newest first ([] when it is no longer a work tree git can read)."""
    res = _git(path, ["log", "-g", "--format=%H", "HEAD", "--"])
    heads = [ln.strip() for ln in res.out.splitlines() if ln.strip()] if res.ok else []
    top = _git(path, ["rev-parse", "-q", "--verify", "HEAD^{commit}"])
    if top.ok and top.out.strip():
        heads.insert(0, top.out.strip())
    return list(dict.fromkeys(heads))


def unheld_tips(where: str, commits: list[str]) -> list[str]:
    """Of the history of commits, the newest commits no branch (nor a kept ref under
    refs/brat/kept/) holds: the tips of what a work tree's removal would leave reachable from
    nothing, newest first."""
    if not commits:
        return []
    res = _git(where, ["rev-list", "--topo-order", "--parents", *commits, "--not",
                       "--branches", "--glob=refs/brat/kept/*", "--"])
    if not res.ok:
        return []
    rows = [ln.split() for ln in res.out.splitlines() if ln.strip()]
    loose = {row[0] for row in rows}
    parents = {p for row in rows for p in row[1:]}
    return [row[0] for row in rows if row[0] in loose and row[0] not in parents]


def set_ref(where: str, ref: str, new: str, old: str | None = None) -> bool:
    """Point ref at new (only if it still is old, when given: "" means it must not exist)."""
    args = ["update-ref", "-m", "git-brat: keep work", "--end-of-options", ref, new]
    if old is not None:
        args.append(old or "0" * 40)
    return _git(where, args).ok


def point_head(path: str, branch: str) -> None:
    """Point the HEAD of the linked work tree at path at refs/heads/<branch> again (its git dir
    was an agent's to write: whatever it pointed HEAD at, the roles follow the task's branch)."""
    gd = _private_git_dir(path)
    if gd is None or not os.path.isdir(gd):
        return
    head = os.path.join(gd, "HEAD")
    tmp = f"{head}.brat-{os.getpid()}"
    with open(tmp, "w") as f:
        f.write(f"ref: refs/heads/{branch}\n")
    os.replace(tmp, head)


def private_git_dir(path: str) -> str | None:
    """The private git dir of a linked work tree (HEAD, index, logs): what its `.git` file names."""
    return _private_git_dir(path)


def _private_git_dir(path: str) -> str | None:
    """The private git dir of a linked work tree (what its `.git` file points at)."""
    try:
        with open(os.path.join(path, ".git")) as f:
            line = f.read().strip()
    except OSError:
        return None
    if not line.startswith("gitdir: "):
        return None
    return os.path.normpath(os.path.join(path, line[8:]))


# -- files a role adds to a work tree that git must not pick up -----------------------------

MAX_EXCLUDES = 1 << 20   # bytes of the user's own ignore file carried over


def user_excludes(where: str) -> str:
    """The text of the ignore file git reads for the user besides the repository's own
    (core.excludesFile as the repository's config says, else $XDG_CONFIG_HOME/git/ignore):
    whoever replaces that setting for a work tree keeps the user's rules by starting from it."""
    res = _git(where, ["config", "--path", "--get", "core.excludesFile"], timeout=30)
    path = res.out.strip() if res.ok else ""
    if not path:
        config = os.environ.get("XDG_CONFIG_HOME") or os.path.join(
            os.path.expanduser("~"), ".config")
        path = os.path.join(config, "git", "ignore")
    try:
        with open(path, "rb") as f:
            return f.read(MAX_EXCLUDES).decode("utf-8", "replace")
    except OSError:
        return ""


def excludes_env(env: dict[str, str], path: str) -> dict[str, str]:
    """env with core.excludesFile set to `path` for every git started with it (GIT_CONFIG_COUNT,
    after whatever pairs env already holds: a later pair wins)."""
    try:
        n = int(env.get("GIT_CONFIG_COUNT", "0"))
    except ValueError:
        n = 0
    return {**env, "GIT_CONFIG_COUNT": str(n + 1), f"GIT_CONFIG_KEY_{n}": "core.excludesFile",
            f"GIT_CONFIG_VALUE_{n}": path}
