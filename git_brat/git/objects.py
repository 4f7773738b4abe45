"""The object store: commits written and read in-process (dulwich), and history questions for git."""

from __future__ import annotations

import os
import re
import time
from typing import Callable, Iterable

from git_brat.errors import CorruptObject
from git_brat.git import run as git

# What a commit subject (and a reflog line) must never carry: control characters (they drive
# the terminal of whoever runs `git log`), bidi overrides and zero-width characters (they make
# text read differently from what it is).
_HIDDEN = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200b-\u200f\u202a-\u202e\u2060-\u2064"
                     "\u2066-\u2069\ufeff]")


SHA_RE = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")


def safe_subject(text: str) -> str:
    """One line with every hidden or controlling character shown as an escape (\\x1b, \\u202e)."""
    def esc(m: re.Match) -> str:
        c = ord(m.group(0))
        return f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}"
    return _HIDDEN.sub(esc, text)


class CommitInfo:
    """One commit as read from the object store."""

    __slots__ = ("sha", "parents", "tree", "message", "author", "time")

    def __init__(self, sha, parents, tree, message, author, time):
        self.sha, self.parents, self.tree = sha, parents, tree
        self.message, self.author, self.time = message, author, time


class Objects:
    """Writes and reads of the repository's objects; `open_repo()` gives the dulwich Repo."""

    def __init__(self, git_dir: str, common_dir: str, open_repo: Callable):
        self.git_dir = git_dir
        self.common_dir = common_dir
        self._open = open_repo
        self._written: dict[bytes, tuple] = {}   # commit -> objects, until its ref update

    def _git(self, args: list[str], **kw) -> git.Result:
        return git.run(["--git-dir", self.git_dir, *args], **kw)

    # -- writing -------------------------------------------------------------

    def write_record_commit(self, entry: bytes, payload: bytes, parent: bytes | None,
                            message: str, author: bytes, when: int, body: str = "") -> bytes:
        """A commit whose tree holds one blob `entry` (objects only, no ref change)."""
        return self.write_tree_commit({entry: payload}, [parent] if parent else [], message,
                                      author, when, body)

    def write_tree_commit(self, entries: dict[bytes, bytes], parents: list[bytes], message: str,
                          author: bytes, when: int, body: str = "") -> bytes:
        """A commit whose tree holds one blob per entry (objects only, no ref change); `body`:
        lines after the subject and a blank line (each shown safe, like the subject)."""
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
        text = safe_subject(message) + "\n"
        if body:
            text += "\n" + "".join(safe_subject(line) + "\n" for line in body.splitlines())
        commit.message = text.encode("utf-8", "surrogateescape")
        # Loose objects (not a pack per append: thousands of tiny packs slow every lookup).
        store = self._open().object_store
        for obj in (*objects, tree, commit):
            add_loose(store, obj)
        if len(self._written) > 64:   # kept only until the ref update that follows
            self._written.clear()
        self._written[commit.id] = (*objects, tree, commit)
        return commit.id

    def reparent(self, sha: bytes, message: str) -> bytes:
        """A parentless commit with the tree, author and time of commit sha (objects only)."""
        from dulwich.objects import Commit
        store = self._open().object_store
        old = store[sha]
        commit = Commit()
        commit.tree, commit.parents = old.tree, []
        commit.author, commit.committer = old.author, old.committer
        commit.author_time = commit.commit_time = old.commit_time
        commit.author_timezone = commit.commit_timezone = 0
        commit.encoding = b"UTF-8"
        commit.message = safe_subject(message).encode("utf-8", "surrogateescape") + b"\n"
        add_loose(store, commit)
        return commit.id

    def confirm_written(self, commit: bytes) -> bool:
        """After a ref update: write again any object of `commit` that vanished meanwhile.

        `git gc --prune=now` (documented as unsafe while others write) can delete objects
        written a moment before the ref that makes them reachable. Objects are content-
        addressed, so writing them again repairs the log. True if any had to be rewritten.
        """
        objects = self._written.pop(commit, ())
        store = self._open().object_store
        missing = [o for o in objects if not self.has_object(o.id)]
        for obj in missing:
            add_loose(store, obj)
        return bool(missing)

    # -- reading -------------------------------------------------------------

    def read_commit(self, sha: bytes) -> CommitInfo:
        """(parents, tree sha, message, author, time) of a commit, or raise CorruptObject."""
        try:
            c = self._open().object_store[sha]
            return CommitInfo(sha, list(c.parents), c.tree, c.message.decode("utf-8", "replace"),
                              c.author.decode("utf-8", "replace"), c.commit_time)
        except Exception as exc:  # missing, truncated or not a commit
            raise CorruptObject(sha.decode(), str(exc) or type(exc).__name__) from exc

    def tree_blob(self, tree: bytes, entry: bytes) -> bytes:
        """The blob `entry` of a tree; raises whatever dulwich raises when it is unreadable."""
        store = self._open().object_store
        _mode, blob_sha = store[tree][entry]
        return store[blob_sha].as_raw_string()

    def read_record(self, sha: bytes, entry: bytes) -> tuple[bytes, list[bytes]]:
        """(blob `entry` of commit sha, its parents), or raise CorruptObject."""
        try:
            c = self._open().object_store[sha]
            return self.tree_blob(c.tree, entry), list(c.parents)
        except Exception as exc:  # missing, truncated, not a commit, no such entry
            raise CorruptObject(sha.decode(), f"{entry.decode()} unreadable: "
                                              f"{exc or type(exc).__name__}") from exc

    def read_large_blob(self, sha: bytes, entry: bytes) -> bytes:
        """read_record's blob for one of many MB (a snapshot's state): git inflates it in half
        the time dulwich takes. Raise CorruptObject."""
        res = self._git(["cat-file", "blob", "--end-of-options", (sha + b":" + entry).decode()])
        if not res.ok:
            raise CorruptObject(sha.decode(), f"{entry.decode()} unreadable: {res.error_line()}")
        return res.stdout

    def committed_file(self, path: str) -> bytes | None:
        """A file as HEAD has it (None: no HEAD, no such file, or unreadable); in-process."""
        from dulwich.object_store import tree_lookup_path
        try:
            repo = self._open()
            store = repo.object_store
            head = repo.refs[b"HEAD"]
            _mode, sha = tree_lookup_path(store.__getitem__, store[head].tree, path.encode())
            return store[sha].as_raw_string()
        except Exception:   # noqa: BLE001 - unborn HEAD, absent path, damaged object
            return None

    def tree_files(self, commit: str, names: Iterable[str]) -> list[tuple[str, str, str]]:
        """(mode, blob id, path) of every file a commit holds at or under the paths given
        (literal, from the tree's top), read from its tree in-process (never a work tree:
        nothing there is followed or run). A symlink is listed with mode 120000, its blob the
        link's text; a submodule is not listed."""
        sha = commit if SHA_RE.fullmatch(commit) else self.rev(commit)
        if sha is None:
            return []
        try:
            store = self._open().object_store
            root = store[store[sha.encode()].tree]
        except Exception:   # noqa: BLE001 - absent or damaged: nothing to list
            return []
        out: list[tuple[str, str, str]] = []
        for name in dict.fromkeys(names):
            node, parts = root, name.split("/")
            try:
                for part in parts[:-1]:
                    mode, child = node[part.encode("utf-8", "surrogateescape")]
                    node = store[child]
                mode, child = node[parts[-1].encode("utf-8", "surrogateescape")]
            except Exception:   # noqa: BLE001 - no such path (or not a tree on the way)
                continue
            self._walk(store, mode, child, name, out)
        return out

    def _walk(self, store, mode: int, sha: bytes, path: str, out: list, depth: int = 0) -> None:
        if mode == 0o040000 and depth < 32:
            for entry in store[sha].iteritems():
                sub = f"{path}/{entry.path.decode('utf-8', 'surrogateescape')}"
                self._walk(store, entry.mode, entry.sha, sub, out, depth + 1)
        elif mode in (0o100644, 0o100755, 0o120000):
            out.append((f"{mode:06o}", sha.decode(), path))

    def top_level(self, commit: str) -> list[str]:
        """The names at the top of a commit's tree (in-process)."""
        sha = commit if SHA_RE.fullmatch(commit) else self.rev(commit)
        try:
            store = self._open().object_store
            tree = store[store[sha.encode()].tree]
            return [e.path.decode("utf-8", "surrogateescape") for e in tree.iteritems()]
        except Exception:   # noqa: BLE001 - absent or damaged
            return []

    def blob_head(self, blob: str, limit: int) -> tuple[bytes, bool] | None:
        """The first `limit` bytes of a blob and whether there was more (None: not a blob here)."""
        if not SHA_RE.fullmatch(blob):
            return None
        try:
            obj = self._open().object_store[blob.encode()]
            if obj.type_name != b"blob":
                return None
            data = obj.as_raw_string()
        except Exception:   # noqa: BLE001 - absent or damaged
            return None
        return data[:limit], len(data) > limit

    def main_head(self) -> str | None:
        """The commit the repository's own work tree has checked out (HEAD of the common
        directory), whichever work tree asks; in-process."""
        try:
            with open(os.path.join(self.common_dir, "HEAD"), "rb") as f:
                head = f.read(4096).strip()
            if head.startswith(b"ref: "):
                head = self._open().refs[head[5:]]
            text = head.decode("ascii")
        except Exception:   # noqa: BLE001 - unborn, damaged: no commit
            return None
        return text if SHA_RE.fullmatch(text) and self.is_commit(text) else None

    def is_commit(self, sha: str) -> bool:
        try:
            return self._open().object_store[sha.encode()].type_name == b"commit"
        except Exception:   # absent, unreadable, or not an object id
            return False

    def has_object(self, sha: bytes) -> bool:
        try:
            return sha in self._open().object_store
        except Exception:   # not an object id this repository can hold (dulwich asserts on some)
            return False

    def has_entry(self, commit: str, entry: str) -> bool:
        """Whether a commit's tree entry is here (asked of git: a pack fetched by another
        process since this Store was opened is seen)."""
        return self._git(["cat-file", "-e", "--end-of-options", f"{commit}:{entry}"]).ok

    def stale_temps(self, max_age: float) -> list[tuple[str, float]]:
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
        return older_than(candidates(), max_age)

    # -- history -------------------------------------------------------------

    def rev(self, name: str) -> str | None:
        """The commit a revision names in this checkout (HEAD is its own), or None."""
        res = self._git(["rev-parse", "-q", "--verify", "--end-of-options", name + "^{commit}"])
        return res.out.strip() or None if res.ok else None

    def merge_base(self, a: str, b: str) -> str | None:
        res = self._git(["merge-base", "--end-of-options", a, b])
        return res.out.strip() or None if res.ok else None

    def is_ancestor(self, old: str, new: str) -> bool:
        """Whether commit old is in new's history (in-process for a plain append, else git)."""
        if old == new:
            return True
        try:
            if old.encode() in self._open().object_store[new.encode()].parents:
                return True
        except Exception:   # noqa: BLE001 - missing or unreadable: let git say
            pass
        res = self._git(["merge-base", "--is-ancestor", "--end-of-options", old, new])
        return res.ok and not res.complaint()

    def count(self, base: str, head: str) -> int:
        """Commits reachable from head and not from base."""
        if base.startswith("-"):   # rev-list misreads `^-name` even after --end-of-options
            base = self.rev(base) or base
        res = self._git(["rev-list", "--count", "--end-of-options", head, f"^{base}"])
        return int(res.out.strip() or 0) if res.ok else 0

    def diff(self, base: str, head: str, limit: int = 1 << 20) -> tuple[str, bool]:
        """The patch from base to head as text (no colour, no external diff or textconv: what
        the commits hold, nothing a repository's config runs), cut at limit bytes; (text, cut).
        Both are resolved to commits first, so neither can reach git as an option."""
        a, b = self.rev(base), self.rev(head)
        if a is None or b is None:
            return "", False
        res = self._git(["diff", "--no-color", "--no-ext-diff", "--no-textconv", "-M", a, b])
        raw = res.stdout if res.ok else b""
        return raw[:limit].decode("utf-8", "replace"), len(raw) > limit

    def unreachable(self, candidates: Iterable[str], tips: Iterable[str]) -> set[str]:
        """The candidate commits that no tip reaches (missing objects count as unreachable)."""
        cands = set(candidates)
        present = [c for c in cands if self.has_object(c.encode())]
        if not present:
            return cands
        heads = [t for t in set(tips) if self.has_object(t.encode())]
        spec = "".join(f"{c}\n" for c in present) + "".join(f"^{t}\n" for t in heads)
        # A commit git cannot read (commit-graph: exit 0 all the same) only shortens the walk
        # from the tips, so more candidates look unreachable and are kept: the safe side.
        res = self._git(["rev-list", "--stdin"], input=spec.encode(), check=True)
        out = set(res.out.split())
        return (cands - set(present)) | (out & set(present))


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


def _listdir(path: str) -> list[str]:
    try:
        return os.listdir(path)
    except OSError:
        return []


def older_than(paths: Iterable[str], max_age: float) -> list[tuple[str, float]]:
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
