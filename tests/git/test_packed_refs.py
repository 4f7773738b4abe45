"""After `git gc` packs the refs: grite reads its logs and leases from packed-refs, exactly as git does."""

from __future__ import annotations

import hashlib

from hypothesis import given, settings, strategies as st

from helpers import git, grite, grite_json
from git_brat.git.store import Store
from git_brat.git.packedrefs import PackedRefs
from git_brat.grite.log.refs import log_tips

_SEGMENT = st.text(alphabet="abgrw-/.", min_size=1, max_size=6)
_NAMES = st.lists(st.builds(lambda a, b: f"refs/{a}/{b}".encode(), _SEGMENT, _SEGMENT),
                  unique=True, max_size=40)


def _sha(name: bytes) -> bytes:
    return hashlib.sha1(name).hexdigest().encode()


def _file(names: list[bytes], peeled: set[bytes], sort: bool) -> bytes:
    lines = [b"# pack-refs with: peeled fully-peeled sorted " if sort else b"# pack-refs with: peeled "]
    for n in (sorted(names) if sort else names):
        lines.append(_sha(n) + b" " + n)
        if n in peeled:
            lines.append(b"^" + _sha(n + b"^"))
    return b"\n".join(lines) + b"\n"


@settings(max_examples=150, deadline=None)
@given(_NAMES, st.data(), st.booleans())
def test_lookups_in_packed_refs_agree_with_reading_every_line(names, data, sort):
    peeled = set(data.draw(st.lists(st.sampled_from(names), max_size=3))) if names else set()
    packed = PackedRefs(_file(names, peeled, sort))
    assert packed.sorted == sort
    probes = names + [n + b"x" for n in names] + [n[:-1] for n in names] + [b"refs/", b"refs/zz"]
    for probe in probes:
        assert packed.get(probe) == (_sha(probe) if probe in names else None)
        assert packed.under(probe) == {n: _sha(n) for n in names if n.startswith(probe)}
    assert packed.containing(b"/g") == {n: _sha(n) for n in names if b"/g" in n}
    for within in (b"refs/g", b"refs/a", b"refs/", b"refs/zz"):
        assert packed.containing(b"w", within=within) == \
            {n: _sha(n) for n in names if n.startswith(within) and b"w" in n}
    assert packed.peeled == {n: _sha(n + b"^") for n in peeled}
    assert dict(packed) == {n: _sha(n) for n in names}


def test_grite_reads_and_appends_to_its_log_after_git_pack_refs(grepo):
    first = grite_json(grepo, "issue", "create", "Before gc")["id"]
    grite(grepo, "lock", "acquire", "task:abc", "--holder", "alice")
    git(grepo, "pack-refs", "--all")
    assert not (grepo / ".git" / "refs" / "grite" / "wal").exists()   # only in packed-refs now
    second = grite_json(grepo, "issue", "create", "After gc")["id"]   # CAS on a packed ref
    assert {i["id"] for i in grite_json(grepo, "issue", "list")} == {first, second}
    assert grite_json(grepo, "lock", "release", "task:abc", "--holder", "alice")["state"] == "released"
    listed = dict(line.split(" ", 1)[::-1] for line in git(
        grepo, "for-each-ref", "--format=%(objectname) %(refname)", "refs/grite/").splitlines())
    assert log_tips(Store.discover(str(grepo))) == {"refs/grite/wal": listed["refs/grite/wal"]}


def test_a_loose_ref_written_after_gc_wins_over_its_packed_copy(grepo):
    grite_json(grepo, "issue", "create", "One")
    git(grepo, "pack-refs", "--all")
    grite_json(grepo, "issue", "create", "Two")
    tip = git(grepo, "rev-parse", "refs/grite/wal")
    assert log_tips(Store.discover(str(grepo))) == {"refs/grite/wal": tip}
    assert len(grite_json(grepo, "issue", "list")) == 2


def test_a_fetched_lease_whose_name_ends_like_a_log_is_not_read_as_one(grepo):
    grite_json(grepo, "issue", "create", "One")
    grite(grepo, "lock", "acquire", "path:docs/grite/wal", "--holder", "alice")
    record = git(grepo, "for-each-ref", "--format=%(objectname)", "refs/grite/locks/")
    copy = "refs/remotes/origin/grite/locks/path/docs/grite/wal"
    git(grepo, "update-ref", copy, record)
    for packed in (False, True):
        if packed:
            git(grepo, "pack-refs", "--all")
        assert list(log_tips(Store.discover(str(grepo)))) == ["refs/grite/wal"]
        assert grite(grepo, "doctor").returncode == 0


def test_symbolic_refs_under_remotes_are_followed_as_git_follows_them(grepo):
    grite_json(grepo, "issue", "create", "One")
    tip = git(grepo, "rev-parse", "refs/grite/wal")
    git(grepo, "update-ref", "refs/remotes/origin/main", tip)
    git(grepo, "update-ref", "refs/remotes/origin/grite/wal", tip)
    git(grepo, "symbolic-ref", "refs/remotes/origin/HEAD", "refs/remotes/origin/main")   # as clone makes
    git(grepo, "symbolic-ref", "refs/remotes/mirror/grite/wal", "refs/remotes/origin/grite/wal")
    git(grepo, "symbolic-ref", "refs/remotes/mirror/HEAD", "refs/remotes/origin/HEAD")   # two levels
    git(grepo, "symbolic-ref", "refs/remotes/gone/HEAD", "refs/remotes/gone/main")        # dangling
    for packed in (False, True):
        if packed:   # (symbolic refs stay loose; what they name moves to packed-refs)
            git(grepo, "pack-refs", "--all")
        store = Store.discover(str(grepo))
        expect = {n: git(grepo, "rev-parse", "--verify", "-q", n) for n in (
            "refs/remotes/origin/HEAD", "refs/remotes/mirror/HEAD", "refs/remotes/mirror/grite/wal")}
        got = {n.decode(): s.decode() for n, s in store.refs.loose_under(b"refs/remotes/").items()}
        assert {n: got.get(n) for n in expect} == expect
        assert "refs/remotes/gone/HEAD" not in got
        assert log_tips(store)["refs/remotes/mirror/grite/wal"] == tip
