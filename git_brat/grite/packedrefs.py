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
        self.data = b"\n" + data     # every line, the first included, follows a newline
        self.key = key               # the identity of the file read (git's stat check)
        # git writes the file sorted by name (and says so): then a lookup is a bisection.
        self.sorted = data.startswith(b"# pack-refs with:") and b" sorted" in data[:data.find(b"\n")]
        self._all: dict[bytes, bytes] | None = None
        self._memo: dict[bytes, dict[bytes, bytes]] = {}   # the contents never change
        self.peeled = self._peeled()

    def _lines_containing(self, needle: bytes) -> Iterator[tuple[bytes, bytes]]:
        """(name, sha) of every ref line holding needle after its sha."""
        data, i = self.data, self.data.find(needle)
        while i != -1:
            start = data.rfind(b"\n", 0, i) + 1
            end = data.find(b"\n", i)
            sha, sep, name = data[start:end].partition(b" ")
            if sep and len(sha) in (40, 64) and sha[:1] not in (b"#", b"^") and i >= start + len(sha):
                yield name, sha
            i = data.find(needle, end)

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

    def _sorted_run(self, prefix: bytes, exact: bool) -> dict[bytes, bytes]:
        """The names starting with prefix, found by bisecting the sorted lines."""
        data, lo, hi = self.data, 1, len(self.data)   # lo, hi: line starts; the run is in [lo, hi]
        while hi - lo > 256:   # bisect down to a few lines, then read them
            mid = data.find(b"\n", (lo + hi) // 2, hi) + 1
            while 0 < mid < hi and data[mid:mid + 1] in (b"^", b"#"):
                mid = data.find(b"\n", mid, hi) + 1
            if not 0 < mid < hi:
                break
            name = data[mid:data.find(b"\n", mid)].partition(b" ")[2]
            if name < prefix:
                lo = mid
            else:
                hi = mid
        out, pos = {}, lo
        while pos < len(data):
            end = data.find(b"\n", pos)
            end = len(data) if end == -1 else end
            sha, sep, name = data[pos:end].partition(b" ")
            pos = end + 1
            if not sep or sha[:1] in (b"#", b"^"):
                continue
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

    def containing(self, part: bytes) -> dict[bytes, bytes]:
        """Every ref whose name holds part (b"\\n" at its end anchors it to the name's end)."""
        memo = b"~" + part
        if memo not in self._memo:
            self._memo[memo] = dict(self._lines_containing(part))
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

    def _peeled(self) -> dict[bytes, bytes]:
        """Name -> peeled sha: the `^sha` line after an annotated tag's (rare: found by search)."""
        out, data, i = {}, self.data, self.data.find(b"\n^")
        while i != -1:
            start = data.rfind(b"\n", 0, i) + 1
            _sha, _, name = data[start:i].partition(b" ")
            end = data.find(b"\n", i + 1)
            out[name] = data[i + 2:end]
            i = data.find(b"\n^", end)
        return out

    def copy(self) -> dict[bytes, bytes]:
        return dict(self._parse())

    def __iter__(self):
        return iter(self._parse())

    def __len__(self) -> int:
        return len(self._parse())
