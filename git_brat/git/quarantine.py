"""Git in what an agent wrote: its work tree read, and its private objects taken in, with nothing
there configuring or running anything.

An agent's work tree holds files it chose, a nested repository with a config of its own among
them, and its work tree's git dir (HEAD, index, config.worktree) is its to write as well. So the
witness never runs git *as* that tree: it runs git with a git dir of its own (a throwaway one:
config it wrote, attributes that switch every filter, driver and conversion off, no hook), the
tree only as files to read, a temporary index, and every setting that could start a program
pinned again on the command line (git hands `-c` values to every git it starts, so a nested
repository's git is pinned too). And the objects a sandboxed agent wrote (in an object directory
of its session's own, the shared store a read-only alternate: git's push quarantine) come in
only as git itself re-hashes them (index-pack --strict into a quarantine of ours), whole (a
connectivity walk), before any ref names them.
"""

from __future__ import annotations

import os
import shutil
import tempfile

from git_brat.errors import GriteError
from git_brat.git import run as git

TIMEOUT = 600.0
# (git.TREE_PINS: no fsmonitor, hook, untracked cache, submodule recursion or transport.)
TREE_PINS = git.TREE_PINS
# And where the witness only reads what the tree holds: bytes as they are, nothing converted.
PINS = [
    *TREE_PINS, "-c", "core.splitIndex=false", "-c", "core.attributesFile=/dev/null",
    "-c", "core.autocrlf=false", "-c", "core.safecrlf=false", "-c", "core.symlinks=true",
    "-c", "core.pager=cat", "-c", "gc.auto=0", "-c", "maintenance.auto=false",
]
# Every path: stored as it is (no clean filter, no end-of-line or encoding conversion, no ident),
# and no diff or merge driver. $GIT_DIR/info/attributes outranks the tree's .gitattributes.
NEUTRAL_ATTRIBUTES = ("* -filter -diff -merge -text -eol -ident -working-tree-encoding "
                      "-export-subst\n")
# What the environment may not carry into these gits (which repository, which config).
UNPINNED = (*git.PINNING, "GIT_CONFIG", "GIT_CONFIG_PARAMETERS", "GIT_CONFIG_COUNT",
            "GIT_CONFIG_SYSTEM", "GIT_CONFIG_GLOBAL", "GIT_EXTERNAL_DIFF", "GIT_ATTR_SOURCE",
            "GIT_NAMESPACE", "GIT_REPLACE_REF_BASE", "GIT_SHALLOW_FILE", "GIT_GRAFT_FILE",
            "GIT_ASKPASS", "GIT_SSH", "GIT_SSH_COMMAND", "GIT_PAGER", "GIT_EDITOR",
            "GIT_TRACE2_EVENT")


def pinned_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """This process's environment without anything that picks a repository or adds config,
    and with no system or global config at all: only what the caller names counts."""
    env = {k: v for k, v in os.environ.items()
           if k not in UNPINNED and not k.startswith("GIT_CONFIG_KEY_")
           and not k.startswith("GIT_CONFIG_VALUE_")}
    env.update({"GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null",
                "GIT_ATTR_NOSYSTEM": "1", "GIT_TERMINAL_PROMPT": "0", "GIT_OPTIONAL_LOCKS": "0",
                git.SKIP_HOOKS: "1", "GIT_NO_REPLACE_OBJECTS": "1"})
    env.update(extra or {})
    return env


def _run(args: list[str], env: dict[str, str], *, cwd: str | None = None,
         input: bytes | None = None, check: bool = True) -> git.Result:
    return git.run(["git", *PINS, *args], cwd=cwd, env=env, input=input, timeout=TIMEOUT,
                   check=check)


def object_format(common: str) -> str:
    res = _run(["--git-dir", common, "rev-parse", "--show-object-format"], pinned_env(),
               check=False)
    return res.out.strip() if res.ok and res.out.strip() else "sha1"


class View:
    """A throwaway git dir of the witness's over an agent's work tree: read the tree's files
    against `base` with nothing of the tree's or the user's configuring git.

    objects: where new objects go (the shared store, or a scratch directory of the view's own
    with the shared store as an alternate, when nothing may be kept)."""

    def __init__(self, common: str, tree: str, *, keep_objects: bool):
        self.common = os.path.realpath(common)
        self.tree = tree
        self.tmp = tempfile.mkdtemp(prefix="brat-view-")
        gd = os.path.join(self.tmp, "git")
        for sub in ("refs", "objects", "info"):
            os.makedirs(os.path.join(gd, sub))
        fmt = object_format(self.common)
        ext = f"[extensions]\n\tobjectFormat = {fmt}\n" if fmt != "sha1" else ""
        with open(os.path.join(gd, "config"), "w") as f:
            f.write(f"[core]\n\trepositoryformatversion = {1 if ext else 0}\n\tbare = false\n"
                    f"{ext}")
        with open(os.path.join(gd, "HEAD"), "w") as f:
            f.write("ref: refs/heads/view\n")
        with open(os.path.join(gd, "info", "attributes"), "w") as f:
            f.write(NEUTRAL_ATTRIBUTES)
        try:   # the user's own ignore rules for the repository (a file of theirs, not a program)
            shutil.copyfile(os.path.join(self.common, "info", "exclude"),
                            os.path.join(gd, "info", "exclude"))
        except OSError:
            pass
        shared = os.path.join(self.common, "objects")
        objects = {"GIT_OBJECT_DIRECTORY": shared} if keep_objects else {
            "GIT_OBJECT_DIRECTORY": os.path.join(gd, "objects"),
            "GIT_ALTERNATE_OBJECT_DIRECTORIES": shared}
        self.env = pinned_env({"GIT_DIR": gd, "GIT_WORK_TREE": tree,
                               "GIT_INDEX_FILE": os.path.join(self.tmp, "index"), **objects})

    def __enter__(self) -> "View":
        return self

    def __exit__(self, *exc) -> None:
        shutil.rmtree(self.tmp, ignore_errors=True)

    def git(self, args: list[str], *, env: dict | None = None, check: bool = True) -> git.Result:
        return _run(args, {**self.env, **(env or {})}, cwd=self.tree, check=check)

    def snapshot(self, base: str, skip: list[str] = (), deletions: bool = True) -> str:
        """The tree of the work tree's files laid over commit `base` (paths matching `skip`,
        globs at the top, stay as base has them; deletions=False: a missing file stays too)."""
        spec = [".", *(f":(exclude,glob){g}" for p in skip
                       for g in (p.rstrip("/"), p.rstrip("/") + "/**"))]
        self.git(["read-tree", "--end-of-options", base])
        self.git(["add", "-A" if deletions else "--ignore-removal", "--", *spec])
        return self.git(["write-tree"]).out.strip()


def tree_of(common: str, commit: str) -> str:
    return _run(["--git-dir", common, "rev-parse", "--verify", "--end-of-options",
                 f"{commit}^{{tree}}"], pinned_env()).out.strip()


def changed(common: str, tree: str, base: str) -> bool:
    """Whether the files of the work tree at `tree` differ from commit base (ignored files do
    not count): each file is hashed against base, nothing is written (a git that fails says
    changed: keep what cannot be read)."""
    with View(common, tree, keep_objects=False) as view:
        view.git(["read-tree", "--end-of-options", base])
        view.git(["update-index", "-q", "--refresh"], check=False)   # 1: some file differs
        if not view.git(["diff-files", "--quiet"], check=False).ok:
            return True
        untracked = view.git(["ls-files", "-z", "--others", "--exclude-standard", "--directory",
                              "--no-empty-directory"], check=False)
        return not untracked.ok or bool(untracked.stdout)


def commit_onto(common: str, tree: str, branch: str, message: str, identity: dict[str, str],
                skip: list[str] = (), deletions: bool = True) -> str | None:
    """Commit what the work tree at `tree` holds beyond the tip of refs/heads/<branch> onto
    that branch, by plumbing (a temporary index, write-tree, commit-tree, a compare-and-swap of
    the branch): whatever the tree's own HEAD names is neither read nor moved. The new commit,
    or None when there is nothing to commit. Raises GriteError when git fails or the branch
    moved meanwhile."""
    ref = f"refs/heads/{branch}"
    tip = _run(["--git-dir", common, "rev-parse", "-q", "--verify", "--end-of-options",
                f"{ref}^{{commit}}"], pinned_env(), check=False).out.strip()
    if not tip:
        raise GriteError(f"cannot commit the work left in {tree}: {branch} does not exist")
    with View(common, tree, keep_objects=True) as view:
        snapshot = view.snapshot(tip, skip, deletions)
        if snapshot == tree_of(common, tip):
            return None
        commit = _commit_tree(view, snapshot, tip, message, _identity(common, identity))
    cas(common, ref, commit, tip, "git-brat: the work left in its tree")
    return commit


IDENTITY = {"GIT_AUTHOR_NAME": "user.name", "GIT_AUTHOR_EMAIL": "user.email",
            "GIT_COMMITTER_NAME": "user.name", "GIT_COMMITTER_EMAIL": "user.email"}


def _identity(common: str, given: dict[str, str]) -> dict[str, str]:
    """Who commits: as given, else as the user's config for the repository says (the view
    reads no config of the user's)."""
    out = {k: given[k] for k in IDENTITY if given.get(k)}
    for key in sorted({IDENTITY[k] for k in IDENTITY if k not in out}):
        res = git.run(["--git-dir", common, "config", "--get", key],
                      env=git.environment("checkout"))
        for var, name in IDENTITY.items():
            if name == key and var not in out and res.ok and res.out.strip():
                out[var] = res.out.strip()
    return out


def _commit_tree(view: View, tree: str, parent: str, message: str, who: dict) -> str:
    res = _run(["commit-tree", "-p", parent, "-F", "-", tree], {**view.env, **who},
               cwd=view.tree, input=message.encode("utf-8", "surrogateescape"))
    return res.out.strip()


def cas(common: str, ref: str, new: str, old: str, why: str) -> None:
    """Move ref from old to new, or raise (it moved meanwhile)."""
    res = _run(["--git-dir", common, "update-ref", "-m", why, "--end-of-options", ref, new, old],
               pinned_env(), check=False)
    if not res.ok:
        raise GriteError(f"{ref} moved meanwhile: {res.error_line()}")


# -- a session's private object directory ---------------------------------------------------

SHARED = ".shared"   # where, inside a session's objects/, the shared store is mounted


def make_private_store(private: str, common: str) -> None:
    """A session's object directory, which its sandbox mounts over the repository's objects/,
    with the shared objects/ mounted read-only inside it (at SHARED: a path under no directory
    a sandbox may hide) as its alternate."""
    if os.path.lexists(private):
        shutil.rmtree(private)
    for sub in ("pack", "info", SHARED):
        os.makedirs(os.path.join(private, sub))
    with open(os.path.join(private, "info", "alternates"), "w") as f:
        f.write(os.path.join(os.path.realpath(common), "objects", SHARED) + "\n")


def take_in(common: str, private: str, tip: str, have: list[str]) -> int:
    """(the agent's processes gone) Bring into the shared store the objects reachable from
    `tip` that are in the session's private directory and not shared already, verified; the
    number of bytes of the pack taken in. Raises GriteError, leaving the shared store as it
    was, when any object is forged or missing.

    git's quarantine for pushes: the agent's objects are packed, then indexed with --strict
    into a directory of ours (index-pack hashes every object itself, so a loose object whose
    content is not what its name says comes out under another name, or not at all); tip's
    whole history is walked there; only then do the pack's files move into objects/pack."""
    common = os.path.realpath(common)
    shared = os.path.join(common, "objects")
    for planted in ("alternates", "http-alternates"):   # the agent's pointers elsewhere
        try:
            os.unlink(os.path.join(private, "info", planted))
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            pass
    spec = "".join(f"{c}\n" for c in [tip, *(f"^{h}" for h in have if h)]).encode()
    # No delta search, one thread: a session's pack is small, and the store's next repack
    # compresses it with the rest; what costs here is starting threads and searching windows.
    packed = _run(["--git-dir", common, "-c", "pack.threads=1", "pack-objects", "--revs",
                   "--local", "--window=0", "--stdout", "-q"],
                  pinned_env({"GIT_OBJECT_DIRECTORY": private,
                              "GIT_ALTERNATE_OBJECT_DIRECTORIES": shared}),
                  input=spec, check=False)
    if not packed.ok:
        raise GriteError(f"the session's objects cannot be read: {packed.error_line()}")
    incoming = tempfile.mkdtemp(prefix="incoming-", dir=shared)
    try:
        os.makedirs(os.path.join(incoming, "pack"))
        env = pinned_env({"GIT_OBJECT_DIRECTORY": incoming,
                          "GIT_ALTERNATE_OBJECT_DIRECTORIES": shared})
        indexed = _run(["--git-dir", common, "index-pack", "--strict", "--threads=1",
                        "--stdin"], env,
                       input=packed.stdout, check=False)
        if not indexed.ok:
            raise GriteError(f"the session's objects were refused: {indexed.error_line()}")
        walk = _run(["--git-dir", common, "rev-list", "--objects", "--quiet", tip, "--not",
                     *[h for h in have if h], "--"], env, check=False)
        if not walk.ok or walk.complaint():
            raise GriteError(f"the session's commit {tip[:12]} is not whole: "
                             f"{walk.error_line()}")
        _migrate(os.path.join(incoming, "pack"), os.path.join(shared, "pack"))
    finally:
        shutil.rmtree(incoming, ignore_errors=True)
    return len(packed.stdout)


def _migrate(src: str, dest: str) -> None:
    """The quarantine's pack into the store: the pack before its index (a reader finds a pack
    by its .idx, which must never name a pack not there yet)."""
    os.makedirs(dest, exist_ok=True)
    names = sorted(os.listdir(src), key=lambda n: (n.endswith(".idx"), n))
    for name in names:
        target = os.path.join(dest, name)
        if not os.path.exists(target):
            os.rename(os.path.join(src, name), target)


__all__ = ["PINS", "TREE_PINS", "NEUTRAL_ATTRIBUTES", "View", "pinned_env", "changed",
           "commit_onto", "cas",
           "make_private_store", "SHARED", "take_in", "tree_of"]
