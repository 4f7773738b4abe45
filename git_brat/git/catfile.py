"""Streams of objects out of git: rev-list walks and `git cat-file --batch`, with their parsers."""

from __future__ import annotations

import subprocess
from typing import Callable, Generator, Iterable, Iterator

from git_brat.errors import GriteError
from git_brat.git import run as git


class CatFile:
    """Many objects of one repository at once. has_object(sha) says whether an object is
    here; read_entry(commit, entry) reads one commit's tree entry in-process (None if it is
    unreadable): the careful path for the record a stream stopped at."""

    def __init__(self, git_dir: str, has_object: Callable[[bytes], bool],
                 read_entry: Callable[[str, str], bytes | None]):
        self.git_dir = git_dir
        self._has = has_object
        self._read = read_entry

    def rev_list(self, include: Iterable[str], exclude: Iterable[str] = ()) -> list[str]:
        """Commits reachable from include but not exclude, oldest first (git rev-list)."""
        include = list(include)
        if not include:
            return []
        exclude = [e for e in exclude if self._has(e.encode())]
        # Ids only after --end-of-options (never read as options), excludes as ^id.
        res = git.run(["--git-dir", self.git_dir, "rev-list", "--reverse", "--topo-order",
                       "--end-of-options", *include, *(f"^{e}" for e in exclude)], check=True)
        line = res.complaint()
        if line:
            raise GriteError(f"git rev-list could not read everything: {line}")
        return res.out.split()

    def parents(self, tips: Iterable[str]) -> dict[str, list[str]]:
        """Every commit reachable from tips -> its parents, in one git rev-list (a missing
        object: GriteError)."""
        tips = list(tips)
        if not tips:
            return {}
        res = git.run(["--git-dir", self.git_dir, "rev-list", "--parents", "--stdin"],
                      input="".join(f"{t}\n" for t in tips).encode(), check=True)
        if res.complaint():
            raise GriteError(f"git rev-list could not read everything: {res.complaint()}")
        return {ids[0]: ids[1:] for ids in (ln.split() for ln in res.out.splitlines()) if ids}

    def sizes(self, commits: list[str], entry: str) -> list[int]:
        """The size of each commit's `entry` blob, unread (cat-file --batch-check); 0 where
        there is none."""
        if not commits:
            return []
        res = git.run(["--git-dir", self.git_dir, "cat-file", "--batch-check=%(objectsize)"],
                      input="".join(f"{c}:{entry}\n" for c in commits).encode())
        return [int(w) if w.isdigit() else 0 for w in
                (ln.split()[0] if ln.split() else "" for ln in res.out.splitlines())]

    def cat_blobs(self, commits: list[str], entry: str, max_size: int | None = None
                  ) -> Iterator[tuple[str, memoryview | bytes | TooLarge | None]]:
        """(commit, its `entry` blob's bytes or None if unreadable) for many record commits (log
        batches, lease records) via cat-file --batch. A blob over max_size bytes is stepped
        over unread: TooLarge(its size) instead of its bytes (cat-file's header tells).

        Streams: blobs are yielded while git is still producing the rest, so decoding and
        replay in this process overlap with git's work on the other core. A damaged object
        makes cat-file exit; a fresh one reads the rest, so it costs only its own record.
        """
        start, stuck = 0, 0
        while start < len(commits):
            if stuck >= 8:   # git keeps dying at once (not one bad object): read in-process
                for c in commits[start:]:
                    yield c, self._read(c, entry)
                return
            answered = yield from self._cat_some(commits[start:], entry, max_size)
            if start + answered < len(commits):   # the record git stopped at: try it here
                yield commits[start + answered], self._read(commits[start + answered], entry)
            stuck = stuck + 1 if answered == 0 else 0
            start += answered + 1

    def _cat_some(self, commits: list[str], entry: str, max_size: int | None = None
                  ) -> Generator[tuple[str, memoryview | TooLarge | None], None, int]:
        """One cat-file for as many of commits as it answers; returns how many that was."""
        import threading   # (here: most commands never stream, and import time is theirs too)
        proc = subprocess.Popen(git.argv(["cat-file", "--batch=%(objecttype) %(objectsize)"],
                                         self.git_dir),
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
            return (yield from _parse_batch_output(proc.stdout, commits, max_size))
        finally:   # also when the consumer stops early: never leave git running
            proc.stdout.close()
            if proc.poll() is None:
                proc.kill()
            proc.wait()
            feeder.join()

    def stream_blobs(self, tips: list[str], entry: str, max_size: int | None = None
                     ) -> Iterator[list[memoryview]]:
        """The `entry` blob of every commit reachable from tips, in chunks as git produces them.

        `git rev-list --objects --filter=object:type=blob | git cat-file --batch`, no Python in
        between: the walk names the blobs itself, so git never resolves `<commit>:<entry>`
        through a tree per commit (twice as fast), and this process decodes while git reads.
        Blobs come without their commit and in no useful order. Raises GriteError, after
        yielding what it could, if git failed, an object is missing, or a tree holds anything
        but `entry`: the caller then takes the careful, per-commit path, which can name what
        is broken, or at a blob over max_size bytes (before reading it).
        """
        if not tips:
            return
        import tempfile
        # rev-list's complaints go to a file: a pipe nobody reads until the end could fill
        # up (a badly damaged repository) and stall the whole pipeline.
        with tempfile.TemporaryFile() as errors:
            walk = subprocess.Popen(git.argv(["rev-list", "--objects", "--filter=object:type=blob",
                                              "--filter-provided-objects", "--end-of-options",
                                              *tips], self.git_dir),
                                    stdout=subprocess.PIPE, stderr=errors)
            cat = subprocess.Popen(git.argv(["cat-file", "--batch=%(objectsize) %(rest)"],
                                            self.git_dir),
                                   stdin=walk.stdout, stdout=subprocess.PIPE,
                                   stderr=subprocess.DEVNULL)
            walk.stdout.close()   # cat-file now owns the pipe; it ends when rev-list does
            complete = False
            try:
                yield from _blob_chunks(cat.stdout, entry.encode(), max_size)
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
        if not complete or walk.returncode != 0 or cat.returncode != 0 or git.complaint(err):
            raise GriteError(f"git could not read every log object: "
                             f"{err.splitlines()[-1] if err else 'an object is missing'}")


class TooLarge(int):
    """The size of a blob stepped over unread (larger than the caller takes in)."""


def _parse_batch_output(out, commits: list[str], max_size: int | None = None
                        ) -> Generator[tuple[str, memoryview | TooLarge | None], None, int]:
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
        if max_size is not None and size > max_size:
            have = len(data) - pos
            if have >= size + 1:
                pos += size + 1
            else:   # dropped as it comes, never held whole
                left, data, pos = size + 1 - have, b"", 0
                while left > 0:
                    chunk = out.read1(min(left, 1 << 20))
                    if not chunk:
                        return n
                    left -= len(chunk)
            yield c, TooLarge(size)
            continue
        while len(data) - pos < size + 1:
            if not more(size + 1 - (len(data) - pos)):
                return n   # cut short: git died inside this object
        # `<commit>:events` that is a tree (or anything but a blob) is unreadable as a batch,
        # but its content is still there to step over.
        yield c, memoryview(data)[pos:pos + size] if kind == b"blob" else None
        pos += size + 1
    return len(commits)


def _blob_chunks(out, entry: bytes, max_size: int | None = None) -> Iterator[list[memoryview]]:
    """Parse `git cat-file --batch='%(objectsize) %(rest)'` output (rest: the blob's path in
    its tree) into lists of zero-copy blob views, one list per read from the pipe.

    Raises GriteError at a header that is not "<size> <entry>" ("<id> missing", or a tree
    entry that is not the blob wanted).
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
            if name != entry or not size.isdigit():
                if views:
                    yield views
                raise GriteError(f"git cat-file: {header.decode('utf-8', 'replace')}")
            if max_size is not None and int(size) > max_size:
                if views:
                    yield views
                raise GriteError(f"git cat-file: a blob of {int(size)} bytes, over the "
                                 f"{max_size} taken in")
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
