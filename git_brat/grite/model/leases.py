"""Lease records as data: names, holders, records, and the rules a ref's history of them obeys (pure)."""

from __future__ import annotations

import re
from typing import Annotated, Callable, NamedTuple
from urllib.parse import quote, unquote

import msgspec

from git_brat.errors import UsageError
from git_brat.grite.model.state import iso

LOCKS = b"refs/grite/locks/"
ENTRY = b"lease"                 # the one blob in each lease commit's tree

DEFAULT_SKEW = 5.0               # seconds others wait past a holder's expiry before taking over

MAX_NAME = 200
MAX_FORCERS = 64                 # keys a holder names as allowed to override its lease
_FORBIDDEN = set(" ~^:?*[\\")    # git check-ref-format: never in a ref name
_SAFE = "-_.+=,@!$&'()#"          # kept as-is in the ref component; everything else is %-encoded

# Every field of a record is bounded when it is decoded: a record anyone could push is read
# by every clone, and one that does not fit is unreadable (reported, never believed), like
# one that is not JSON. The bounds are wide of what a writer makes (names of MAX_NAME, keys of
# 44 characters, times in ms).
Text = Annotated[str, msgspec.Meta(max_length=MAX_NAME)]
Host = Annotated[str, msgspec.Meta(max_length=255)]            # a host name's longest
Word = Annotated[str, msgspec.Meta(max_length=32)]             # a state, an action
Count = Annotated[int, msgspec.Meta(ge=0, le=2 ** 63 - 1)]     # a token, a pid, ms
Key = Annotated[str, msgspec.Meta(max_length=128)]             # a replica's public key


class Holder(msgspec.Struct):
    """Who holds a lease: the holder id others compare against, and where it runs."""
    id: Text
    actor: Text = ""
    session: Text = ""
    host: Host = ""
    pid: Count = 0


class Lease(msgspec.Struct):
    """One record of a lease's history: the `lease` blob of each commit on its ref."""
    resource: Annotated[str, msgspec.Meta(max_length=MAX_NAME + 40)]   # NAMESPACE:NAME
    holder: Holder
    token: Count                 # fencing token: +1 on every grant, kept by renew and release
    state: Word                  # "held" or "released"
    acquired_at: Count           # ms, holder's clock: when this token was granted
    expires_at: Count            # ms, holder's clock
    ttl_ms: Count
    written_at: Count            # ms, writer's clock
    released_at: Count = 0       # ms: when a released lease ended
    action: Word = ""            # acquire, extend, takeover, renew, release, expire; force-*
    by: Text = ""                # who wrote it when not the holder (--force, gc)
    remote: Text = ""            # the remote that decided this record; "" = local lease
    v: Annotated[int, msgspec.Meta(ge=0, le=1000)] = 1
    # The keys that may override this lease (force-*), named by its holder's clone in the
    # records it writes (the keys it trusts): every reader judges an override by this list,
    # so the clone that forces and the clone that holds agree on who holds it. [] = written
    # before the holder named any (then each reader's own trust decides, as it did).
    forcers: Annotated[list[Key], msgspec.Meta(max_length=MAX_FORCERS)] = []



def parse_resource(resource: str) -> tuple[str, str]:
    """NAMESPACE:NAME -> (namespace, name), or a UsageError saying what is wrong."""
    def bad(why: str) -> UsageError:
        return UsageError(f"invalid resource {resource!r}: {why} "
                          f"(expected NAMESPACE:NAME, e.g. task:t-3f2a, path:src/parser, repo:global)")
    ns, sep, name = resource.partition(":")
    if not sep:
        raise bad("no namespace")
    if not ns or not ns[0].isascii() or not ns[0].isalpha() or len(ns) > 32 or any(
            not (c.isascii() and (c.islower() or c.isdigit() or c in "-_")) for c in ns):
        raise bad("the namespace must be lower-case letters, digits, '-' or '_'")
    problem = _name_problem(name)
    if problem:
        raise bad(problem)
    return ns, name


def _name_problem(name: str) -> str | None:
    import unicodedata
    if not name:
        return "empty name"
    if len(name) > MAX_NAME:
        return f"longer than {MAX_NAME} characters"
    for c in name:
        if ord(c) < 0x20 or ord(c) == 0x7f or unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp"):
            return "control characters are not allowed"
        if c.isspace():
            return "whitespace is not allowed"
        if c in _FORBIDDEN:
            return f"{c!r} is not allowed"
    if ".." in name:
        return "'..' is not allowed"
    if "@{" in name:
        return "'@{' is not allowed"
    if name == "@":
        return "'@' alone is not allowed"
    if name.endswith("."):
        return "may not end with '.'"
    parts = name.split("/")
    if any(not p for p in parts):
        return "empty path component ('/' at the start or end, or '//')"
    for p in parts:
        if p.startswith("."):
            return "a component may not start with '.'"
        if p.endswith(".lock"):
            return "a component may not end with '.lock'"
    return None


def refname_problem(ref: str) -> str | None:
    """The rules of `git check-ref-format` (for a full ref name); None when valid."""
    if ref == "@" or "@{" in ref or ".." in ref or ref.endswith(".") or ref.endswith("/"):
        return "forbidden sequence"
    for c in ref:
        if ord(c) < 0x20 or ord(c) == 0x7f or c in _FORBIDDEN:
            return f"forbidden character {c!r}"
    parts = ref.split("/")
    if len(parts) < 2:
        return "needs at least one '/'"
    for p in parts:
        if not p or p.startswith(".") or p.endswith(".lock"):
            return f"bad component {p!r}"
    return None


def ref_for(resource: str) -> bytes:
    """task:t-3f2a -> refs/grite/locks/task/t-3f2a; the name is one %-encoded ref component,
    so path:src and path:src/parser never collide as file and directory."""
    if _PLAIN.match(resource) and ".." not in resource and "@{" not in resource and \
            not resource.endswith((".", ".lock")) and ":." not in resource:
        # (the common case, a task id: every rule holds and quoting changes nothing; replay
        # maps thousands of them)
        return b"refs/grite/locks/" + resource.replace(":", "/", 1).encode()
    ns, name = parse_resource(resource)
    ref = f"{LOCKS.decode()}{ns}/{quote(name, safe=_SAFE)}"
    problem = refname_problem(ref)
    if problem:   # unreachable after parse_resource; kept as a guard on the mapping
        raise UsageError(f"invalid resource {resource!r}: maps to a bad ref name ({problem})")
    return ref.encode()


_PLAIN = re.compile(r"[a-z][a-z0-9_-]{0,31}:[A-Za-z0-9_+=,!$&'()#-][A-Za-z0-9_.+=,!$&'()#-]{0,199}\Z")


def resource_of(ref: bytes) -> str:
    ns, _, enc = ref[len(LOCKS):].decode().partition("/")
    return f"{ns}:{unquote(enc)}"



lease_decoder = msgspec.json.Decoder(Lease)



class Forged(msgspec.Struct):
    """A record on a lease ref that its history does not allow: ignored, and reported."""
    resource: str
    sha: str
    action: str
    holder: str
    token: int
    reason: str




FUTURE_MS = int(DEFAULT_SKEW * 1000)   # how far a record's clock may run ahead of its reader's
HOLDERS_OWN = ("acquire", "takeover", "force-takeover", "extend", "renew")   # records that name them
_GRANTS = ("acquire", "takeover", "force-takeover")


def invalid(prev: Lease, rec: Lease, latest: int) -> str:
    """Why rec cannot follow prev on a lease ref ("" when it can)."""
    if rec.resource != prev.resource:
        return f"names {rec.resource!r}, not {prev.resource!r}"
    grant = rec.action in _GRANTS
    if grant and rec.token != prev.token + 1:
        return f"grants token {rec.token}, not {prev.token + 1}"
    if not grant and rec.token != prev.token:
        return f"changes token {prev.token} to {rec.token} without a grant"
    if rec.action.startswith("force-"):
        return ""   # a recorded override (--force): allowed, and its history says who
    if prev.state == "released":
        return "" if grant else f"{rec.action} of a released lease"
    if rec.action == "expire":
        if prev.expires_at < rec.written_at <= latest:
            return ""
        return f"expires {prev.holder.id}'s lease before it ran out"
    if rec.holder.id == prev.holder.id:
        return ""
    if grant and prev.expires_at < rec.acquired_at <= latest:
        return ""   # a takeover of a lease its holder let run out
    return (f"{rec.action} by {rec.holder.id} while {prev.holder.id} held it "
            f"(token {prev.token}, until {iso(prev.expires_at).isoformat()})")



def end_of(lease: Lease, now: int) -> int:
    """When a lease ended, on its holder's clock (a live lease taken by force ends now)."""
    if lease.state == "released":
        return lease.released_at
    return min(lease.expires_at, now)




class Grants(msgspec.Struct):
    """What one ref's records grant: every token an accepted record granted, with when the
    lease before it ended (as the writer of its LeaseToken computes it: end_of the lease as
    it stood, at the grant's acquired_at). Tokens up to `floor` were granted by records not
    read (a chain longer than read): their ends are unknown."""
    top: int = 0
    ends: dict[int, int] = {}
    floor: int = 0


class Seal(NamedTuple):
    """Who signed a lease record: the key of its valid signature (None: unsigned), or why its
    signature does not count."""
    key: str | None = None
    problem: str = ""


def unvouched(prev: Lease, rec: Lease, seal: Seal, holder_key: str | None, signing: bool,
              trusts: Callable[[str], bool]) -> str:
    """Why a record that follows the rules is still not believed for who signed it ("" when it
    is). A free lease is anyone's to take, a lease run out anyone's to expire; the holder's own
    records (renew, extend, release) must be signed by the key that signed its grant, and an
    override (force-*) by a key this reader trusts. `signing`: a record before this one was
    signed (a ref whose records were all written before signatures is judged as it was)."""
    if seal.problem:
        return f"its signature does not count ({seal.problem})"
    if rec.action.startswith("force-"):
        if seal.key is None and not signing:
            return ""
        if seal.key is None:
            who = "a key its holder named" if prev.forcers else "a key this clone trusts"
            return (f"an unsigned {rec.action}: only {who} may override a lease (`git grite "
                    f"trust add`)")
        if prev.forcers:   # the holder's word, the same on every clone
            return override_refused(prev, seal.key)
        if not trusts(seal.key):
            return (f"a {rec.action} signed by key {seal.key[:12]}…, which this clone does not "
                    f"trust (`git grite trust add`)")
        return ""
    if rec.action in _GRANTS or rec.action == "expire":
        return ""
    if holder_key is not None and seal.key != holder_key:
        return (f"{rec.action} of {prev.holder.id}'s lease (token {prev.token}) not signed by the "
                f"key that took it")
    return ""


def override_refused(prev: Lease, key: str) -> str:
    """Why key may not override the lease prev ("" when it may): only a key its holder named."""
    if not prev.forcers or key in prev.forcers:
        return ""
    return (f"a force by key {key[:12]}…, which {prev.holder.id}'s clone did not name as one "
            f"that may override its lease (it counts on no clone)")


def _no_seal(_sha: bytes) -> Seal:
    return Seal()


def _trusts_none(_key: str) -> bool:
    return False


def fold(records: list[tuple[bytes, Lease]], now: int, root: bool = False,
         seal: Callable[[bytes], Seal] = _no_seal, trusts: Callable[[str], bool] = _trusts_none,
         ) -> tuple[Lease, list[Forged], Grants]:
    """The lease records (oldest first) really grant, the records that do not count, and the
    grants of those that do.

    Anyone who can push can append a record, and a record only claims who wrote it: "acquire"
    by another holder over a live lease would take it for as long as it says. So each record
    is judged against the lease as it stood before it (invalid); one that breaks the rules is
    skipped, and so is one its signer may not write (unvouched: seal tells who signed a record,
    trusts whether this reader trusts a key). The oldest record is taken as it is (where the
    reading began); `root`: it is the first record of the ref (no lease before it).
    """
    # A record may claim a time no later than its reader's clock, nor than any record written
    # after it (plus a margin for clocks): "acquired after the lease expired", dated ahead, lies.
    latest, bound = [0] * len(records), now
    for i in range(len(records) - 1, -1, -1):
        latest[i] = bound + FUTURE_MS
        bound = min(bound, records[i][1].written_at)
    lease, forged = records[0][1], []
    # (where the reading began, taken as it is: who signed it matters only to records after it)
    holder_key = seal(records[0][0]).key if len(records) > 1 else None
    signing = holder_key is not None
    if root and lease.action in _GRANTS:   # the first grant: no lease ended before it
        grants = Grants(lease.token, {lease.token: 0}, lease.token - 1)
    else:   # (how the lease before the oldest record read ended is not known)
        grants = Grants(lease.token, {}, lease.token)
    for i in range(1, len(records)):
        rec_sha, rec = records[i]
        sealed = seal(rec_sha)
        why = invalid(lease, rec, latest[i]) or unvouched(lease, rec, sealed, holder_key,
                                                          signing, trusts)
        if why:
            forged.append(Forged(lease.resource, rec_sha.decode(), rec.action, rec.holder.id,
                                 rec.token, why))
            continue
        if rec.action in _GRANTS:
            grants.ends[rec.token] = end_of(lease, rec.acquired_at)
            grants.top = rec.token
            holder_key = sealed.key
        signing = signing or sealed.key is not None
        lease = rec
    return lease, forged, grants


def verdict(resource: str, token: int, prev_end: int, grants: list[Grants]) -> str | None:
    """Why a LeaseToken (resource, token, prev_end) is not believed, by what the lease's refs
    grant (None: believed). A token past every record is not yet fetched here, or forged; one
    whose previous lease ended other than its record says is forged."""
    top = max(g.top for g in grants)
    if token > top:
        return (f"lease token {token} for {resource} is not granted by the lease's records "
                f"(they reach token {top}): not applied as a fence until a record granting "
                f"it is fetched")
    ends = [g.ends[token] for g in grants if token in g.ends]
    if prev_end in ends or any(token <= g.floor for g in grants if token not in g.ends):
        return None
    said = ", ".join(sorted({_when(e) for e in ends})) or "nothing"
    return (f"lease token {token} for {resource} says the lease before it ended at "
            f"{_when(prev_end)}, but the lease's records say {said}: forged, not applied as "
            f"a fence")


def _when(ms: int) -> str:
    return "no earlier lease" if ms <= 0 else iso(ms).isoformat()
