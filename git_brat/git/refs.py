"""Refs: loose, packed and symbolic reads in-process, compare-and-swap updates, reflogs, locks."""

from __future__ import annotations

import os
import re
import time
from typing import Callable

from git_brat.errors import RefLocked
from git_brat.git import run as git
from git_brat.git.objects import older_than, safe_subject
from git_brat.git.packedrefs import PackedRefs

ZERO = b"0" * 40
STALE_REF_LOCK = 5.0   # seconds: a grite ref's .lock this old was left by a killed writer
_SHA = re.compile(rb"[0-9a-f]{40}([0-9a-f]{24})?")


class Refs:
    """The refs of one repository (its common dir); `open_repo()` gives the dulwich Repo,
    `committer()` the identity a reflog line names (None: dulwich decides)."""

    def __init__(self, git_dir: str, common_dir: str, open_repo: Callable,
                 committer: Callable[[], bytes | None]):
        self.git_dir = git_dir
        self.common_dir = common_dir
        self._open = open_repo
        self._committer = committer
        self._packed: PackedRefs | None = None

    # -- reads ---------------------------------------------------------------

    def read(self, name: bytes) -> bytes | None:
        try:
            return self._open().refs[name]
        except KeyError:
            return None

    def branch_tip(self, branch: str) -> str | None:
        """The commit refs/heads/<branch> names, read in-process (None: no such branch)."""
        sha = self.read(f"refs/heads/{branch}".encode())
        return sha.decode() if sha else None

    def under(self, prefix: bytes) -> dict[bytes, bytes]:
        """Full ref name -> sha for every ref below prefix (loose and packed).

        Read as git reads them, loose first (so a concurrent pack-refs, which writes
        packed-refs before deleting the loose files, can never hide a ref), in one pass over
        each: a year of lease refs must not cost a lookup each on every command.
        """
        loose = self.loose_under(prefix)
        out = self.packed().under(prefix)
        out.update(loose)
        return out

    def loose_under(self, prefix: bytes, prune: bytes | None = None) -> dict[bytes, bytes]:
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
                return self.packed().get(target)
            if not data.startswith(b"ref: "):
                return data
            target = data[5:].strip()
        return None

    def packed(self) -> PackedRefs:
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

    def hand_packed_refs_to(self, refs) -> None:
        """Make dulwich use packed(): its own parse checks every name of the file, and after
        `git gc` packs a year of lease refs that costs each write ~1 s.

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
                packed = self.packed()
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

    def lines(self, patterns: list[str]) -> str:
        """`git for-each-ref` as the hook shims run it: "<sha> <ref>" lines, sorted by ref."""
        res = git.run(["--git-dir", self.git_dir, "for-each-ref",
                       "--format=%(objectname) %(refname)", "--end-of-options", *patterns])
        return res.out.strip()

    # -- updates -------------------------------------------------------------

    def cas(self, name: bytes, old: bytes | None, new: bytes, message: bytes = b"") -> bool:
        """Compare-and-swap a ref: True if it moved from old (None: absent) to new.

        Raises RefLocked when another writer holds the ref's .lock file.
        """
        from dulwich.file import FileLocked
        refs = self._open().refs
        if message:   # the reflog line: the same rule as commit subjects
            message = safe_subject(message.decode("utf-8", "surrogateescape")).encode(
                "utf-8", "surrogateescape")
        who = self._committer() if message else None
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
                raise RefLocked(name.decode(), self.lock_path(name)) from exc
            except FileExistsError:
                # That race all the same (a directory removed and made again meanwhile): the
                # ref was left as it was, so the swap is simply tried again.
                races += 1
                if races > 3:
                    raise

    def delete_if(self, name: bytes, old: bytes) -> bool:
        from dulwich.file import FileLocked
        try:
            return self._open().refs.remove_if_equals(name, old)
        except FileLocked as exc:
            raise RefLocked(name.decode(), self.lock_path(name)) from exc

    # -- reflogs -------------------------------------------------------------

    def reflog_path(self, ref: bytes) -> str:
        """Where git (and dulwich) keep a shared ref's reflog."""
        return os.path.join(self.common_dir, "logs", ref.decode())

    def reflog(self, ref: bytes) -> list[tuple[str, str]]:
        """(new sha, message) of every entry in a ref's reflog, oldest first (read in-process)."""
        try:
            with open(self.reflog_path(ref), "rb") as f:
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
        git.run(["--git-dir", self.git_dir, "reflog", "expire", "--stale-fix", "--expire=never",
                 "--expire-unreachable=never", "--all"])

    # -- lock files ----------------------------------------------------------

    def lock_path(self, name: bytes) -> str:
        return os.path.join(self.common_dir, name.decode()) + ".lock"

    def stale_locks(self, max_age: float) -> list[tuple[str, float]]:
        """`.lock` files under refs/grite older than max_age seconds: left by a killed writer."""
        root = os.path.join(self.common_dir, "refs", "grite")
        return older_than((os.path.join(d, fn) for d, _dirs, files in os.walk(root)
                           for fn in files if fn.endswith(".lock")), max_age)

    def _break_stale_lock(self, name: bytes) -> bool:
        """Remove a grite ref's .lock left by a writer that was killed mid-update.

        Writers hold these locks for the microseconds of one rename; one older than
        STALE_REF_LOCK seconds has no writer left, and would otherwise stop every append.
        """
        if not name.startswith(b"refs/grite/"):
            return False
        path = self.lock_path(name)
        try:
            if time.time() - os.stat(path).st_mtime < STALE_REF_LOCK:
                return False
            os.unlink(path)
            return True
        except FileNotFoundError:
            return True    # gone meanwhile: try again
        except OSError:
            return False


def _ref_file(path: str) -> bytes | None:
    """A loose ref file's content, stripped; None if there is no such file."""
    try:
        with open(path, "rb") as f:
            return f.read().strip()
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        return None


def _stat_key(st: os.stat_result) -> tuple:
    """Identity of a file's contents as git checks it (a replaced file has a new inode)."""
    return (st.st_ino, st.st_dev, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
