"""The only module that touches git: dulwich for local objects and refs, the git binary for the rest."""

from __future__ import annotations

import os
import subprocess
import time
from typing import Iterable, Iterator

from git_brat.grite.errors import GriteError, NotARepository, RefLocked

ZERO = b"0" * 40
# Refs whose commits are event logs; everything grite reads to build state.
LOG_PREFIXES = (b"refs/grite/wal", b"refs/grite/replicas/", b"refs/grite/attic/")
REMOTE_LOG_INFIX = b"/grite/replicas/"


def run_git(args: list[str], cwd: str | None = None, input: bytes | None = None,
            env: dict | None = None, check: bool = True) -> subprocess.CompletedProcess:
    """Run the git binary; raise GriteError with git's own message when it fails."""
    proc = subprocess.run(["git", *args], cwd=cwd, input=input, env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if check and proc.returncode != 0:
        msg = proc.stderr.decode("utf-8", "replace").strip().splitlines()
        raise GriteError(f"git {args[0]} failed: {msg[-1] if msg else 'exit ' + str(proc.returncode)}")
    return proc


class Store:
    """A git repository as grite sees it: the common dir, its refs and objects."""

    def __init__(self, git_dir: str, common_dir: str, bare: bool):
        self.git_dir = git_dir
        self.common_dir = common_dir
        self.bare = bare
        self._repo = None
        self._toplevel: str | None = None

    @classmethod
    def discover(cls, cwd: str | None = None) -> "Store":
        proc = run_git(["rev-parse", "--absolute-git-dir", "--git-common-dir",
                        "--is-bare-repository"], cwd=cwd, check=False)
        if proc.returncode != 0:
            where = os.path.abspath(cwd or os.getcwd())
            raise NotARepository(f"not a git repository: {where} (run inside a git checkout)")
        git_dir, common, bare = proc.stdout.decode().splitlines()[:3]
        if not os.path.isabs(common):
            common = os.path.normpath(os.path.join(cwd or os.getcwd(), common))
        return cls(git_dir, common, bare == "true")

    # -- paths ---------------------------------------------------------------

    @property
    def grite_dir(self) -> str:
        """Local, rebuildable grite data; in the common dir so every worktree shares it."""
        return os.path.join(self.common_dir, "grite")

    @property
    def brat_dir(self) -> str:
        return os.path.join(self.common_dir, "brat")

    def toplevel(self) -> str | None:
        """The work tree of the current checkout (None in a bare repository)."""
        if self._toplevel is None and not self.bare:
            proc = run_git(["rev-parse", "--show-toplevel"], check=False)
            self._toplevel = proc.stdout.decode().strip() or None if proc.returncode == 0 else None
        return self._toplevel

    @property
    def repo(self):
        if self._repo is None:
            from dulwich.repo import Repo
            # Refs and objects live in the common dir; open it directly so linked worktrees work too.
            self._repo = Repo(self.common_dir)
            import atexit
            atexit.register(self._repo.close)   # close packs before interpreter teardown
        return self._repo

    # -- refs ----------------------------------------------------------------

    def read_ref(self, name: bytes) -> bytes | None:
        try:
            return self.repo.refs[name]
        except KeyError:
            return None

    def refs_under(self, prefix: bytes) -> dict[bytes, bytes]:
        """Full ref name -> sha for every ref below prefix (loose and packed)."""
        refs = self.repo.refs
        out = {}
        for sub in refs.keys(base=prefix):
            try:
                out[prefix + sub] = refs[prefix + sub]
            except KeyError:  # deleted while listing
                pass
        return out

    def log_tips(self) -> dict[str, str]:
        """Every event-log ref grite reads (local wal, replicas, fetched replicas) -> tip sha."""
        tips: dict[str, str] = {}
        for name, sha in self.refs_under(b"refs/grite/").items():
            if name.startswith(LOG_PREFIXES):
                tips[name.decode()] = sha.decode()
        for name, sha in self.refs_under(b"refs/remotes/").items():
            if REMOTE_LOG_INFIX in name:
                tips[name.decode()] = sha.decode()
        return tips

    def cas_ref(self, name: bytes, old: bytes | None, new: bytes, message: bytes = b"") -> bool:
        """Compare-and-swap a ref: True if it moved from old (None: absent) to new.

        Raises RefLocked when another writer holds the ref's .lock file.
        """
        from dulwich.file import FileLocked
        refs = self.repo.refs
        try:
            if old is None:
                return refs.add_if_new(name, new, message=message or None)
            return refs.set_if_equals(name, old, new, message=message or None)
        except FileLocked as exc:
            raise RefLocked(name.decode(), self.ref_lock_path(name)) from exc

    def delete_ref_if(self, name: bytes, old: bytes) -> bool:
        from dulwich.file import FileLocked
        try:
            return self.repo.refs.remove_if_equals(name, old)
        except FileLocked as exc:
            raise RefLocked(name.decode(), self.ref_lock_path(name)) from exc

    def ref_lock_path(self, name: bytes) -> str:
        return os.path.join(self.common_dir, name.decode()) + ".lock"

    def stale_ref_locks(self, max_age: float) -> list[tuple[str, float]]:
        """`.lock` files under refs/grite older than max_age seconds: left by a killed writer."""
        found = []
        root = os.path.join(self.common_dir, "refs", "grite")
        now = time.time()
        for dirpath, _dirs, files in os.walk(root):
            for fn in files:
                if fn.endswith(".lock"):
                    path = os.path.join(dirpath, fn)
                    try:
                        age = now - os.stat(path).st_mtime
                    except FileNotFoundError:
                        continue
                    if age >= max_age:
                        found.append((path, age))
        return sorted(found)

    # -- objects -------------------------------------------------------------

    def write_log_commit(self, payload: bytes, parent: bytes | None, message: str,
                         author: bytes, when: int) -> bytes:
        """Write blob `events` + tree + commit (objects only, no ref change); return commit sha."""
        from dulwich.objects import Blob, Commit, Tree
        blob = Blob.from_string(payload)
        tree = Tree()
        tree.add(b"events", 0o100644, blob.id)
        commit = Commit()
        commit.tree = tree.id
        commit.parents = [parent] if parent else []
        commit.author = commit.committer = author
        commit.author_time = commit.commit_time = when
        commit.author_timezone = commit.commit_timezone = 0
        commit.encoding = b"UTF-8"
        commit.message = message.encode("utf-8") + b"\n"
        store = self.repo.object_store
        store.add_objects([(blob, None), (tree, None), (commit, None)])
        return commit.id

    def read_commit(self, sha: bytes):
        """(parents, tree sha, message, author, time) of a commit, or raise CorruptObject."""
        from git_brat.grite.errors import CorruptObject
        try:
            c = self.repo.object_store[sha]
            return LogCommit(sha, list(c.parents), c.tree, c.message.decode("utf-8", "replace"),
                             c.author.decode("utf-8", "replace"), c.commit_time)
        except Exception as exc:  # missing, truncated or not a commit
            raise CorruptObject(sha.decode(), str(exc) or type(exc).__name__) from exc

    def read_log_blob(self, commit: "LogCommit") -> bytes:
        from git_brat.grite.errors import CorruptObject
        try:
            tree = self.repo.object_store[commit.tree]
            _mode, blob_sha = tree[b"events"]
            return self.repo.object_store[blob_sha].as_raw_string()
        except Exception as exc:
            raise CorruptObject(commit.sha.decode(), f"events blob unreadable: {exc or type(exc).__name__}") from exc

    def has_object(self, sha: bytes) -> bool:
        return sha in self.repo.object_store

    def rev_list(self, include: Iterable[str], exclude: Iterable[str] = ()) -> list[str]:
        """Commits reachable from include but not exclude, oldest first (git rev-list)."""
        include = list(include)
        if not include:
            return []
        exclude = [e for e in exclude if self.has_object(e.encode())]
        args = ["rev-list", "--reverse", "--topo-order", *include]
        if exclude:
            args += ["--not", *exclude]
        proc = run_git(["--git-dir", self.git_dir, *args])
        return proc.stdout.decode().split()

    def cat_log_blobs(self, commits: list[str]) -> Iterator[tuple[str, bytes | None]]:
        """(commit, events blob bytes or None if unreadable) for many commits via cat-file --batch."""
        if not commits:
            return
        proc = subprocess.Popen(["git", "--git-dir", self.git_dir, "cat-file", "--batch"],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL)
        import threading

        def feed():
            try:
                proc.stdin.write("".join(f"{c}:events\n" for c in commits).encode())
                proc.stdin.close()
            except BrokenPipeError:
                pass

        feeder = threading.Thread(target=feed, daemon=True)
        feeder.start()
        out = proc.stdout
        for c in commits:
            header = out.readline()
            if not header:
                yield c, None
                continue
            parts = header.split()
            if len(parts) == 3 and parts[1] == b"blob":
                size = int(parts[2])
                data = out.read(size)
                out.read(1)
                yield c, data
            else:  # "<name> missing" or not a blob
                yield c, None
        feeder.join()
        proc.wait()

    # -- config --------------------------------------------------------------

    def config_get(self, key: str) -> str | None:
        proc = run_git(["--git-dir", self.git_dir, "config", "--get", key], check=False)
        return proc.stdout.decode().strip() if proc.returncode == 0 else None

    def user_identity(self) -> tuple[str, str]:
        """The user's git name and email, with fallbacks that never fail."""
        name = self.config_get("user.name") or os.environ.get("USER") or "unknown"
        email = self.config_get("user.email") or f"{name}@localhost"
        return name, email


class LogCommit:
    """One commit of an event log, as read from the object store."""

    __slots__ = ("sha", "parents", "tree", "message", "author", "time")

    def __init__(self, sha, parents, tree, message, author, time):
        self.sha, self.parents, self.tree = sha, parents, tree
        self.message, self.author, self.time = message, author, time
