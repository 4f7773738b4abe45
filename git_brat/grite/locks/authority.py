"""The lock authority: the one hub deciding every lease, known by an id it holds, whatever each clone calls it."""

from __future__ import annotations

import os
import secrets
import threading
import time
from typing import TYPE_CHECKING

import msgspec

from git_brat import redact
from git_brat.errors import GriteError, RemoteUnreachable, UsageError
from git_brat.grite.locks.settings import Settings
from git_brat.grite.log.wal import Draft
from git_brat.grite.model import events as ev
from git_brat.process import now_ms

if TYPE_CHECKING:
    from git_brat.git.store import Store
    from git_brat.grite.repo import Grite

REF = b"refs/grite/authority"    # on the hub: a commit made once, at random; its sha is the id
KIND = "lock-authority"
ENTITY = ev.blake2b(b"grite lock authority", digest_size=16).hexdigest()
_found: dict[tuple[str, str], str] = {}   # (repository, authority id) -> the remote holding it


class Authority(msgspec.Struct):
    id: str                      # the sha refs/grite/authority holds on the hub
    url: str                     # the URL the clone that recorded it used (a hint, never dialled)


def recorded(g: "Grite") -> Authority | None:
    """The authority the shared log names, if any clone recorded one."""
    ent = g.state().entities.get(ENTITY)
    if ent is None or not isinstance(ent.get("id"), str) or not isinstance(ent.get("url"), str):
        return None
    return Authority(ent.get("id"), ent.get("url"))


def resolve(g: "Grite", st: Settings) -> Settings:
    """st deciding on this clone's name for the recorded authority.

    The remote chosen by name (`origin`, [locks] remote, --remote) is only a guess: in a
    fork-style setup each clone's `origin` is its own hub, and two clones deciding on two hubs
    both win. The log names the hub; it is found among this clone's remotes by URL, else by
    asking each remote which id it holds. Never is the URL from the log dialled: anyone who
    can push writes the log. Refused, naming the fix, when no remote of this clone is that hub.
    """
    if not st.remote:
        return st
    auth = recorded(g)
    store = g.store
    urls = {k[len("remote."):-len(".url")]: v for k, v in
            store.config_matching(r"^remote\..*\.url$").items()}
    if auth is None:
        if st.by_name:
            _refuse_a_guess(store, st, urls)
        return st
    if _same(store, urls.get(st.remote, st.remote), auth.url):
        return st
    names = [n for n in store.remotes() if n in urls]
    for name in names:
        if _same(store, urls[name], auth.url):
            return msgspec.structs.replace(st, remote=name)
    known = _found.get((store.common_dir, auth.id))
    if known in names:
        return msgspec.structs.replace(st, remote=known)
    unreachable = []
    for name in [st.remote, *(n for n in names if n != st.remote)]:
        try:
            held = store.remote.ls_remote(name, [REF.decode()], st.timeout).get(REF)
        except RemoteUnreachable:
            unreachable.append(name)
            continue
        if held is not None and held.decode() == auth.id:
            _found[(store.common_dir, auth.id)] = name   # a witness asks on every renewal
            return msgspec.structs.replace(st, remote=name)
    down = f" ({', '.join(unreachable)} did not answer)" if unreachable else ""
    raise UsageError(f"leases are decided by the hub {auth.url!r} (authority "
                     f"{auth.id[:12]}, recorded in the log), and no remote of this clone is "
                     f"that hub{down}: add it with `git remote add hub <its url>`, then try "
                     f"again")


def _refuse_a_guess(store: "Store", st: Settings, urls: dict[str, str]) -> None:
    """No lease has named the authority yet, and this clone syncs with more than one hub:
    `origin` is a name, not a choice (in a fork-style setup each clone's origin is its own
    hub, and two clones deciding on two hubs would both win the first lease)."""
    from git_brat.grite.log.refs import synced_remotes
    remotes = synced_remotes(store)
    hubs = {_normal(store, urls.get(r, r)) for r in remotes}
    if len(hubs) < 2:
        return
    raise UsageError(f"no lease has named the lock authority yet, and this clone syncs grite "
                     f"state with {len(hubs)} hubs ({', '.join(remotes)}): leases are not "
                     f"decided on {st.remote} for its name alone. Name the hub every clone "
                     f"shares: `git config grite.lockRemote NAME` here (or [locks] remote in "
                     f".brat/config.toml, committed and approved), or pass --remote NAME")


def establish(g: "Grite", st: Settings) -> None:
    """After a grant on st.remote with no authority recorded: make that hub the authority
    (its id created there if it has none, the first pusher winning) and record it."""
    store, remote = g.store, st.remote
    try:
        held = store.remote.ls_remote(remote, [REF.decode()], st.timeout).get(REF)
        if held is None:
            nonce = msgspec.json.encode({"authority": secrets.token_hex(16)})
            commit = store.objects.write_record_commit(
                b"authority", nonce, None, "grite: lock authority", g.identity.git_author,
                now_ms() // 1000)
            won, _reason = store.remote.push_lease(remote, commit, REF, None, st.timeout)
            held = commit if won else store.remote.ls_remote(
                remote, [REF.decode()], st.timeout).get(REF)
        if held is None:
            return
        url = store.config_get(f"remote.{remote}.url") or remote
        g.append([Draft(ENTITY, ev.Create(KIND, {"id": held.decode(), "url": url}))],
                 f"grite: lock authority {held.decode()[:12]} at {url}")
    except GriteError:
        pass   # the next grant tries again; leases were decided all the same


def _same(store: "Store", a: str, b: str) -> bool:
    return _normal(store, a) == _normal(store, b)


def _normal(store: "Store", url: str) -> str:
    """A URL as compared: a local path made absolute, no trailing slash or `.git`, a password in
    it redacted (as the log records it)."""
    url = redact.text(url)
    if url.startswith("file://"):
        url = url[len("file://"):]
    colon, slash = url.find(":"), url.find("/")
    if "://" not in url and not (colon > 0 and (slash < 0 or colon < slash)):
        url = os.path.realpath(os.path.join(store.toplevel() or store.git_dir, url))
    url = url.rstrip("/")
    return url[:-len(".git")] if url.endswith(".git") else url


class Outage:
    """A caller that never decides a lease locally waits out an unreachable lock remote: asks
    again after 2 s, doubling up to a minute; down() and up() say when to tell the user."""

    def __init__(self) -> None:
        self.wait = self.until = 0.0
        self._lock = threading.Lock()

    def waiting(self) -> bool:
        return time.monotonic() < self.until

    def down(self) -> bool:
        """The remote did not answer: True on the first time of an outage."""
        with self._lock:
            first, self.wait = not self.wait, min(60.0, max(2.0, self.wait * 2))
            self.until = time.monotonic() + self.wait
        return first

    def up(self) -> bool:
        """The remote answered: True when it had been down."""
        with self._lock:
            was, self.wait = self.wait, 0.0
        return bool(was)
