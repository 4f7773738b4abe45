"""The packed-refs file as a mapping that looks a name up without parsing every line."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Iterator


class PackedRefs(Mapping):
    """Ref name -> sha of a packed-refs file's contents (the bytes, no I/O here).

    After `git gc` a year of lease refs is tens of thousands of lines; a command reads a few
    of them. A lookup is a substring search over the bytes (C speed); the whole file is split
    into a dict only when something iterates it (dulwich does, to rewrite the file).
    """

    def __init__(self, data: bytes, key=None):
        if data and not data.endswith(b"\n"):
            data += b"\n"
        self.data = data
        self.key = key               # the identity of the file read (git's stat check)
        # git writes the file sorted by name (and says so): then a lookup is a bisection.
        self.sorted = data.startswith(b"# pack-refs with:") and b" sorted" in data[:data.find(b"\n")]
        self._all: dict[bytes, bytes] | None = None
        self._memo: dict[bytes, dict[bytes, bytes]] = {}   # the contents never change
        self._peeled: dict[bytes, bytes] | None = None

    def _lines_containing(self, needle: bytes, lo: int = 0,
                          hi: int | None = None) -> Iterator[tuple[bytes, bytes]]:
        """(name, sha) of every ref line holding needle after its sha (in data[lo:hi])."""
        data = self.data
        hi = len(data) if hi is None else hi
        i = data.find(needle, lo, hi)
        while i != -1:
            start = data.rfind(b"\n", 0, i) + 1
            end = data.find(b"\n", i)
            sha, sep, name = data[start:end].partition(b" ")
            if sep and len(sha) in (40, 64) and sha[:1] not in (b"#", b"^") and i >= start + len(sha):
                yield name, sha
            i = data.find(needle, end, hi)

    def get(self, name: bytes, default=None):
        if self._all is not None:
            return self._all.get(name, default)
        found = self.under(name, exact=True).get(name) if self.sorted else next(
            (sha for n, sha in self._lines_containing(b" " + name + b"\n") if n == name), None)
        return default if found is None else found

    def __getitem__(self, name: bytes) -> bytes:
        sha = self.get(name)
        if sha is None:
            raise KeyError(name)
        return sha

    def __contains__(self, name) -> bool:
        return isinstance(name, bytes) and self.get(name) is not None

    def under(self, prefix: bytes, exact: bool = False) -> dict[bytes, bytes]:
        """Every ref whose name starts with prefix (exact: the one named prefix, if any)."""
        memo = (b"=" if exact else b"<") + prefix
        if memo not in self._memo:
            if self.sorted:
                found = self._sorted_run(prefix, exact)
            else:
                found = {n: s for n, s in self._lines_containing(b" " + prefix)
                         if (n == prefix if exact else n.startswith(prefix))}
            self._memo[memo] = found
        return dict(self._memo[memo])

    def _seek(self, key: bytes) -> int:
        """A line start at most a few lines before the first line whose name is >= key."""
        data, lo, hi = self.data, 0, len(self.data)   # line starts; that line is in [lo, hi]
        while hi - lo > 256:
            mid = data.find(b"\n", (lo + hi) // 2, hi) + 1
            while 0 < mid < hi and data[mid:mid + 1] in (b"^", b"#"):
                mid = data.find(b"\n", mid, hi) + 1
            if not 0 < mid < hi:
                break
            if data[mid:data.find(b"\n", mid)].partition(b" ")[2] < key:
                lo = mid
            else:
                hi = mid
        return lo

    def _lines_from(self, pos: int) -> Iterator[tuple[int, bytes, bytes]]:
        """(line start, name, sha) of the ref lines from pos on."""
        data = self.data
        while pos < len(data):
            end = data.find(b"\n", pos)
            end = len(data) if end == -1 else end
            sha, sep, name = data[pos:end].partition(b" ")
            if sep and sha[:1] not in (b"#", b"^"):
                yield pos, name, sha
            pos = end + 1

    def _sorted_run(self, prefix: bytes, exact: bool) -> dict[bytes, bytes]:
        """The names starting with prefix, found by bisecting the sorted lines."""
        out = {}
        for _pos, name, sha in self._lines_from(self._seek(prefix)):
            if exact:
                if name >= prefix:   # the name itself sorts before every longer one
                    if name == prefix:
                        out[name] = sha
                    break
            elif name.startswith(prefix):
                out[name] = sha
            elif name > prefix:
                break
        return out

    def _span(self, prefix: bytes) -> tuple[int, int]:
        """Byte range holding every line whose name starts with prefix (sorted files)."""
        end = len(self.data)
        if prefix[-1] == 0xff:
            return self._seek(prefix), end
        after = prefix[:-1] + bytes([prefix[-1] + 1])   # the first name past them all
        for pos, name, _sha in self._lines_from(self._seek(after)):
            if name >= after:
                end = pos
                break
        return self._seek(prefix), end

    def containing(self, part: bytes, within: bytes = b"") -> dict[bytes, bytes]:
        """Every ref whose name starts with `within` and holds `part` (b"\\n" at the end of
        part anchors it to the name's end); in a sorted file only within's lines are searched."""
        memo = b"~" + within + b"~" + part
        if memo not in self._memo:
            lo, hi = self._span(within) if self.sorted and within else (0, None)
            self._memo[memo] = {n: s for n, s in self._lines_containing(part, lo, hi)
                                if n.startswith(within)}
        return dict(self._memo[memo])

    def _parse(self) -> dict[bytes, bytes]:
        if self._all is None:
            out = {}
            for line in self.data.split(b"\n"):
                if line[:1] not in (b"#", b"^", b""):
                    sha, _, name = line.partition(b" ")
                    out[name] = sha
            self._all = out
        return self._all

    @property
    def peeled(self) -> dict[bytes, bytes]:
        """Name -> peeled sha: the `^sha` line after an annotated tag's (rare: found by search)."""
        if self._peeled is None:
            out, data, i = {}, self.data, self.data.find(b"\n^")
            while i != -1:
                start = data.rfind(b"\n", 0, i) + 1
                _sha, _, name = data[start:i].partition(b" ")
                end = data.find(b"\n", i + 1)
                out[name] = data[i + 2:end]
                i = data.find(b"\n^", end)
            self._peeled = out
        return self._peeled

    def copy(self) -> dict[bytes, bytes]:
        return dict(self._parse())

    def __iter__(self):
        return iter(self._parse())

    def __len__(self) -> int:
        return len(self._parse())
