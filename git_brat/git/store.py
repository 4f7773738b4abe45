"""The only module that touches git: dulwich for local objects and refs, the git binary for the rest."""

from __future__ import annotations

import os
import re
import subprocess
import time
from typing import Generator, Iterable, Iterator

from git_brat.errors import GriteError, NotARepository, RefLocked, RemoteUnreachable
from git_brat.git.packedrefs import PackedRefs

ZERO = b"0" * 40
STALE_REF_LOCK = 5.0   # seconds: a grite ref's .lock this old was left by a killed writer
CONFIG_TTL = 2.0       # seconds a Store answers config lookups from one `git config --list`
# Refs whose commits are event logs; everything grite reads to build state.
LOG_PREFIXES = (b"refs/grite/wal", b"refs/grite/replicas/", b"refs/grite/attic/")
REMOTE_LOG_INFIX = b"/grite/replicas/"
REMOTE_WAL_SUFFIX = b"/grite/wal"   # a peer clone's own log, fetched straight from it


# What a commit subject (and a reflog line) must never carry: control characters (they drive
# the terminal of whoever runs `git log`), bidi overrides and zero-width characters (they make
# text read differently from what it is).
_HIDDEN = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200b-\u200f\u202a-\u202e\u2060-\u2064"
                     "\u2066-\u2069\ufeff]")


def safe_subject(text: str) -> str:
    """One line with every hidden or controlling character shown as an escape (\\x1b, \\u202e)."""
    def esc(m: re.Match) -> str:
        c = ord(m.group(0))
        return f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}"
    return _HIDDEN.sub(esc, text)


def is_log_ref(name: bytes | str) -> bool:
    """True for refs holding event logs; lock refs and everything else are not logs."""
    if isinstance(name, str):
        name = name.encode()
    if name.startswith(b"refs/grite/"):
        return name.startswith(LOG_PREFIXES)
    return name.startswith(b"refs/remotes/") and b"/grite/locks/" not in name and (
        REMOTE_LOG_INFIX in name or name.endswith(REMOTE_WAL_SUFFIX))


def run_git(args: list[str], cwd: str | None = None, input: bytes | None = None,
            env: dict | None = None, check: bool = True) -> subprocess.CompletedProcess:
    """Run the git binary; raise GriteError with git's own message when it fails."""
    proc = subprocess.run(["git", *args], cwd=cwd, input=input, env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if check and proc.returncode != 0:
        msg = proc.stderr.decode("utf-8", "replace").strip().splitlines()
        what = args[2] if args[:1] == ["--git-dir"] and len(args) > 2 else args[0]
        raise GriteError(f"git {what} failed: {msg[-1] if msg else 'exit ' + str(proc.returncode)}")
    return proc


_SHA = re.compile(rb"[0-9a-f]{40}([0-9a-f]{24})?")


def _ref_file(path: str) -> bytes | None:
    """A loose ref file's content, stripped; None if there is no such file."""
    try:
        with open(path, "rb") as f:
            return f.read().strip()
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        return None


class Store:
    """A git repository as grite sees it: the common dir, its refs and objects."""

    def __init__(self, git_dir: str, common_dir: str, bare: bool, cwd: str | None = None):
        self.git_dir = git_dir
        self.common_dir = common_dir
        self.bare = bare
        self.cwd = cwd            # where the repository was discovered from (None: the process cwd)
        self._repo = None
        self._toplevel: str | None = None
        self._written: dict[bytes, tuple] = {}   # commit -> objects, until its ref update
        self._packed: PackedRefs | None = None
        self._config_read: tuple[float, list[tuple[str, str]]] | None = None

    @classmethod
    def discover(cls, cwd: str | None = None) -> "Store":
        """Find the repository the way git does (GIT_DIR, worktrees, bare repos, subdirectories)."""
        found = None if _GIT_ENV.intersection(os.environ) else _discover_fast(cwd or os.getcwd())
        if found:
            git_dir, common, toplevel = found
            store = cls(git_dir, common, False, cwd=cwd)
            store._toplevel = toplevel
            return store
        proc = run_git(["rev-parse", "--absolute-git-dir", "--git-common-dir",
                        "--is-bare-repository"], cwd=cwd, check=False)
        if proc.returncode != 0:
            where = os.path.abspath(cwd or os.getcwd())
            raise NotARepository(f"not a git repository: {where} (run inside a git checkout)")
        git_dir, common, bare = proc.stdout.decode().splitlines()[:3]
        if not os.path.isabs(common):
            common = os.path.normpath(os.path.join(cwd or os.getcwd(), common))
        return cls(git_dir, common, bare == "true", cwd=cwd)

    # -- paths ---------------------------------------------------------------

    @property
    def grite_dir(self) -> str:
        """Local, rebuildable grite data; in the common dir so every worktree shares it."""
        return os.path.join(self.common_dir, "grite")

    def toplevel(self) -> str | None:
        """The work tree of the current checkout (None in a bare repository)."""
        if self._toplevel is None and not self.bare:
            proc = run_git(["rev-parse", "--show-toplevel"], cwd=self.cwd, check=False)
            self._toplevel = (proc.stdout.decode().strip() or None) if proc.returncode == 0 else None
        return self._toplevel

    @property
    def repo(self):
        if self._repo is None:
            from dulwich.repo import Repo
            # Refs and objects live in the common dir; open it directly so linked worktrees work too.
            self._repo = Repo(self.common_dir)
            store = self._repo.object_store
            if getattr(store, "loose_compression_level", None) == -1:
                # Unset in git config: git's own default for loose objects is 1 (best speed);
                # dulwich would use zlib's 6, five times slower on a large snapshot.
                store.loose_compression_level = 1
            self._hand_packed_refs_to(self._repo.refs)
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
        """Full ref name -> sha for every ref below prefix (loose and packed).

        Read as git reads them, loose first (so a concurrent pack-refs, which writes
        packed-refs before deleting the loose files, can never hide a ref), in one pass over
        each: a year of lease refs must not cost a lookup each on every command.
        """
        loose = self.loose_refs_under(prefix)
        out = self.packed_refs().under(prefix)
        out.update(loose)
        return out

    def loose_refs_under(self, prefix: bytes, prune: bytes | None = None) -> dict[bytes, bytes]:
        """Loose refs whose names start with prefix; below a directory named prune's first
        part, prune's second part is not walked (b"grite/locks": remote lease copies)."""
        text = prefix.decode()
        if text.endswith("/"):
            tops = [os.path.join(self.common_dir, text)]
        else:   # a name prefix, e.g. refs/grite/wal: the matching entries of its directory
            parent, _, stem = text.rpartition("/")
            try:
                tops = [os.path.join(self.common_dir, parent, e)
                        for e in os.listdir(os.path.join(self.common_dir, parent))
                        if e.startswith(stem)]
            except (FileNotFoundError, NotADirectoryError):
                tops = []
        skip_in, _, skip = (prune or b"").decode().partition("/")
        out: dict[bytes, bytes] = {}
        for top in tops:
            walked = os.walk(top) if os.path.isdir(top) else [(os.path.dirname(top), [],
                                                              [os.path.basename(top)])]
            for root, dirs, files in walked:
                if skip and os.path.basename(root) == skip_in and skip in dirs:
                    dirs.remove(skip)
                for leaf in files:
                    if not leaf.endswith(".lock"):
                        self._read_loose(os.path.join(root, leaf), out)
        return out

    def _read_loose(self, path: str, out: dict[bytes, bytes]) -> None:
        name = os.path.relpath(path, self.common_dir).replace(os.sep, "/").encode()
        data = _ref_file(path)   # (None: deleted meanwhile)
        if data is not None and data.startswith(b"ref: "):   # symbolic (a clone's origin/HEAD)
            data = self._symbolic_target(data[5:].strip())
        if data is not None and _SHA.fullmatch(data):
            out[name] = data

    def _symbolic_target(self, target: bytes) -> bytes | None:
        """The sha a symbolic ref's target names, followed as git does (loose, then packed; a
        few levels), without opening dulwich's repository for it (40 ms of every command)."""
        for _ in range(5):
            parts = target.split(b"/")
            if parts[0] != b"refs" or b"" in parts or b".." in parts or b"." in parts:
                return None
            data = _ref_file(os.path.join(self.common_dir, os.fsdecode(target)))
            if data is None:
                return self.packed_refs().get(target)
            if not data.startswith(b"ref: "):
                return data
            target = data[5:].strip()
        return None

    def packed_refs(self) -> PackedRefs:
        """The packed-refs file, read again only when it was replaced (git's own stat check)."""
        path = os.path.join(self.common_dir, "packed-refs")
        try:
            key = _stat_key(os.stat(path))
        except FileNotFoundError:
            return PackedRefs(b"")
        if self._packed is None or self._packed.key != key:
            try:
                with open(path, "rb") as f:
                    self._packed = PackedRefs(f.read(), _stat_key(os.fstat(f.fileno())))
            except FileNotFoundError:
                return PackedRefs(b"")
        return self._packed

    def _hand_packed_refs_to(self, refs) -> None:
        """Make dulwich use packed_refs(): its own parse checks every name of the file, and
        after `git gc` packs a year of lease refs that costs each write ~1 s.

        dulwich keys its cache by the file's stat as git does; when the keys differ (a file
        replaced meanwhile, or a dulwich that keys differently) dulwich reads the file itself."""
        if not all(hasattr(refs, a) for a in ("_packed_refs", "_peeled_refs", "_packed_refs_key",
                                               "_current_packed_refs_key")):
            return
        own = refs.get_packed_refs
        path = os.path.join(self.common_dir, "packed-refs")

        def get_packed_refs():
            key = refs._current_packed_refs_key()
            if key is not None and refs._packed_refs_key != key:
                packed = self.packed_refs()
                try:   # the file read is the one dulwich just saw: same stat before and after
                    same = packed.key == _stat_key(os.stat(path)) and key == \
                        refs._current_packed_refs_key()
                except FileNotFoundError:
                    same = False
                if same:
                    refs._packed_refs, refs._peeled_refs = packed, packed.peeled
                    refs._packed_refs_key = key
            return own()
        refs.get_packed_refs = get_packed_refs

    def log_tips(self) -> dict[str, str]:
        """Every event-log ref grite reads (local wal, replicas, fetched replicas) -> tip sha."""
        found: dict[bytes, bytes] = {}
        for prefix in LOG_PREFIXES:
            found.update(self.refs_under(prefix))
        packed = self.packed_refs()
        for part in (REMOTE_LOG_INFIX, REMOTE_WAL_SUFFIX + b"\n"):
            found.update(packed.containing(part, within=b"refs/remotes/"))
        found.update(self.loose_refs_under(b"refs/remotes/", prune=b"grite/locks"))
        return {n.decode(): s.decode() for n, s in found.items() if is_log_ref(n)}

    def cas_ref(self, name: bytes, old: bytes | None, new: bytes, message: bytes = b"") -> bool:
        """Compare-and-swap a ref: True if it moved from old (None: absent) to new.

        Raises RefLocked when another writer holds the ref's .lock file.
        """
        from dulwich.file import FileLocked
        refs = self.repo.refs
        if message:   # the reflog line: the same rule as commit subjects
            message = safe_subject(message.decode("utf-8", "surrogateescape")).encode(
                "utf-8", "surrogateescape")
        who = self._reflog_identity() if message else None
        broke, races = False, 0
        while True:
            if message:
                # dulwich writes the reflog line while it holds the ref's .lock, and makes the
                # log's directories by look-then-mkdir: another writer (a thread, a process,
                # git) making the same directory in between raises FileExistsError and aborts
                # the update. Made here first, where a directory that exists is no error.
                os.makedirs(os.path.dirname(self.reflog_path(name)), exist_ok=True)
            try:
                if old is None:
                    return refs.add_if_new(name, new, message=message or None, committer=who)
                return refs.set_if_equals(name, old, new, message=message or None, committer=who)
            except FileLocked as exc:
                if not broke and self._break_stale_lock(name):
                    broke = True
                    continue
                raise RefLocked(name.decode(), self.ref_lock_path(name)) from exc
            except FileExistsError:
                # That race all the same (a directory removed and made again meanwhile): the
                # ref was left as it was, so the swap is simply tried again.
                races += 1
                if races > 3:
                    raise

    def reflog_path(self, ref: bytes) -> str:
        """Where git (and dulwich) keep a shared ref's reflog."""
        return os.path.join(self.common_dir, "logs", ref.decode())

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

    def _break_stale_lock(self, name: bytes) -> bool:
        """Remove a grite ref's .lock left by a writer that was killed mid-update.

        Writers hold these locks for the microseconds of one rename; one older than
        STALE_REF_LOCK seconds has no writer left, and would otherwise stop every append.
        """
        if not name.startswith(b"refs/grite/"):
            return False
        path = self.ref_lock_path(name)
        try:
            if time.time() - os.stat(path).st_mtime < STALE_REF_LOCK:
                return False
            os.unlink(path)
            return True
        except FileNotFoundError:
            return True    # gone meanwhile: try again
        except OSError:
            return False

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
        root = os.path.join(self.common_dir, "refs", "grite")
        return _older_than((os.path.join(d, fn) for d, _dirs, files in os.walk(root)
                            for fn in files if fn.endswith(".lock")), max_age)

    def stale_object_temps(self, max_age: float) -> list[tuple[str, float]]:
        """Half-written object files older than max_age seconds: `<object>.lock` (dulwich),
        `tmp_obj_*` / `tmp_pack_*` / `tmp_idx_*` (git), left by a writer that was killed.
        `git fsck` reports them as bad objects; nothing ever completes them."""
        root = os.path.join(self.common_dir, "objects")

        def candidates():
            for sub in _listdir(root):
                if len(sub) == 2 or sub == "pack":
                    d = os.path.join(root, sub)
                    for fn in _listdir(d):
                        if fn.endswith(".lock") or fn.startswith(("tmp_obj_", "tmp_pack_",
                                                                  "tmp_idx_")):
                            yield os.path.join(d, fn)
        return _older_than(candidates(), max_age)

    # -- objects -------------------------------------------------------------

    def write_log_commit(self, payload: bytes, parent: bytes | None, message: str,
                         author: bytes, when: int) -> bytes:
        """Write blob `events` + tree + commit (objects only, no ref change); return commit sha."""
        return self.write_record_commit(b"events", payload, parent, message, author, when)

    def read_commit(self, sha: bytes):
        """(parents, tree sha, message, author, time) of a commit, or raise CorruptObject."""
        from git_brat.errors import CorruptObject
        try:
            c = self.repo.object_store[sha]
            return LogCommit(sha, list(c.parents), c.tree, c.message.decode("utf-8", "replace"),
                             c.author.decode("utf-8", "replace"), c.commit_time)
        except Exception as exc:  # missing, truncated or not a commit
            raise CorruptObject(sha.decode(), str(exc) or type(exc).__name__) from exc

    def read_log_blob(self, commit: "LogCommit") -> bytes:
        from git_brat.errors import CorruptObject
        try:
            tree = self.repo.object_store[commit.tree]
            _mode, blob_sha = tree[b"events"]
            return self.repo.object_store[blob_sha].as_raw_string()
        except Exception as exc:
            raise CorruptObject(commit.sha.decode(), f"events blob unreadable: {exc or type(exc).__name__}") from exc

    def is_commit(self, sha: str) -> bool:
        try:
            return self.repo.object_store[sha.encode()].type_name == b"commit"
        except Exception:   # absent, unreadable, or not an object id
            return False

    def has_object(self, sha: bytes) -> bool:
        try:
            return sha in self.repo.object_store
        except Exception:   # not an object id this repository can hold (dulwich asserts on some)
            return False

    def rev_list(self, include: Iterable[str], exclude: Iterable[str] = ()) -> list[str]:
        """Commits reachable from include but not exclude, oldest first (git rev-list)."""
        include = list(include)
        if not include:
            return []
        exclude = [e for e in exclude if self.has_object(e.encode())]
        # Ids only after --end-of-options (never read as options), excludes as ^id.
        args = ["rev-list", "--reverse", "--topo-order", "--end-of-options", *include,
                *(f"^{e}" for e in exclude)]
        proc = run_git(["--git-dir", self.git_dir, *args])
        _complained(proc.stderr, "rev-list")
        return proc.stdout.decode().split()

    def cat_log_blobs(self, commits: list[str], entry: str = "events"
                      ) -> Iterator[tuple[str, memoryview | bytes | None]]:
        """(commit, its `entry` blob's bytes or None if unreadable) for many record commits (log
        batches, lease records) via cat-file --batch.

        Streams: blobs are yielded while git is still producing the rest, so decoding and
        replay in this process overlap with git's work on the other core. A damaged object
        makes cat-file exit; a fresh one reads the rest, so it costs only its own record.
        """
        start, stuck = 0, 0
        while start < len(commits):
            if stuck >= 8:   # git keeps dying at once (not one bad object): read in-process
                for c in commits[start:]:
                    yield c, self._entry_blob(c, entry)
                return
            answered = yield from self._cat_some(commits[start:], entry)
            if start + answered < len(commits):   # the record git stopped at: try it here
                yield commits[start + answered], self._entry_blob(commits[start + answered], entry)
            stuck = stuck + 1 if answered == 0 else 0
            start += answered + 1

    def events_blob(self, commit: str) -> bytes | None:
        """The events blob of one log commit, read in-process; None if anything is unreadable."""
        from git_brat.errors import CorruptObject
        try:
            return self.read_log_blob(self.read_commit(commit.encode()))
        except CorruptObject:
            return None

    def _entry_blob(self, commit: str, entry: str) -> bytes | None:
        if entry == "events":
            return self.events_blob(commit)
        from git_brat.errors import CorruptObject
        try:
            return self.read_record(commit.encode(), entry.encode())[0]
        except CorruptObject:
            return None

    def _cat_some(self, commits: list[str], entry: str = "events"
                  ) -> Generator[tuple[str, memoryview | None], None, int]:
        """One cat-file for as many of commits as it answers; returns how many that was."""
        import threading
        proc = subprocess.Popen(["git", "--git-dir", self.git_dir, "cat-file",
                                 "--batch=%(objecttype) %(objectsize)"],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL)

        def feed() -> None:
            try:
                proc.stdin.write("".join(f"{c}:{entry}\n" for c in commits).encode())
                proc.stdin.close()
            except (BrokenPipeError, ValueError):
                pass

        feeder = threading.Thread(target=feed, daemon=True)
        feeder.start()
        try:
            return (yield from _parse_batch_output(proc.stdout, commits))
        finally:   # also when the consumer stops early: never leave git running
            proc.stdout.close()
            if proc.poll() is None:
                proc.kill()
            proc.wait()
            feeder.join()

    def stream_event_blobs(self, tips: list[str]) -> Iterator[list[memoryview]]:
        """The events blob of every commit reachable from tips, in chunks as git produces them.

        `git rev-list --objects --filter=object:type=blob | git cat-file --batch`, no Python in
        between: the walk names the blobs itself, so git never resolves `<commit>:events`
        through a tree per commit (twice as fast), and this process decodes while git reads.
        Blobs come without their commit and in no useful order. Raises GriteError, after
        yielding what it could, if git failed, an object is missing, or a log tree holds
        anything but `events`: the caller then takes the careful, per-commit path, which reads
        exactly what incremental updates read and can name what is broken.
        """
        if not tips:
            return
        import tempfile
        git = ["git", "--git-dir", self.git_dir]
        # rev-list's complaints go to a file: a pipe nobody reads until the end could fill
        # up (a badly damaged repository) and stall the whole pipeline.
        with tempfile.TemporaryFile() as errors:
            walk = subprocess.Popen([*git, "rev-list", "--objects", "--filter=object:type=blob",
                                     "--filter-provided-objects", "--end-of-options", *tips],
                                    stdout=subprocess.PIPE, stderr=errors)
            cat = subprocess.Popen([*git, "cat-file", "--batch=%(objectsize) %(rest)"],
                                   stdin=walk.stdout, stdout=subprocess.PIPE,
                                   stderr=subprocess.DEVNULL)
            walk.stdout.close()   # cat-file now owns the pipe; it ends when rev-list does
            complete = False
            try:
                yield from _blob_chunks(cat.stdout)
                complete = True
            finally:
                cat.stdout.close()
                for proc in (cat, walk):
                    if proc.poll() is None:
                        proc.kill()   # the consumer stopped early, or an object was missing
                    proc.wait()
                errors.seek(0)
                err = errors.read().decode("utf-8", "replace").strip()
        # With a commit-graph, rev-list says "error: Could not read <sha>" for a missing
        # commit and still exits 0, having listed less: its word alone is not enough.
        if not complete or walk.returncode != 0 or cat.returncode != 0 or _complaint(err):
            raise GriteError(f"git could not read every log object: "
                             f"{err.splitlines()[-1] if err else 'an object is missing'}")

    # -- config --------------------------------------------------------------

    def _config(self) -> list[tuple[str, str]]:
        """Every config entry git sees here (all scopes, includes followed), in git's order.

        One `git config --list` serves a command's every lookup; kept CONFIG_TTL seconds, so a
        long-running witness sees a change soon after it is made (and at once its own)."""
        now = time.monotonic()
        if self._config_read is None or now - self._config_read[0] > CONFIG_TTL:
            proc = self._git(["config", "--list", "-z"], check=False)
            entries = []
            for item in proc.stdout.decode("utf-8", "replace").split("\0"):
                if item:
                    key, _, value = item.partition("\n")
                    entries.append((key, value))
            self._config_read = (now, entries)
        return self._config_read[1]

    def config_get(self, key: str) -> str | None:
        values = self.config_get_all(key)
        return values[-1].strip() if values else None

    def config_bool(self, key: str, default: bool) -> bool:
        """A boolean setting in git's spellings; GriteError naming it for anything else."""
        value = self.config_get(key)
        if value is None:
            return default
        if value.lower() in ("true", "yes", "on", "1"):
            return True
        if value.lower() in ("false", "no", "off", "0"):
            return False
        from git_brat.errors import GriteError
        raise GriteError(f"{key} must be true or false, not {value!r}")

    def user_identity(self) -> tuple[str, str]:
        """The author identity git would use (config and GIT_AUTHOR_*), with fallbacks that never fail."""
        proc = run_git(["--git-dir", self.git_dir, "var", "GIT_AUTHOR_IDENT"], check=False)
        ident = proc.stdout.decode("utf-8", "replace").strip()
        if proc.returncode == 0 and "<" in ident:
            name, _, rest = ident.partition("<")
            email = rest.partition(">")[0]
            if name.strip():
                return name.strip(), email.strip() or f"{name.strip()}@localhost"
        name = os.environ.get("USER") or "unknown"
        return name, f"{name}@localhost"

    def current_branch(self) -> str | None:
        """The branch HEAD names in this checkout (None when detached)."""
        proc = run_git(["--git-dir", self.git_dir, "symbolic-ref", "-q", "--short", "HEAD"],
                       check=False)
        return proc.stdout.decode().strip() or None if proc.returncode == 0 else None

    def default_branch_candidates(self) -> list[str]:
        """Where work lands, most likely first: the remotes' HEAD (origin first), main or
        master if it exists, the checked-out branch, "main". Remote names are the remote's
        word: callers check them."""
        out = []
        for remote in sorted(self.remotes(), key=lambda r: r != "origin"):
            proc = self._git(["symbolic-ref", "-q", "--short", f"refs/remotes/{remote}/HEAD"],
                             check=False)
            name = proc.stdout.decode("utf-8", "replace").strip()
            if proc.returncode == 0 and name.startswith(f"{remote}/"):
                out.append(name[len(remote) + 1:])
        out += [n for n in ("main", "master") if self.read_ref(f"refs/heads/{n}".encode())]
        out += [self.current_branch() or "main", "main"]
        return out

    # -- remotes, hooks and transport (sync) ---------------------------------

    def _git(self, args: list[str], **kw) -> subprocess.CompletedProcess:
        return run_git(["--git-dir", self.git_dir, *args], **kw)

    def hooks_dir(self) -> str:
        """Where git looks for hooks (honours core.hooksPath, resolved as git resolves it)."""
        if self.config_get("core.hooksPath") is None and "GIT_COMMON_DIR" not in os.environ:
            return os.path.join(self.common_dir, "hooks")
        proc = run_git(["rev-parse", "--path-format=absolute", "--git-path", "hooks"],
                       cwd=self.toplevel() or self.git_dir)
        return proc.stdout.decode().strip()

    def remotes(self) -> list[str]:
        return self._git(["remote"]).stdout.decode().split()

    def tracked(self, paths: list[str]) -> set[str]:
        """Which of these work-tree paths (relative to the top) git tracks."""
        top = self.toplevel()
        if not top or not paths:
            return set()
        proc = run_git(["ls-files", "-z", "--", *paths], cwd=top, check=False)
        return {p for p in proc.stdout.decode("utf-8", "surrogateescape").split("\0") if p}

    def config_get_all(self, key: str) -> list[str]:
        want = _config_key(key)
        return [v for k, v in self._config() if k == want]

    def config_add(self, key: str, value: str) -> None:
        self._config_read = None
        self._git(["config", "--add", key, value])

    def config_unset_value(self, key: str, value: str) -> None:
        """Remove every `key = value` line (exact match), leaving other values of key alone."""
        self._config_read = None
        self._git(["config", "--fixed-value", "--unset-all", key, value], check=False)

    def fetch(self, remote: str, refspecs: list[str], env: dict, timeout: float | None = None,
              options: list[str] = (), keep_pack: bool = False) -> subprocess.CompletedProcess:
        """`git fetch` of exactly these refspecs (no tags, FETCH_HEAD left alone); never raises.

        options: more fetch options (--depth, --shallow-exclude); keep_pack: keep what arrives
        as the pack it came in (git would unpack a few objects loose, deflating each again:
        seconds for a snapshot's state blob of a few hundred MB).
        """
        config = ["-c", "fetch.unpackLimit=1"] if keep_pack else []
        # From the top of the work tree, as git itself runs: relative remote URLs resolve there.
        return _run_bounded(["git", "--git-dir", self.git_dir, *config, "fetch", "--no-tags",
                             "--no-write-fetch-head", *options, remote, *refspecs], env, timeout,
                            cwd=self.toplevel() or self.git_dir)

    def shallow_commits(self) -> list[str]:
        """Commits held without their parents (`shallow`: where a shallow fetch cut history)."""
        try:
            with open(os.path.join(self.common_dir, "shallow"), encoding="ascii") as f:
                return f.read().split()
        except FileNotFoundError:
            return []

    def push(self, dest: str, refspecs: list[str], env: dict,
             timeout: float | None = None) -> subprocess.CompletedProcess:
        """`git push` of exactly these refspecs, hooks skipped; never raises."""
        return _run_bounded(["git", "--git-dir", self.git_dir, "push", "--no-verify", "--porcelain",
                             dest, *refspecs], env, timeout, cwd=self.toplevel() or self.git_dir)

    def ref_lines(self, patterns: list[str]) -> str:
        """`git for-each-ref` as the hook shims run it: "<sha> <ref>" lines, sorted by ref."""
        proc = self._git(["for-each-ref", "--format=%(objectname) %(refname)", *patterns],
                         check=False)
        return proc.stdout.decode().strip()

    def unreachable(self, candidates: Iterable[str], tips: Iterable[str]) -> set[str]:
        """The candidate commits that no tip reaches (missing objects count as unreachable)."""
        cands = {c for c in candidates}
        present = [c for c in cands if self.has_object(c.encode())]
        if not present:
            return cands
        heads = [t for t in set(tips) if self.has_object(t.encode())]
        spec = "".join(f"{c}\n" for c in present) + "".join(f"^{t}\n" for t in heads)
        # A commit git cannot read (commit-graph: exit 0 all the same) only shortens the walk
        # from the tips, so more candidates look unreachable and are kept: the safe side.
        proc = self._git(["rev-list", "--stdin"], input=spec.encode())
        out = set(proc.stdout.decode().split())
        return (cands - set(present)) | (out & set(present))

    # -- lease locks (locks.py): one-blob record commits, ref mirrors, remote CAS ----------

    def config_matching(self, pattern: str) -> dict[str, str]:
        """Config keys matching a regex (git lower-cases section and key) -> last value; one call."""
        match = re.compile(pattern).search
        return {k: v for k, v in self._config() if match(k)}

    def write_record_commit(self, entry: bytes, payload: bytes, parent: bytes | None,
                            message: str, author: bytes, when: int) -> bytes:
        """A commit whose tree holds one blob `entry` (objects only, no ref change)."""
        return self.write_tree_commit({entry: payload}, [parent] if parent else [], message,
                                      author, when)

    def write_tree_commit(self, entries: dict[bytes, bytes], parents: list[bytes], message: str,
                          author: bytes, when: int) -> bytes:
        """A commit whose tree holds one blob per entry (objects only, no ref change)."""
        from dulwich.objects import Blob, Commit, Tree
        tree = Tree()
        objects = []
        for name, payload in sorted(entries.items()):
            blob = Blob.from_string(payload)
            tree.add(name, 0o100644, blob.id)
            objects.append(blob)
        commit = Commit()
        commit.tree = tree.id
        commit.parents = parents
        commit.author = commit.committer = author
        commit.author_time = commit.commit_time = when
        commit.author_timezone = commit.commit_timezone = 0
        commit.encoding = b"UTF-8"
        commit.message = safe_subject(message).encode("utf-8", "surrogateescape") + b"\n"
        # Loose objects (not a pack per append: thousands of tiny packs slow every lookup).
        for obj in (*objects, tree, commit):
            add_loose(self.repo.object_store, obj)
        if len(self._written) > 64:   # kept only until the ref update that follows
            self._written.clear()
        self._written[commit.id] = (*objects, tree, commit)
        return commit.id

    def reparent(self, sha: bytes, message: str) -> bytes:
        """A parentless commit with the tree, author and time of commit sha (objects only)."""
        from dulwich.objects import Commit
        old = self.repo.object_store[sha]
        commit = Commit()
        commit.tree, commit.parents = old.tree, []
        commit.author, commit.committer = old.author, old.committer
        commit.author_time = commit.commit_time = old.commit_time
        commit.author_timezone = commit.commit_timezone = 0
        commit.encoding = b"UTF-8"
        commit.message = safe_subject(message).encode("utf-8", "surrogateescape") + b"\n"
        add_loose(self.repo.object_store, commit)
        return commit.id

    def is_ancestor(self, old: str, new: str) -> bool:
        """Whether commit old is in new's history (in-process for a plain append, else git)."""
        if old == new:
            return True
        try:
            if old.encode() in self.repo.object_store[new.encode()].parents:
                return True
        except Exception:   # noqa: BLE001 - missing or unreadable: let git say
            pass
        proc = self._git(["merge-base", "--is-ancestor", "--end-of-options", old, new],
                         check=False)
        return proc.returncode == 0 and not _complaint(proc.stderr)

    def committed_file(self, path: str) -> bytes | None:
        """A file as HEAD has it (None: no HEAD, no such file, or unreadable); in-process."""
        from dulwich.object_store import tree_lookup_path
        try:
            head = self.repo.refs[b"HEAD"]
            store = self.repo.object_store
            _mode, sha = tree_lookup_path(store.__getitem__, store[head].tree, path.encode())
            return store[sha].as_raw_string()
        except Exception:   # noqa: BLE001 - unborn HEAD, absent path, damaged object
            return None

    def reflog(self, ref: bytes) -> list[tuple[str, str]]:
        """(new sha, message) of every entry in a ref's reflog, oldest first (read in-process)."""
        path = self.reflog_path(ref)
        try:
            with open(path, "rb") as f:
                lines = f.read().decode("utf-8", "replace").splitlines()
        except OSError:
            return []
        out = []
        for ln in lines:
            head, _, message = ln.partition("\t")
            parts = head.split(" ")
            if len(parts) >= 2 and len(parts[1]) in (40, 64):
                out.append((parts[1], message))
        return out

    def drop_broken_reflog_entries(self) -> None:
        """Drop reflog entries naming commits whose objects are gone (`git gc` trips on them)."""
        self._git(["reflog", "expire", "--stale-fix", "--expire=never",
                   "--expire-unreachable=never", "--all"], check=False)

    def confirm_written(self, commit: bytes) -> bool:
        """After a ref update: write again any object of `commit` that vanished meanwhile.

        `git gc --prune=now` (documented as unsafe while others write) can delete objects
        written a moment before the ref that makes them reachable. Objects are content-
        addressed, so writing them again repairs the log. True if any had to be rewritten.
        """
        objects = self._written.pop(commit, ())
        store = self.repo.object_store
        missing = [o for o in objects if not self.has_object(o.id)]
        for obj in missing:
            add_loose(store, obj)
        return bool(missing)

    def read_record(self, sha: bytes, entry: bytes) -> tuple[bytes, list[bytes]]:
        """(blob `entry` of commit sha, its parents), or raise CorruptObject."""
        from git_brat.errors import CorruptObject
        try:
            c = self.repo.object_store[sha]
            _mode, blob_sha = self.repo.object_store[c.tree][entry]
            return self.repo.object_store[blob_sha].as_raw_string(), list(c.parents)
        except Exception as exc:  # missing, truncated, not a commit, no such entry
            raise CorruptObject(sha.decode(), f"{entry.decode()} unreadable: "
                                              f"{exc or type(exc).__name__}") from exc

    def read_large_blob(self, sha: bytes, entry: bytes) -> bytes:
        """read_record's blob for one of many MB (a snapshot's state): git inflates it in half
        the time dulwich takes. Raise CorruptObject."""
        from git_brat.errors import CorruptObject
        proc = self._git(["cat-file", "blob", (sha + b":" + entry).decode()], check=False)
        if proc.returncode != 0:
            msg = proc.stderr.decode("utf-8", "replace").strip().splitlines()
            raise CorruptObject(sha.decode(), f"{entry.decode()} unreadable: "
                                              f"{msg[-1] if msg else 'exit ' + str(proc.returncode)}")
        return proc.stdout

    def has_entry(self, commit: str, entry: str) -> bool:
        """Whether a commit's tree entry is here (asked of git: a pack fetched by another
        process since this Store was opened is seen)."""
        return self._git(["cat-file", "-e", f"{commit}:{entry}"], check=False).returncode == 0

    def ls_remote(self, remote: str, patterns: list[str], timeout: float) -> dict[bytes, bytes]:
        """Refs on the remote matching patterns -> sha; raise RemoteUnreachable."""
        proc = self._remote(["ls-remote", remote, *patterns], remote, timeout)
        out = {}
        for line in proc.stdout.splitlines():
            sha, _, name = line.partition(b"\t")
            out[name] = sha
        return out

    def fetch_objects(self, remote: str, refs: list[str], timeout: float) -> None:
        """Bring the objects of these remote refs in, changing no local ref; raise RemoteUnreachable."""
        self._remote(["fetch", "--no-tags", "--no-write-fetch-head", "--no-recurse-submodules",
                      "--no-auto-maintenance", "--quiet", remote, *refs], remote, timeout)

    def push_lease(self, remote: str, new: bytes, ref: bytes, expected: bytes | None,
                   timeout: float) -> tuple[bool, str]:
        """Push new to ref only if the remote ref is `expected` (None: absent): (won, reason).

        The remote's receive-pack checks the old value under its ref lock, so of N racing
        pushes with the same expectation exactly one succeeds. Raises RemoteUnreachable.
        """
        lease = f"--force-with-lease={ref.decode()}:{(expected or b'').decode()}"
        proc = self._remote(["push", "--porcelain", "--no-verify", "--no-follow-tags",
                             "--no-recurse-submodules", lease, remote,
                             f"{new.decode()}:{ref.decode()}"], remote, timeout, check=False)
        for line in proc.stdout.decode("utf-8", "replace").splitlines():
            flag, _, rest = line.partition("\t")
            if rest.split("\t")[0].endswith(":" + ref.decode()):
                reason = rest.rpartition("(")[2].rstrip(")") if "(" in rest else rest
                return flag in (" ", "*", "+", "="), reason.strip()
        raise RemoteUnreachable(remote, _first_error(proc, "push"))

    def _remote(self, args: list[str], remote: str, timeout: float,
                check: bool = True) -> subprocess.CompletedProcess:
        # No prompts; and no grite hooks: a lease push is not a sync (its tracking refs need no import).
        env = dict(os.environ, GIT_TERMINAL_PROMPT="0", GRITE_SKIP_HOOKS="1")
        # From the top of the work tree, as git runs: relative remote paths resolve there.
        proc = _run_bounded(["git", "--git-dir", self.git_dir, *args], env, timeout,
                            cwd=self.toplevel() or self.git_dir)
        if check and proc.returncode != 0:
            raise RemoteUnreachable(remote, _first_error(proc, args[0]))
        return proc


    # -- work trees and branches (the witness) --------------------------------

    def _in_tree(self, cwd: str, args: list[str], env: dict | None = None,
                 check: bool = True) -> subprocess.CompletedProcess:
        """git run inside a work tree (an agent's), with env adding to the process's own."""
        full = None if env is None else {**_clean_env(), **env}
        return run_git(args, cwd=cwd, env=full if full is not None else _clean_env(), check=check)

    def worktree_add(self, path: str, branch: str, start: str | None) -> None:
        """A linked work tree at path on `branch`; a new branch from `start` when given."""
        where = self.toplevel() or self.git_dir
        args = ["worktree", "add", "--quiet"]
        args += ["-b", branch, path, start] if start else [path, branch]
        self._in_tree(where, args)

    def worktree_remove(self, path: str) -> None:
        """Remove a linked work tree (forced: its work has been committed); the branch stays."""
        worktree_remove(self, path)

    def worktrees(self) -> dict[str, str]:
        """Path of every linked work tree -> its branch ("" when detached)."""
        return {w["worktree"]: w.get("branch", "").removeprefix("refs/heads/")
                for w in worktrees(self)}

    def commit_all(self, cwd: str, message: str, env: dict, skip: list[str] = ()) -> str | None:
        """Commit everything uncommitted in the work tree at cwd, but paths matching `skip`
        (globs at the top); the new sha, or None."""
        spec = [".", *(f":(exclude,glob){g}" for p in skip
                       for g in (p.rstrip("/"), p.rstrip("/") + "/**"))] if skip else []
        st = self._in_tree(cwd, ["status", "--porcelain", "--untracked-files=all", "--", *spec], env)
        if not st.stdout.strip():
            return None   # the common case: the agent committed its work itself
        self._in_tree(cwd, ["add", "-A", "--", *spec], env)
        if self._in_tree(cwd, ["diff", "--cached", "--quiet"], env, check=False).returncode == 0:
            return None   # only ignored or unchanged files
        self._in_tree(cwd, ["commit", "-q", "--no-verify", "-m", message], env)
        return self._in_tree(cwd, ["rev-parse", "HEAD"], env).stdout.decode().strip()

    def branch_tip(self, branch: str) -> str | None:
        """The commit refs/heads/<branch> names, read in-process (None: no such branch)."""
        sha = self.read_ref(f"refs/heads/{branch}".encode())
        return sha.decode() if sha else None

    def resolve_commit(self, rev: str) -> str | None:
        proc = self._git(["rev-parse", "-q", "--verify", f"{rev}^{{commit}}"], check=False)
        return proc.stdout.decode().strip() or None if proc.returncode == 0 else None

    def merge_base(self, a: str, b: str) -> str | None:
        return merge_base(self, a, b)

    def count_commits(self, base: str, head: str) -> int:
        """Commits reachable from head and not from base."""
        proc = self._git(["rev-list", "--count", f"{base}..{head}"], check=False)
        return int(proc.stdout.decode().strip() or 0) if proc.returncode == 0 else 0

    def head_state(self) -> tuple[str, str]:
        """(HEAD's commit, `git status --porcelain`) of the current checkout: what a user sees."""
        top = self.toplevel()
        if not top:
            return "", ""
        head = run_git(["rev-parse", "-q", "--verify", "HEAD"], cwd=top, check=False)
        st = run_git(["status", "--porcelain"], cwd=top, check=False)
        return head.stdout.decode().strip(), st.stdout.decode("utf-8", "replace")


def _complaint(stderr: bytes | str) -> str | None:
    """The first `error:`/`fatal:` line git printed, if any.

    Some reads exit 0 having come up short (rev-list over a commit-graph skips a commit it
    cannot read, saying so only on stderr), so a walk is trusted only when git stayed quiet.
    """
    text = stderr.decode("utf-8", "replace") if isinstance(stderr, bytes) else stderr
    for ln in text.splitlines():
        if ln.startswith(("error: ", "fatal: ")):
            return ln
    return None


def _complained(stderr: bytes, what: str) -> None:
    line = _complaint(stderr)
    if line:
        raise GriteError(f"git {what} could not read everything: {line}")


def _listdir(path: str) -> list[str]:
    try:
        return os.listdir(path)
    except OSError:
        return []


def _older_than(paths: Iterable[str], max_age: float) -> list[tuple[str, float]]:
    """(path, age) of the files older than max_age seconds (gone ones skipped), sorted."""
    now, found = time.time(), []
    for path in paths:
        try:
            age = now - os.stat(path).st_mtime
        except FileNotFoundError:
            continue
        if age >= max_age:
            found.append((path, age))
    return sorted(found)


def _first_error(proc: subprocess.CompletedProcess, what: str) -> str:
    """git's own first fatal/error line (what it failed at), else the first line it printed."""
    lines = [ln.strip() for ln in proc.stderr.decode("utf-8", "replace").splitlines() if ln.strip()]
    for ln in lines:
        if ln.startswith(("fatal: ", "error: ")):
            return ln.split(": ", 1)[1]
    return lines[0] if lines else f"git {what} exited {proc.returncode}"


def git_error(proc: subprocess.CompletedProcess) -> str:
    """The line of git's stderr that says what went wrong."""
    lines = [ln.strip() for ln in proc.stderr.decode("utf-8", "replace").splitlines() if ln.strip()]
    for ln in lines:
        if ln.startswith(("fatal:", "error:")):
            return ln.split(":", 1)[1].strip()
    return lines[-1] if lines else f"git exited {proc.returncode}"


def _parse_batch_output(out, commits: list[str]) -> Generator[tuple[str, memoryview | None],
                                                               None, int]:
    """Parse `git cat-file --batch='%(objecttype) %(objectsize)'` output as it arrives.

    Record i belongs to commits[i]. Reads large immutable chunks and yields zero-copy views
    into them (decoders take any buffer), so per-record cost stays a few attribute lookups.
    Returns how many records were complete before the output ended.
    """
    data, pos = b"", 0

    def more(need: int = 0) -> bool:
        """Append at least `need` more bytes (or one chunk) after pos; False at end of output."""
        nonlocal data, pos
        chunk = out.read(need) if need > (1 << 20) else out.read1(1 << 20)
        if not chunk:
            return False
        data, pos = data[pos:] + chunk, 0
        return True

    for n, c in enumerate(commits):
        eol = data.find(b"\n", pos)
        while eol < 0:
            if not more():
                return n
            eol = data.find(b"\n", pos)
        header = data[pos:eol]
        pos = eol + 1
        if header.endswith((b" missing", b" ambiguous")):   # no content follows
            yield c, None
            continue
        kind, _, size_text = header.partition(b" ")
        if not size_text.isdigit():
            return n   # not a header git writes: stop; the caller restarts after this record
        size = int(size_text)
        while len(data) - pos < size + 1:
            if not more(size + 1 - (len(data) - pos)):
                return n   # cut short: git died inside this object
        # `<commit>:events` that is a tree (or anything but a blob) is unreadable as a batch,
        # but its content is still there to step over.
        yield c, memoryview(data)[pos:pos + size] if kind == b"blob" else None
        pos += size + 1
    return len(commits)


def _blob_chunks(out) -> Iterator[list[memoryview]]:
    """Parse `git cat-file --batch='%(objectsize) %(rest)'` output (rest: the blob's path in
    its tree) into lists of zero-copy blob views, one list per read from the pipe.

    Raises GriteError at a header that is not "<size> events" ("<id> missing", or a tree
    entry that is not an events blob).
    """
    data, pos = b"", 0
    while True:
        chunk = out.read1(1 << 20)
        if not chunk:
            return
        data, pos = data[pos:] + chunk, 0
        view, views, find, n = memoryview(data), [], data.find, len(data)
        while True:
            eol = find(b"\n", pos)
            if eol < 0:
                break
            header = data[pos:eol]
            size, _, name = header.partition(b" ")
            if name != b"events" or not size.isdigit():
                if views:
                    yield views
                raise GriteError(f"git cat-file: {header.decode('utf-8', 'replace')}")
            end = eol + 1 + int(size)
            if end >= n:   # this blob (or its newline) is still in the pipe
                if end - pos > (1 << 20):   # a blob bigger than a chunk: read the rest at once
                    rest = out.read(end + 1 - n)
                    data, n = data + rest, n + len(rest)
                    view, find = memoryview(data), data.find
                    if end >= n:
                        break
                else:
                    break
            views.append(view[eol + 1:end])
            pos = end + 1
        if views:
            yield views


def _run_bounded(argv: list[str], env: dict, timeout: float | None,
                 cwd: str | None = None) -> subprocess.CompletedProcess:
    """Run git for transport; a timeout or a missing binary becomes a failed result, not a raise."""
    try:
        return subprocess.run(argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, timeout=timeout, cwd=cwd)
    except subprocess.TimeoutExpired:
        return subprocess.CompletedProcess(argv, 124, b"", f"timed out after {timeout:.0f}s".encode())
    except OSError as exc:
        return subprocess.CompletedProcess(argv, 127, b"", str(exc).encode())


def _clean_env() -> dict:
    """This process's environment without the variables that pin git to one repository:
    a command run inside an agent's work tree must find that work tree."""
    return {k: v for k, v in os.environ.items() if k not in _WT_ENV_DROP}


# With any of these set, only git itself knows where the repository is.
_GIT_ENV = {"GIT_DIR", "GIT_COMMON_DIR", "GIT_WORK_TREE", "GIT_CEILING_DIRECTORIES",
            "GIT_DISCOVERY_ACROSS_FILESYSTEM", "GIT_OBJECT_DIRECTORY"}


def _config_key(key: str) -> str:
    """A key as `git config --list` prints it: section and name lower-cased, subsection kept."""
    section, _, rest = key.partition(".")
    sub, _, name = rest.rpartition(".")
    return f"{section.lower()}.{sub + '.' if sub else ''}{name.lower()}"


def _stat_key(st: os.stat_result) -> tuple:
    """Identity of a file's contents as git checks it (a replaced file has a new inode)."""
    return (st.st_ino, st.st_dev, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


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


class LogCommit:
    """One commit of an event log, as read from the object store."""

    __slots__ = ("sha", "parents", "tree", "message", "author", "time")

    def __init__(self, sha, parents, tree, message, author, time):
        self.sha, self.parents, self.tree = sha, parents, tree
        self.message, self.author, self.time = message, author, time


# -- merges and work trees (refinery) ------------------------------------------------------
# Everything the refinery and the deacon ask of git. Work-tree commands run with no hooks at
# all (core.hooksPath=/dev/null, GRITE_SKIP_HOOKS) and without the caller's GIT_DIR & co, so a
# refinery started from a hook never re-enters hooks or writes to the wrong repository.

_WT_ENV_DROP = ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_COMMON_DIR", "GIT_PREFIX",
                "GIT_OBJECT_DIRECTORY", "GIT_ALTERNATE_OBJECT_DIRECTORIES", "GIT_QUARANTINE_PATH",
                "GIT_CEILING_DIRECTORIES", "GIT_DISCOVERY_ACROSS_FILESYSTEM", "GIT_REFLOG_ACTION")
REFINERY_IDENT = ("git-brat refinery", "refinery@git-brat.invalid")


def clean_env(extra: dict | None = None) -> dict:
    """The environment for git (and the user's check) inside a refinery work tree."""
    env = _clean_env()
    env.update({"GRITE_SKIP_HOOKS": "1", "GIT_TERMINAL_PROMPT": "0", "GIT_EDITOR": "true",
                "GIT_MERGE_AUTOEDIT": "no"})
    env.update(extra or {})
    return env


class GitResult:
    """A finished git command: ok, stdout text, stderr text."""

    def __init__(self, proc: subprocess.CompletedProcess):
        self.ok = proc.returncode == 0
        self.code = proc.returncode
        self.out = proc.stdout.decode("utf-8", "replace")
        self.err = proc.stderr.decode("utf-8", "replace")

    def error(self) -> str:
        lines = [ln.strip() for ln in (self.err or self.out).splitlines() if ln.strip()]
        for ln in lines:
            if ln.startswith(("fatal: ", "error: ")):
                return ln.split(": ", 1)[1]
        return lines[-1] if lines else f"git exited {self.code}"


def wt_git(cwd: str, args: list[str], check: bool = False, ident: bool = False,
           timeout: float | None = 600) -> GitResult:
    """git in directory cwd (a work tree or a git dir), hooks off; ident: fall back to the
    refinery's own committer identity when git has none (a hub run by a daemon)."""
    env = clean_env()
    if ident:
        probe = subprocess.run(["git", "var", "GIT_COMMITTER_IDENT"], cwd=cwd, env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if probe.returncode != 0:
            env.update({"GIT_COMMITTER_NAME": REFINERY_IDENT[0],
                        "GIT_COMMITTER_EMAIL": REFINERY_IDENT[1],
                        "GIT_AUTHOR_NAME": REFINERY_IDENT[0], "GIT_AUTHOR_EMAIL": REFINERY_IDENT[1]})
    res = GitResult(_run_bounded(["git", "-c", "core.hooksPath=/dev/null", *args], env, timeout,
                                 cwd=cwd))
    if check and not res.ok:
        raise GriteError(f"git {args[0]} failed: {res.error()}")
    return res


def rev(store: Store, name: str) -> str | None:
    """The commit a revision names, or None."""
    res = wt_git(store.common_dir, ["rev-parse", "-q", "--verify", "--end-of-options",
                                    name + "^{commit}"])
    return res.out.strip() or None if res.ok else None


def merge_base(store: Store, a: str, b: str) -> str | None:
    res = wt_git(store.common_dir, ["merge-base", a, b])
    return res.out.strip() or None if res.ok else None


def is_ancestor(store: Store, a: str, b: str) -> bool:
    return wt_git(store.common_dir, ["merge-base", "--is-ancestor", a, b]).ok


def commits_between(store: Store, base: str, head: str) -> list[str]:
    """Commits in head and not in base, oldest first."""
    res = wt_git(store.common_dir, ["rev-list", "--reverse", head, f"^{base}"], check=True)
    return res.out.split()


def worktrees(store: Store) -> list[dict[str, str]]:
    """`git worktree list --porcelain`: [{"worktree": path, "HEAD": sha, "branch": ref}, ...]."""
    res = wt_git(store.common_dir, ["worktree", "list", "--porcelain"], check=True)
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


def worktree_add(store: Store, path: str, commit: str) -> None:
    wt_git(store.common_dir, ["worktree", "prune"])
    wt_git(store.common_dir, ["worktree", "add", "--detach", "--force", path, commit], check=True)


def worktree_remove(store: Store, path: str) -> bool:
    res = wt_git(store.common_dir, ["worktree", "remove", "--force", "--force", path])
    wt_git(store.common_dir, ["worktree", "prune"])
    return res.ok


def worktree_dirty(path: str) -> bool:
    """Uncommitted changes or untracked files in a work tree (ignored files do not count)."""
    res = wt_git(path, ["status", "--porcelain", "--untracked-files=normal"])
    return not res.ok or bool(res.out.strip())


def worktree_reset(path: str, commit: str) -> None:
    """Detach the work tree at commit, every change and untracked file gone (not ignored ones)."""
    gd = _worktree_git_dir(path)
    for marker, args in (("MERGE_HEAD", ["merge", "--abort"]), ("rebase-merge", ["rebase", "--abort"]),
                         ("rebase-apply", ["rebase", "--abort"]),
                         ("CHERRY_PICK_HEAD", ["cherry-pick", "--abort"])):
        if gd is None or os.path.exists(os.path.join(gd, marker)):
            wt_git(path, args)   # left over from a killed run
    wt_git(path, ["checkout", "-q", "--detach", "-f", commit], check=True)
    wt_git(path, ["clean", "-q", "-ffd"], check=True)


def _worktree_git_dir(path: str) -> str | None:
    """The private git dir of a linked work tree (what its `.git` file points at)."""
    try:
        with open(os.path.join(path, ".git")) as f:
            line = f.read().strip()
    except OSError:
        return None
    if not line.startswith("gitdir: "):
        return None
    return os.path.normpath(os.path.join(path, line[8:]))


def conflicted_files(path: str) -> list[str]:
    res = wt_git(path, ["diff", "--name-only", "--diff-filter=U", "-z"])
    return sorted({p for p in res.out.split("\0") if p})


def head_of(path: str) -> str:
    return wt_git(path, ["rev-parse", "HEAD"], check=True).out.strip()


def apply_rebase(path: str, head: str) -> tuple[bool, list[str]]:
    """Replay head's own commits onto the work tree's HEAD: (landed, conflicting files)."""
    onto = head_of(path)
    base = wt_git(path, ["merge-base", onto, head], check=True).out.strip()
    if base == head:
        return True, []                        # nothing new: already in
    res = wt_git(path, ["rebase", "-q", "--onto", onto, base, head], ident=True)
    if res.ok:
        return True, []
    files = conflicted_files(path) or ["(unknown: " + res.error() + ")"]
    wt_git(path, ["rebase", "--abort"])
    wt_git(path, ["checkout", "--detach", "-f", onto])
    return False, files


def apply_squash(path: str, head: str, message: str) -> tuple[bool, list[str]]:
    onto = head_of(path)
    res = wt_git(path, ["merge", "--squash", "-q", head], ident=True)
    if not res.ok:
        files = conflicted_files(path) or ["(unknown: " + res.error() + ")"]
        wt_git(path, ["reset", "-q", "--hard", onto])
        return False, files
    if not wt_git(path, ["diff", "--cached", "--quiet"]).ok:
        wt_git(path, ["commit", "-q", "--no-verify", "-m", message], check=True, ident=True)
    return True, []


def apply_merge(path: str, head: str, message: str) -> tuple[bool, list[str]]:
    onto = head_of(path)
    res = wt_git(path, ["merge", "-q", "--no-ff", "--no-verify", "-m", message, head], ident=True)
    if not res.ok:
        files = conflicted_files(path) or ["(unknown: " + res.error() + ")"]
        wt_git(path, ["merge", "--abort"])
        wt_git(path, ["reset", "-q", "--hard", onto])
        return False, files
    return True, []


def ff_checkout(path: str, new: str) -> GitResult:
    """Bring a checkout of the target forward exactly as `git merge --ff-only` does (local
    edits carried; refused, changing nothing, if they collide)."""
    return wt_git(path, ["merge", "--ff-only", "-q", new])


def push_branch(store: Store, remote: str, new: str, branch: str,
                timeout: float) -> tuple[bool, str]:
    """Push new to the remote's branch (fast-forward only): (ok, git's reason when not)."""
    res = wt_git(store.toplevel() or store.git_dir,
                 ["--git-dir", store.git_dir, "push", "--porcelain", "--no-verify", remote,
                  f"{new}:refs/heads/{branch}"], timeout=timeout)
    return res.ok, "" if res.ok else res.error()


def fetch_branch(store: Store, remote: str, branch: str, timeout: float) -> str | None:
    """Fetch the remote's branch into refs/remotes/<remote>/<branch>; its tip, or None."""
    res = wt_git(store.toplevel() or store.git_dir,
                 ["--git-dir", store.git_dir, "fetch", "-q", "--no-tags", "--no-write-fetch-head",
                  remote, f"+refs/heads/{branch}:refs/remotes/{remote}/{branch}"], timeout=timeout)
    return rev(store, f"refs/remotes/{remote}/{branch}") if res.ok else None


def remote_url(store: Store, remote: str) -> str | None:
    return store.config_get(f"remote.{remote}.url")


def add_loose(store, obj) -> None:
    """Write obj as a loose object the way git does: a temporary file, then link into place.

    dulwich's add_object takes `<object>.lock`, so two writers of the same content (two
    imports of one file) collide and one fails, and a writer killed mid-write leaves a lock
    that blocks that object for good. Content addressing makes a plain link race-free.
    """
    hexsha = obj.id.decode("ascii")
    folder = os.path.join(store.path, hexsha[:2])
    path = os.path.join(folder, hexsha[2:])
    try:
        os.utime(path, None)   # already there: freshen it so an age-based prune spares it
        return
    except FileNotFoundError:
        pass
    except PermissionError:
        pass                   # another user's object in a shared repository: rewrite below
    from git_brat.files import ensure_dir
    ensure_dir(folder)
    import tempfile
    fd, tmp = tempfile.mkstemp(prefix="tmp_obj_", dir=folder)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(obj.as_legacy_object(compression_level=store.loose_compression_level))
            if getattr(store, "fsync_object_files", False):
                f.flush()
                os.fsync(f.fileno())
        os.chmod(tmp, 0o444)
        try:
            os.link(tmp, path)
        except FileExistsError:
            pass               # the same bytes, written by another process meanwhile
        except OSError:
            os.replace(tmp, path)   # a file system without hard links
            return
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
