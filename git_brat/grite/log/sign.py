"""Replica keys and batch signatures: Ed25519, the key pinned per replica, and who is trusted.

A log commit carries its signature as trailers of its commit message, not as a blob beside
`events`: readers before signatures stream exactly one blob per tree and ignore messages, so
signed logs stay fast and readable for them. What is signed is the events blob (by its
SHA-256), the signing key and the tips of other replicas the writer had seen; not the parent,
so that a repair that carries a batch onto a rebuilt chain keeps its signature.

`cryptography` is imported only where a key is made, a batch signed or a signature verified:
most commands never do either, and their start-up time is everyone's.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
import re

import msgspec

from git_brat.errors import UsageError
from git_brat.files import FileLock, atomic_write

DOMAIN = b"grite-batch-v1\n"
LEASE_DOMAIN = b"grite-lease-v1\n"
KEY_TRAILER, SEEN_TRAILER, SIG_TRAILER = "Grite-Key: ", "Grite-Seen: ", "Grite-Sig: "
MAX_SEEN = 256          # tips of other replicas recorded per batch (the rest are left out)
_REPLICA = re.compile(r"[0-9a-f]{1,64}\Z")
_SHA = re.compile(r"[0-9a-f]{40}([0-9a-f]{24})?\Z")


class BadSignature(Exception):
    """A batch's signature trailers are malformed or do not verify."""


class Signature(msgspec.Struct):
    key: str                       # base64 of the 32-byte Ed25519 public key
    sig: str                       # base64 of the 64-byte signature
    seen: dict[str, str] = {}      # other replica -> the tip of its log the writer had seen


# -- this replica's key ---------------------------------------------------------------

def _key_path(grite_dir: str) -> str:
    return os.path.join(grite_dir, "keys", "replica.ed25519")


def has_key(grite_dir: str) -> bool:
    return os.path.exists(_key_path(grite_dir))


def ensure_key(grite_dir: str) -> str:
    """Make this replica's private key if absent (0600 in a 0700 directory); its public key."""
    path = _key_path(grite_dir)
    if not os.path.exists(path):
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
        os.chmod(os.path.dirname(path), 0o700)
        raw = Ed25519PrivateKey.generate().private_bytes_raw()
        tmp = path + f".{os.getpid()}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(raw)
            f.flush()
            os.fsync(f.fileno())
        try:
            os.link(tmp, path)   # never replaces a key another process made meanwhile
        except FileExistsError:
            pass
        finally:
            os.unlink(tmp)
    return public_key(grite_dir)


def _private(grite_dir: str):
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    with open(_key_path(grite_dir), "rb") as f:
        return Ed25519PrivateKey.from_private_bytes(f.read())


def public_key(grite_dir: str) -> str:
    """This replica's public key (read from beside the private one: no crypto import)."""
    path = _key_path(grite_dir) + ".pub"
    try:
        with open(path, encoding="ascii") as f:
            key = f.read().strip()
        if is_key(key):
            return key
    except (OSError, UnicodeDecodeError):
        pass
    key = _b64(_private(grite_dir).public_key().public_bytes_raw())
    try:
        atomic_write(path, key.encode() + b"\n")
    except OSError:   # a read-only clone: derived again next time
        pass
    return key


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _unb64(text: str, size: int) -> bytes:
    try:
        data = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise BadSignature(f"not base64: {text[:20]!r}")
    if len(data) != size:
        raise BadSignature(f"{size} bytes expected, got {len(data)}")
    return data


def is_key(text: str) -> bool:
    try:
        _unb64(text, 32)
        return True
    except BadSignature:
        return False


# -- signing and verifying --------------------------------------------------------------

def _signed_bytes(payload: bytes | memoryview, key: str, seen: dict[str, str]) -> bytes:
    lines = "".join(f"{r} {s}\n" for r, s in sorted(seen.items()))
    return DOMAIN + hashlib.sha256(payload).digest() + b"\n" + key.encode() + b"\n" + lines.encode()


def _lease_bytes(payload: bytes | memoryview, key: str, parent: bytes | None) -> bytes:
    """What a lease record's signature covers: its blob, the key, and the record it follows (so
    that a genuine record copied elsewhere on the chain, an old renew say, signs nothing)."""
    return (LEASE_DOMAIN + hashlib.sha256(payload).digest() + b"\n" + key.encode() + b"\n"
            + (parent or b"") + b"\n")


class Signer:
    """This replica's key, loaded once (before a writer reads the tip it swaps against: the
    crypto import must not widen the window in which another writer can move it)."""

    def __init__(self, grite_dir: str):
        ensure_key(grite_dir)
        self._priv = _private(grite_dir)
        self.key = _b64(self._priv.public_key().public_bytes_raw())

    def trailers(self, payload: bytes, seen: dict[str, str]) -> str:
        return _trailers(self._priv, payload, seen)

    def lease_trailers(self, payload: bytes, parent: bytes | None) -> str:
        """The trailer lines that sign a lease record (its message's body)."""
        sig = _b64(self._priv.sign(_lease_bytes(payload, self.key, parent)))
        return KEY_TRAILER + self.key + "\n" + SIG_TRAILER + sig + "\n"


def trailers(grite_dir: str, payload: bytes, seen: dict[str, str]) -> str:
    """The trailer lines that sign payload (to append to a log commit's message)."""
    return _trailers(_private(grite_dir), payload, seen)


def _trailers(priv, payload: bytes, seen: dict[str, str]) -> str:
    key = _b64(priv.public_key().public_bytes_raw())
    seen = dict(sorted(seen.items())[:MAX_SEEN])
    sig = _b64(priv.sign(_signed_bytes(payload, key, seen)))
    return "".join([KEY_TRAILER + key + "\n",
                    *(f"{SEEN_TRAILER}{r} {s}\n" for r, s in sorted(seen.items())),
                    SIG_TRAILER + sig + "\n"])


def parse(message: bytes | str) -> Signature | None:
    """The signature trailers of a commit message (None: unsigned); BadSignature if malformed."""
    if isinstance(message, bytes):
        message = message.decode("utf-8", "replace")
    if SIG_TRAILER not in message:
        return None
    key = sig = None
    seen: dict[str, str] = {}
    for line in message.splitlines():
        if line.startswith(KEY_TRAILER):
            key = line[len(KEY_TRAILER):].strip()
        elif line.startswith(SIG_TRAILER):
            sig = line[len(SIG_TRAILER):].strip()
        elif line.startswith(SEEN_TRAILER):
            replica, _, sha = line[len(SEEN_TRAILER):].strip().partition(" ")
            if not _REPLICA.match(replica) or not _SHA.match(sha):
                raise BadSignature(f"malformed {SEEN_TRAILER.strip()} line")
            seen[replica] = sha
    if not key or not sig:
        raise BadSignature("signature without a key")
    return Signature(key, sig, seen)


def verify(signature: Signature, payload: bytes | memoryview) -> None:
    """Raise BadSignature unless signature signs payload with its key."""
    _verify(signature, _signed_bytes(payload, signature.key, signature.seen), "batch")


def verify_lease(signature: Signature, payload: bytes | memoryview, parent: bytes | None) -> None:
    """Raise BadSignature unless signature signs this lease record, following parent."""
    _verify(signature, _lease_bytes(payload, signature.key, parent), "lease record")


def _verify(signature: Signature, signed: bytes, what: str) -> None:
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
    pub = Ed25519PublicKey.from_public_bytes(_unb64(signature.key, 32))
    try:
        pub.verify(_unb64(signature.sig, 64), signed)
    except InvalidSignature:
        raise BadSignature(f"signature does not verify (the {what} was altered, moved, or "
                           "signed by another key)")


# -- pinned and trusted keys (.git/grite/trust.json, local) -----------------------------

class Trusted(msgspec.Struct):
    key: str
    replica: str = ""


class Trust(msgspec.Struct):
    pinned: dict[str, str] = {}      # replica -> the first key seen signing its batches
    trusted: list[Trusted] = []      # named by `git grite trust add`


def _trust_path(grite_dir: str) -> str:
    return os.path.join(grite_dir, "trust.json")


def load_trust(grite_dir: str) -> Trust:
    try:
        with open(_trust_path(grite_dir), "rb") as f:
            return msgspec.json.decode(f.read(), type=Trust)
    except FileNotFoundError:
        return Trust()
    except (OSError, msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise UsageError(f"{_trust_path(grite_dir)} cannot be read ({exc}); fix or remove it "
                         "(pins are then learnt again from the logs)")


def update_trust(grite_dir: str, change) -> Trust:
    """Apply change(trust) under a lock and write the result."""
    os.makedirs(grite_dir, exist_ok=True)
    with FileLock(_trust_path(grite_dir) + ".lock", timeout=10):
        trust = load_trust(grite_dir)
        change(trust)
        atomic_write(_trust_path(grite_dir), msgspec.json.encode(trust))
        return trust


def allowed_signers(path: str | None) -> dict[str, str]:
    """Keys named in grite.allowedSignersFile: `<base64 key> [replica or comment]` a line."""
    if not path:
        return {}
    try:
        with open(os.path.expanduser(path), encoding="utf-8") as f:
            text = f.read()
    except OSError as exc:
        raise UsageError(f"grite.allowedSignersFile {path}: cannot be read ({exc.strerror})")
    out = {}
    for n, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        key, _, rest = line.partition(" ")
        if not is_key(key):
            raise UsageError(f"grite.allowedSignersFile {path}:{n}: {key[:20]!r} is not an "
                             "Ed25519 public key in base64 (see `git grite trust list`)")
        out[key] = rest.strip()
    return out


def fingerprint(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


# -- actors bound to a key -----------------------------------------------------------------
# An actor made since actors are keys has a 32-digit id: 8 random digits (one key, many actors,
# told apart by their first digits) then 24 digits of a digest of the public key of the replica
# that made it. Whoever
# writes an event as that actor must sign its batch with that key: no declaration, clock or
# order of arrival moves it elsewhere. (A 16-digit id is an actor made before: see verify.)

KEY_BOUND_LEN, _TAG_LEN = 32, 24
_KEY_BOUND = re.compile(r"[0-9a-f]{32}\Z")


def actor_tag(key: str) -> str:
    """The 24 hex digits every actor bound to this public key (base64) ends with."""
    return hashlib.blake2b(_unb64(key, 32), digest_size=_TAG_LEN // 2,
                           person=b"grite-actor-v1").hexdigest()


def new_actor_id(key: str) -> str:
    return os.urandom((KEY_BOUND_LEN - _TAG_LEN) // 2).hex() + actor_tag(key)


def is_key_bound(actor: str) -> bool:
    return bool(_KEY_BOUND.match(actor))


def binds(key: str | None, actor: str) -> bool:
    """Whether a batch signed by key may speak as this key-bound actor."""
    if not key:
        return False
    try:
        return actor.endswith(actor_tag(key))
    except BadSignature:
        return False
