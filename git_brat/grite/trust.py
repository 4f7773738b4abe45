"""`git grite trust`: which replica keys this clone believes, pinned on first sight or named by hand."""

from __future__ import annotations

import re

import msgspec

from git_brat.errors import NotFound, UsageError
from git_brat.grite.log import sign, verify
from git_brat.grite.log.refs import grite_dir
from git_brat.grite.repo import Grite

_REPLICA = re.compile(r"[0-9a-f]{1,64}\Z")


class KeyRow(msgspec.Struct):
    key: str
    replica: str = ""          # whose batches it signs ("" if not seen yet)
    pinned: bool = False       # the first key seen signing that replica's batches
    trusted: bool = False      # named by `trust add`, grite.allowedSignersFile, or this clone's own
    source: str = ""           # own | trust add | allowedSignersFile | pinned


class TrustList(msgspec.Struct):
    require_signed: bool
    keys: list[KeyRow]
    unsigned: int              # batches believed without a signature (older logs)
    unknown_signer: int        # batches signed by a key nobody named as trusted
    rejected: int


def listing(g: Grite) -> TrustList:
    store, where = g.store, grite_dir(g.store)
    trust = sign.load_trust(where)
    allowed = sign.allowed_signers(store.config_get("grite.allowedSignersFile"))
    own = sign.public_key(where) if sign.has_key(where) else ""
    rows: dict[str, KeyRow] = {}
    for replica, key in sorted(trust.pinned.items()):
        rows[key] = KeyRow(key, replica, pinned=True, source="pinned")
    for t in trust.trusted:
        row = rows.setdefault(t.key, KeyRow(t.key, t.replica))
        row.trusted, row.source = True, "trust add"
    for key, note in allowed.items():
        row = rows.setdefault(key, KeyRow(key, note if _REPLICA.match(note) else ""))
        row.trusted, row.source = True, "allowedSignersFile"
    if own:
        row = rows.setdefault(own, KeyRow(own, g.identity.replica.id))
        row.trusted, row.source = True, "own"
    verdicts = verify.check(store)
    return TrustList(store.config_bool("grite.requireSigned", False),
                     sorted(rows.values(), key=lambda r: (r.source != "own", r.replica, r.key)),
                     verdicts.unsigned, verdicts.unknown_signer, len(verdicts.rejected))


def _resolve(g: Grite, what: str) -> sign.Trusted:
    what = what.strip()
    pins = sign.load_trust(grite_dir(g.store)).pinned
    if sign.is_key(what):
        return sign.Trusted(what, next((r for r, k in pins.items() if k == what), ""))
    if _REPLICA.match(what):
        found = [r for r in pins if r == what] or [r for r in pins if r.startswith(what)]
        if len(found) == 1:
            return sign.Trusted(pins[found[0]], found[0])
        if len(found) > 1:
            raise UsageError(f"replica {what!r} is ambiguous: " + ", ".join(sorted(found)))
        raise NotFound(f"no key is pinned for replica {what!r} yet: fetch its log first "
                       "(`git grite sync`), or give its public key (`git grite trust list` on "
                       "its clone shows it)")
    raise UsageError(f"{what!r} is neither a replica id nor an Ed25519 public key in base64")


def add(g: Grite, what: str) -> sign.Trusted:
    """Trust a key (or the key pinned for a replica); every log is judged again."""
    entry = _resolve(g, what)

    def change(t: sign.Trust) -> None:
        if not any(x.key == entry.key for x in t.trusted):
            t.trusted.append(entry)
    sign.update_trust(grite_dir(g.store), change)
    _rejudge(g)
    return entry


def remove(g: Grite, what: str) -> sign.Trusted:
    """Stop trusting a key named by `trust add`; every log is judged again."""
    entry = _resolve(g, what)
    trusted = sign.load_trust(grite_dir(g.store)).trusted
    if not any(x.key == entry.key for x in trusted):
        raise NotFound(f"{what!r} is not in this clone's trust list (`git grite trust list`; "
                       "keys from grite.allowedSignersFile are removed from that file)")
    sign.update_trust(grite_dir(g.store), lambda t: setattr(
        t, "trusted", [x for x in t.trusted if x.key != entry.key]))
    _rejudge(g)
    return entry


def _rejudge(g: Grite) -> None:
    """New trust settings: verdicts and the state believed from them are made again."""
    verify.forget(g.store)
    g.cache.rebuild()
