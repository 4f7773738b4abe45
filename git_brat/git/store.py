"""A git repository: where it is, its config and identity, and the parts it is made of."""

from __future__ import annotations

import os
import re
import time

from git_brat.errors import GriteError, NotARepository
from git_brat.git import run as git
from git_brat.git.catfile import CatFile
from git_brat.git.objects import Objects
from git_brat.git.refs import Refs

CONFIG_TTL = 2.0       # seconds a Store answers config lookups from one `git config --list`


class Store:
    """A git repository as grite and brat see it, composed the way dulwich's Repo is:
    `refs` (read, swap, reflogs), `objects` (write, read, history), `catfile` (streams of
    objects) and `remote` (transport); the work tree API is git_brat.git.worktree."""

    def __init__(self, git_dir: str, common_dir: str, bare: bool, cwd: str | None = None):
        self.git_dir = git_dir
        self.common_dir = common_dir
        self.bare = bare
        self.cwd = cwd            # where the repository was discovered from (None: the process cwd)
        self._repo = None
        self._toplevel: str | None = None
        self._config_read: tuple[float, list[tuple[str, str]]] | None = None
        self.refs = Refs(git_dir, common_dir, self._dulwich, self._reflog_identity)
        self.objects = Objects(git_dir, common_dir, self._dulwich)
        self.catfile = CatFile(git_dir, self.objects.has_object, self._entry_or_none)
        self._remote = None

    @classmethod
    def discover(cls, cwd: str | None = None) -> "Store":
        """Find the repository the way git does (GIT_DIR, worktrees, bare repos, subdirectories)."""
        found = None if _GIT_ENV.intersection(os.environ) else _discover_fast(cwd or os.getcwd())
        if found:
            git_dir, common, toplevel = found
            store = cls(git_dir, common, False, cwd=cwd)
            store._toplevel = toplevel
            return store
        res = git.run(["rev-parse", "--absolute-git-dir", "--git-common-dir",
                       "--is-bare-repository"], cwd=cwd)
        if not res.ok:
            where = os.path.abspath(cwd or os.getcwd())
            raise NotARepository(f"not a git repository: {where} (run inside a git checkout)")
        git_dir, common, bare = res.out.splitlines()[:3]
        if not os.path.isabs(common):
            common = os.path.normpath(os.path.join(cwd or os.getcwd(), common))
        return cls(git_dir, common, bare == "true", cwd=cwd)

    # -- paths ---------------------------------------------------------------

    def toplevel(self) -> str | None:
        """The work tree of the current checkout (None in a bare repository)."""
        if self._toplevel is None and not self.bare:
            res = git.run(["rev-parse", "--show-toplevel"], cwd=self.cwd)
            self._toplevel = (res.out.strip() or None) if res.ok else None
        return self._toplevel

    def main_toplevel(self) -> str | None:
        """The repository's own work tree, whichever work tree this command runs in (None in
        a bare repository): a linked work tree (an agent's session) has files its user does
        not vouch for."""
        if self.bare:
            return None
        if os.path.realpath(self.git_dir) == os.path.realpath(self.common_dir):
            return self.toplevel()
        res = git.run(["worktree", "list", "--porcelain", "-z"], cwd=self.toplevel() or self.git_dir)
        first = res.out.split("\0")[:3] if res.ok else []
        if not first or not first[0].startswith("worktree ") or "bare" in first:
            return None
        return first[0][len("worktree "):]

    def last_change(self, top: str, path: str) -> tuple[str, str, str, bool] | None:
        """(short commit, author, subject, edited since) of the last commit touching path in
        the work tree top; None when no commit has it. edited: the file differs from HEAD."""
        res = git.run(["log", "-1", "--format=%h%x1f%an <%ae>%x1f%s", "--end-of-options",
                       "HEAD", "--", path], cwd=top)
        dirty = git.run(["--no-optional-locks", "status", "--porcelain", "--", path], cwd=top)
        edited = bool(dirty.ok and dirty.out.strip())
        if not res.ok or not res.out.strip():
            return ("", "", "", True) if edited else None
        sha, author, subject = (res.out.strip("\n").split("\x1f") + ["", ""])[:3]
        return sha, author, subject, edited

    def tracked(self, paths: list[str]) -> set[str]:
        """Which of these work-tree paths (relative to the top) git tracks."""
        top = self.toplevel()
        if not top or not paths:
            return set()
        from git_brat.git import worktree
        return set(worktree.tracked(top, paths))

    @property
    def remote(self):
        """Transport (git_brat.git.remote.Remote), made on first use: most commands never
        reach a remote, and its module is not theirs to import."""
        if self._remote is None:
            from git_brat.git.remote import Remote
            self._remote = Remote(self.git_dir, self.common_dir,
                                  lambda: self.toplevel() or self.git_dir, self.objects.rev)
        return self._remote

    @property
    def repo(self):
        """dulwich's Repo for the common dir, opened on first use."""
        if self._repo is None:
            from dulwich.repo import Repo
            # Refs and objects live in the common dir; open it directly so linked worktrees work too.
            self._repo = Repo(self.common_dir)
            store = self._repo.object_store
            if getattr(store, "loose_compression_level", None) == -1:
                # Unset in git config: git's own default for loose objects is 1 (best speed);
                # dulwich would use zlib's 6, five times slower on a large snapshot.
                store.loose_compression_level = 1
            self.refs.hand_packed_refs_to(self._repo.refs)
            import atexit
            atexit.register(self._repo.close)   # close packs before interpreter teardown
        return self._repo

    def _dulwich(self):
        return self.repo

    def _entry_or_none(self, commit: str, entry: str) -> bytes | None:
        from git_brat.errors import CorruptObject
        try:
            return self.objects.read_record(commit.encode(), entry.encode())[0]
        except CorruptObject:
            return None

    def _git(self, args: list[str], **kw) -> git.Result:
        return git.run(["--git-dir", self.git_dir, *args], **kw)

    # -- config --------------------------------------------------------------

    def _config(self) -> list[tuple[str, str]]:
        """Every config entry git sees here (all scopes, includes followed), in git's order.

        One `git config --list` serves a command's every lookup; kept CONFIG_TTL seconds, so a
        long-running witness sees a change soon after it is made (and at once its own)."""
        now = time.monotonic()
        if self._config_read is None or now - self._config_read[0] > CONFIG_TTL:
            res = self._git(["config", "--list", "-z"])
            entries = []
            for item in res.out.split("\0"):
                if item:
                    key, _, value = item.partition("\n")
                    entries.append((key, value))
            self._config_read = (now, entries)
        return self._config_read[1]

    def config_get(self, key: str) -> str | None:
        values = self.config_get_all(key)
        return values[-1].strip() if values else None

    def config_get_all(self, key: str) -> list[str]:
        want = _config_key(key)
        return [v for k, v in self._config() if k == want]

    def config_bool(self, key: str, default: bool) -> bool:
        """A boolean setting in git's spellings; GriteError naming it for anything else."""
        value = self.config_get(key)
        if value is None:
            return default
        if value.lower() in ("true", "yes", "on", "1"):
            return True
        if value.lower() in ("false", "no", "off", "0"):
            return False
        raise GriteError(f"{key} must be true or false, not {value!r}")

    def config_matching(self, pattern: str) -> dict[str, str]:
        """Config keys matching a regex (git lower-cases section and key) -> last value; one call."""
        match = re.compile(pattern).search
        return {k: v for k, v in self._config() if match(k)}

    def config_add(self, key: str, value: str) -> None:
        self._config_read = None
        self._git(["config", "--add", "--end-of-options", key, value], check=True)

    def config_set(self, key: str, value: str) -> None:
        """Set key in the repository's own config (.git/config): never synced."""
        self._config_read = None
        self._git(["config", "--local", "--end-of-options", key, value], check=True)

    def config_unset(self, key: str) -> None:
        self._config_read = None
        self._git(["config", "--local", "--unset-all", "--end-of-options", key])

    def config_unset_value(self, key: str, value: str) -> None:
        """Remove every `key = value` line (exact match), leaving other values of key alone."""
        self._config_read = None
        self._git(["config", "--fixed-value", "--unset-all", "--end-of-options", key, value])

    # -- identity and branches ------------------------------------------------

    def user_identity(self) -> tuple[str, str]:
        """The author identity git would use (config and GIT_AUTHOR_*), with fallbacks that never fail."""
        res = self._git(["var", "GIT_AUTHOR_IDENT"])
        ident = res.out.strip()
        if res.ok and "<" in ident:
            name, _, rest = ident.partition("<")
            email = rest.partition(">")[0]
            if name.strip():
                return name.strip(), email.strip() or f"{name.strip()}@localhost"
        name = os.environ.get("USER") or "unknown"
        return name, f"{name}@localhost"

    def _reflog_identity(self) -> bytes | None:
        """Who the reflog line says moved the ref, as git names the committer (environment,
        then config). Passed to dulwich, whose own lookup imports socket and pwd and parses
        every config file on each write; None (dulwich decides) if it would not be well formed."""
        def part(env: str, key: str) -> str:
            return (os.environ.get(env) or self.config_get(key) or "").strip()
        name = part("GIT_COMMITTER_NAME", "user.name")
        email = part("GIT_COMMITTER_EMAIL", "user.email")
        if not name or not email or any(c in name + email for c in "<>\n\0"):
            return None
        return f"{name} <{email}>".encode("utf-8", "surrogateescape")

    def current_branch(self) -> str | None:
        """The branch HEAD names in this checkout (None when detached)."""
        res = self._git(["symbolic-ref", "-q", "--short", "HEAD"])
        return res.out.strip() or None if res.ok else None

    def default_branch_candidates(self) -> list[str]:
        """Where work lands, most likely first: the remotes' HEAD (origin first), main or
        master if it exists, the checked-out branch, "main". Remote names are the remote's
        word: callers check them."""
        out = []
        for remote in sorted(self.remotes(), key=lambda r: r != "origin"):
            res = self._git(["symbolic-ref", "-q", "--short", f"refs/remotes/{remote}/HEAD"])
            name = res.out.strip()
            if res.ok and name.startswith(f"{remote}/"):
                out.append(name[len(remote) + 1:])
        out += [n for n in ("main", "master") if self.refs.read(f"refs/heads/{n}".encode())]
        out += [self.current_branch() or "main", "main"]
        return out

    # -- remotes and hooks ---------------------------------------------------

    def remotes(self) -> list[str]:
        return self._git(["remote"], check=True).out.split()

    def hooks_dir(self) -> str:
        """Where git looks for hooks (honours core.hooksPath, resolved as git resolves it)."""
        if self.config_get("core.hooksPath") is None and "GIT_COMMON_DIR" not in os.environ:
            return os.path.join(self.common_dir, "hooks")
        res = git.run(["rev-parse", "--path-format=absolute", "--git-path", "hooks"],
                      cwd=self.toplevel() or self.git_dir, check=True)
        return res.out.strip()


# With any of these set, only git itself knows where the repository is.
_GIT_ENV = {"GIT_DIR", "GIT_COMMON_DIR", "GIT_WORK_TREE", "GIT_CEILING_DIRECTORIES",
            "GIT_DISCOVERY_ACROSS_FILESYSTEM", "GIT_OBJECT_DIRECTORY"}


def _config_key(key: str) -> str:
    """A key as `git config --list` prints it: section and name lower-cased, subsection kept."""
    section, _, rest = key.partition(".")
    sub, _, name = rest.rpartition(".")
    return f"{section.lower()}.{sub + '.' if sub else ''}{name.lower()}"


def _discover_fast(cwd: str) -> tuple[str, str, str | None] | None:
    """In-process discovery for the common layouts (saves git processes on every command):
    (git dir, common dir, work tree if known without asking git).

    Returns None whenever anything looks unusual, and the caller asks `git rev-parse`.
    """
    d = os.path.abspath(cwd)
    while True:
        dot = os.path.join(d, ".git")
        if os.path.isdir(dot):
            git_dir = dot
        elif os.path.isfile(dot):
            try:
                with open(dot) as f:
                    line = f.read().strip()
            except OSError:
                return None
            if not line.startswith("gitdir: "):
                return None
            git_dir = os.path.normpath(os.path.join(d, line[8:]))
        elif os.path.isfile(os.path.join(d, "HEAD")) and os.path.isdir(os.path.join(d, "objects")):
            return None   # possibly a bare repository: let git decide
        else:
            parent = os.path.dirname(d)
            if parent == d:
                return None
            d = parent
            continue
        if not os.path.isfile(os.path.join(git_dir, "HEAD")):
            return None
        common = git_dir
        commondir = os.path.join(git_dir, "commondir")
        if os.path.isfile(commondir):
            with open(commondir) as f:
                common = os.path.normpath(os.path.join(git_dir, f.read().strip()))
        if not os.path.isdir(os.path.join(common, "objects")):
            return None
        return os.path.realpath(git_dir), os.path.realpath(common), _plain_worktree(d, git_dir,
                                                                                    common)


def _plain_worktree(d: str, git_dir: str, common: str) -> str | None:
    """d, the directory holding .git, when nothing could move the work tree elsewhere (no
    core.worktree, core.bare or include in the repository's config); None: ask git."""
    for cfg in {os.path.join(git_dir, "config.worktree"), os.path.join(common, "config")}:
        try:
            with open(cfg, "rb") as f:
                text = f.read().lower()
        except FileNotFoundError:
            continue
        except OSError:
            return None
        if b"worktree" in text or b"include" in text or (b"bare" in text and
                                                         b"bare = false" not in text):
            return None
    return os.path.realpath(d)
