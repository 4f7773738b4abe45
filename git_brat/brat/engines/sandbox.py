"""Sandboxes as data: the bubblewrap argv that confines a session or a check (binds, hides, namespaces).

No git here: callers name the paths (a work tree, the object store, a branch's shadow ref
directory); this module only turns them into one `bwrap` command line, in an order where the
narrower mount always lands on top of the wider one.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from functools import cache
from typing import Iterable, Mapping

import msgspec

import git_brat
from git_brat.errors import UsageError

MODES = ("auto", "bwrap", "none")
NETWORKS = ("auto", "outbound", "none", "open")
# Never readable inside a sandbox, whatever the config says: keys and the keyring.
ALWAYS_HIDDEN = ("~/.ssh", "~/.gnupg")
# The user's agents and desktop: a socket any of these names lets the agent act as the user
# outside the sandbox (sign with the ssh key, `systemd-run --user`, type into an X display).
AGENT_VARIABLES = ("SSH_AUTH_SOCK", "SSH_AGENT_PID", "GPG_AGENT_INFO", "GNUPGHOME",
                   "DBUS_SESSION_BUS_ADDRESS", "DBUS_SYSTEM_BUS_ADDRESS", "DISPLAY",
                   "XAUTHORITY", "WAYLAND_DISPLAY", "XDG_RUNTIME_DIR", "GNOME_KEYRING_CONTROL",
                   "SWAYSOCK", "I3SOCK", "TMUX", "TMUX_PANE", "STY", "PULSE_SERVER",
                   "DOCKER_HOST", "CONTAINER_HOST", "KRB5CCNAME")
# Where those sockets live ("{uid}": the user's), and the services a root agent would be
# obeyed by (systemd and D-Bus trust the uid of whoever connects, with capabilities or not).
AGENT_SOCKETS = ("/run/user/{uid}", "/tmp/.X11-unix", "/tmp/.ICE-unix", "/run/dbus",
                 "/var/run/dbus", "/run/systemd/private", "/run/systemd/userdb",
                 "/run/docker.sock", "/var/run/docker.sock", "/run/podman",
                 "/run/containerd", "/run/screen", "/run/tmux")
# An engine's endpoint variables: a loopback port one of these names is forwarded into an
# "outbound" sandbox (the engine reaches its model server there), no other.
ENDPOINT_NAME = re.compile(r"(URL|ENDPOINT|HOST|API_BASE)$")
LOOPBACK_URL = re.compile(r"^(?:([a-z][a-z0-9+.-]*)://)?(?:127\.0\.0\.1|localhost|\[::1\])"
                          r"(?::(\d{1,5}))?(?:[/?#]|$)", re.I)


class Plan(msgspec.Struct, kw_only=True):
    """What one sandbox sees. Everything not named is the host's, read-only."""
    writable: list[str] = []          # bound read-write at the same path
    protect: list[str] = []           # read-only again, inside a writable path
    hide: list[str] = []              # unreadable: an empty read-only dir, or /dev/null
    shadow: list[tuple[str, str]] = []   # (host dir, where it appears) read-write
    shadow_ro: list[tuple[str, str]] = []   # (host dir, where it appears) read-only
    reachable: list[str] = []         # host paths that must stay visible under a private tmp
    network: str = "open"             # open | none | outbound (see network_mode)
    forward: list[int] = []           # outbound: host loopback TCP ports reachable inside
    userns: bool = False              # in a user namespace of its own (user_namespaces())
    private_tmp: bool = True


def pasta_path() -> str | None:
    return shutil.which("pasta")


@cache
def user_namespaces(bwrap: str | None = None) -> bool:
    """Whether bwrap may make a user namespace here (a kernel or a container may forbid it);
    probed once per process."""
    bwrap = bwrap or bwrap_path()
    if bwrap is None:
        return False
    try:
        return subprocess.run([bwrap, "--unshare-user", "--ro-bind", "/", "/", "true"],
                              stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, timeout=20).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def has_default_route() -> bool:
    """Whether this machine routes anywhere beyond itself (pasta copies that interface into
    the sandbox; in a loopback-only namespace it has nothing to copy). IPv6's table holds a
    default reject route on lo even there: only a route through another interface counts."""
    try:
        with open("/proc/net/route") as f:
            for row in f.read().splitlines()[1:]:
                cols = row.split()
                if len(cols) > 3 and cols[1] == "00000000" and cols[0] != "lo":
                    return True
    except OSError:
        pass
    try:
        with open("/proc/net/ipv6_route") as f:
            for row in f.read().splitlines():
                cols = row.split()
                if len(cols) == 10 and cols[0] == "0" * 32 and cols[1] == "00" and \
                        cols[9] != "lo" and not int(cols[8], 16) & 0x200:   # RTF_REJECT
                    return True
    except (OSError, ValueError):
        pass
    return False


def network_mode(setting: str) -> str:
    """What witness.sandbox_network means here: "outbound", "none" or "open" (auto: outbound
    when pasta is on PATH and this machine has a route out, else open). "outbound" asked for
    and impossible raises, naming the fix."""
    if setting == "auto":
        return "outbound" if pasta_path() and has_default_route() else "open"
    if setting == "outbound" and pasta_path() is None:
        raise UsageError("witness.sandbox_network = \"outbound\" but `pasta` is not on PATH: "
                         "install passt (apt-get install passt), or set "
                         "witness.sandbox_network to \"auto\", \"none\" or \"open\"")
    if setting == "outbound" and not has_default_route():
        raise UsageError("witness.sandbox_network = \"outbound\" but this machine has no "
                         "route out for pasta to share: set witness.sandbox_network to "
                         "\"none\" or \"open\"")
    return setting


def network_warning(setting: str) -> str:
    """What `status` and `engine list` say once when auto leaves the network open ("" else)."""
    if setting == "auto" and network_mode(setting) == "open":
        why = "`pasta` is not on PATH" if pasta_path() is None else "this machine has no route out"
        return (f"witness.sandbox_network = \"auto\" and {why}: sandboxed sessions share this "
                "machine's network, loopback services included (install passt, or set "
                "witness.sandbox_network = \"open\" or \"none\" to say so)")
    return ""


def loopback_ports(env: Mapping[str, str]) -> list[int]:
    """The host loopback ports the engine's endpoint variables name (ANTHROPIC_BASE_URL=
    http://127.0.0.1:PORT): the only ones an outbound sandbox reaches."""
    out = set()
    for name, value in env.items():
        if not isinstance(value, str) or not ENDPOINT_NAME.search(name.upper()):
            continue
        m = LOOPBACK_URL.match(value.strip())
        if m is None:
            continue
        port = int(m.group(2)) if m.group(2) else {"https": 443, "wss": 443}.get(
            (m.group(1) or "").lower(), 80)
        if 0 < port < 65536:
            out.add(port)
    return sorted(out)


def agent_sockets() -> list[str]:
    return [p.format(uid=os.getuid()) for p in AGENT_SOCKETS]


def without_agents(env: Mapping[str, str]) -> dict[str, str]:
    """env less the variables that lead to the user's agents and desktop."""
    return {k: v for k, v in env.items() if k not in AGENT_VARIABLES}


def agent_socket_paths(env: Mapping[str, str]) -> list[str]:
    """The sockets the user's agent variables name (hidden, wherever they are)."""
    out = []
    for name in AGENT_VARIABLES:
        value = env.get(name, "")
        for part in re.split(r"[;,]", value):
            part = part.split("path=", 1)[-1].split(",", 1)[0]
            if os.path.isabs(part) and os.path.realpath(part) != "/":
                out.append(part)
    return out


def secrets(hide: Iterable[str], env: Mapping[str, str], common: str,
            brat_dir: str) -> list[str]:
    """What no sandbox of a repository may read: the user's keys and agent sockets, the
    replica's signing keys (common/grite/keys) and brat's own directory (the board's token and
    log, the trust file, every session's log and prompt)."""
    paths = [*hidden_paths(hide, env), *agent_sockets(), *agent_socket_paths(env),
             os.path.join(common, "grite", "keys"), brat_dir]
    # bwrap makes a mount point at the very path given: never through a symlink (/var/run)
    return sorted({os.path.realpath(p) for p in paths})


def describe_setting(mode: str, network: str, short: bool = False) -> str:
    """What a session started here now would be confined by (status, engine list); short:
    in a few words, for a heading."""
    if effective(mode) != "bwrap":
        return "none"
    try:
        net = network_mode(network)
    except UsageError as exc:
        return "bwrap, sessions fail" if short else f"bwrap: sessions fail: {exc}"
    if short:
        return (f"bwrap, no capabilities, {'userns' if user_namespaces() else 'no userns'}, "
                f"network {net}")
    return describe(Plan(network=net, userns=user_namespaces()))


def describe(plan: "Plan | None") -> str:
    """What a session's sandbox actually confines, as its record and `status` say it."""
    if plan is None:
        return "none"
    net = {"outbound": "network outbound only (pasta; host loopback "
                       + (f"ports {','.join(map(str, plan.forward))} forwarded)"
                          if plan.forward else "unreachable)"),
           "none": "no network", "open": "network open (the host's, loopback included)"}
    return ("bwrap: capabilities dropped, no new privileges, new session, "
            + ("user namespace" if plan.userns else "no user namespace (the kernel refused)")
            + ", " + net.get(plan.network, plan.network))


def bwrap_path() -> str | None:
    return shutil.which("bwrap")


def effective(mode: str, has_bwrap: bool | None = None) -> str:
    """What mode means here: "bwrap" or "none" (auto: bwrap when it is on PATH)."""
    if mode == "auto":
        has = bwrap_path() is not None if has_bwrap is None else has_bwrap
        return "bwrap" if has else "none"
    return mode


def unconfined_warning(mode: str) -> str:
    """What `status` and `engine list` say once when auto finds no bwrap ("" otherwise)."""
    if mode == "auto" and bwrap_path() is None:
        return ("witness.sandbox = \"auto\" and `bwrap` is not on PATH: sessions run "
                "unconfined (install bubblewrap, or set witness.sandbox = \"none\" to say so)")
    return ""


def _home_path(path: str, env: Mapping[str, str]) -> str:
    if path == "~" or path.startswith("~/"):
        home = env.get("HOME") or os.path.expanduser("~")
        return os.path.join(home, path[2:]) if path != "~" else home
    return path


def expand(entry: str, env: Mapping[str, str]) -> str | None:
    """A preset's state path: "~/x", "$VAR" or "$VAR/x" (None when VAR is unset), or
    "$VAR|~/x" (the first that is set)."""
    for alt in entry.split("|"):
        if alt.startswith("$"):
            name, _, rest = alt[1:].partition("/")
            value = env.get(name, "")
            if not value:
                continue
            alt = os.path.join(value, rest) if rest else value
        alt = _home_path(alt, env)
        if os.path.isabs(alt):
            return os.path.normpath(alt)
    return None


def state_paths(entries: Iterable[str], env: Mapping[str, str]) -> list[str]:
    """The engine's own state paths: an entry ending in "/" is a directory (made when missing,
    so the engine finds it writable), any other a file (bound only when it exists: a file
    cannot be made writable in a read-only directory)."""
    out = []
    for entry in entries:
        is_dir = entry.endswith("/")
        path = expand(entry.rstrip("/"), env)
        if path is None:
            continue
        if is_dir and not os.path.isdir(path):
            try:
                os.makedirs(path, exist_ok=True)
            except OSError:
                continue
        if os.path.lexists(path):
            out.append(path)
    return out


def hidden_paths(extra: Iterable[str], env: Mapping[str, str]) -> list[str]:
    return [p for p in (expand(e, env) for e in (*ALWAYS_HIDDEN, *extra)) if p]


def runtime_paths(env: Mapping[str, str]) -> list[str]:
    """What an engine needs to stay reachable wherever it lives: PATH, HOME, this Python."""
    out = [p for p in env.get("PATH", "").split(os.pathsep) if os.path.isabs(p)]
    out += [env.get("HOME", ""), sys.prefix, sys.base_prefix,
            os.path.dirname(os.path.dirname(os.path.realpath(sys.executable))),
            # this installation's own code: the agents' `git brat` launchers import it from
            # here, which may be a checkout or a virtualenv under /tmp (CI's are)
            os.path.dirname(os.path.dirname(os.path.realpath(git_brat.__file__)))]
    for p in list(out):
        if p and os.path.exists(p):
            out.append(os.path.realpath(p))
    for key in ("VIRTUAL_ENV", "PYTHONPATH"):
        out += [p for p in env.get(key, "").split(os.pathsep) if os.path.isabs(p)]
    return [p for p in out if p]


def named_paths(values: Iterable[str]) -> list[str]:
    """Existing absolute paths an engine is handed (its argv, its environment's values, each
    split like PATH): a config file under /tmp must stay readable in a private tmp."""
    tmp = os.path.realpath("/tmp")
    out = []
    for value in values:
        if not isinstance(value, str) or "/" not in value or len(value) > 4096:
            continue
        for part in value.split(os.pathsep):
            if os.path.isabs(part) and os.path.realpath(part) not in ("/", tmp) and \
                    os.path.exists(part):
                out.append(part)
    return out


def _depth_sorted(paths: Iterable[str]) -> list[str]:
    """The outermost of paths bound alike (same path outside and in), shallowest first.

    A path inside one already bound is visible through it, and bound again it can fail: a
    venv's bin/python is a symlink, and bwrap then cannot create the mount point through it
    inside the read-only bind of the venv ("Can't create file at …/bin/python")."""
    unique = set()
    for p in paths:
        if p and os.path.isabs(p):   # "" would be "." to bwrap: never a mount
            unique.add(os.path.normpath(p))
    out: list[str] = []
    for p in sorted(unique, key=lambda p: (p.count(os.sep), p)):
        if not any(p.startswith(q.rstrip(os.sep) + os.sep) for q in out):
            out.append(p)
    return out


def _mounts(plan: Plan) -> list[str]:
    """The binds, shadows, protections and hides, outermost first whatever their kind, so a
    narrower mount always lands on top of a wider one: a writable tree inside a hidden
    directory shows through it, a protected file inside a writable tree stays read-only."""
    ops: list[tuple[int, int, str, list[str]]] = []

    def add(kind: int, path: str, args: list[str]) -> None:
        ops.append((os.path.normpath(path).count(os.sep), kind, path, args))

    for p in _depth_sorted(plan.writable):
        add(0, p, ["--bind-try", p, p])
    for src, dest in plan.shadow:
        add(1, dest, ["--bind", src, dest])
    for src, dest in plan.shadow_ro:
        add(1, dest, ["--ro-bind", src, dest])
    for p in _depth_sorted(plan.protect):
        add(2, p, ["--ro-bind-try", p, p])
    read_only_last = []
    for p in _depth_sorted(plan.hide):
        if os.path.isdir(p) and not os.path.islink(p):
            add(3, p, ["--tmpfs", p])
            read_only_last += ["--remount-ro", p]
        elif os.path.lexists(p):
            add(3, p, ["--ro-bind", "/dev/null", p])
    out = []
    for _depth, _kind, _path, args in sorted(ops, key=lambda op: op[:3]):
        out += args
    return out + read_only_last


def argv(plan: Plan, command: list[str], bwrap: str = "bwrap") -> list[str]:
    """The command line that runs `command` in the sandbox `plan` describes.

    Whoever runs it, root included: every capability is dropped (with CAP_SYS_ADMIN a root
    agent remounts its read-only binds read-write), bwrap always sets no-new-privileges, and
    the command gets a session of its own (no TIOCSTI into a terminal it was started from).
    The user's agent variables are unset and their sockets hidden (see AGENT_VARIABLES).

    The pid namespace is the session: its first process dying (bwrap killed, or its parent
    gone) takes every process in it along, `setsid` children included. The command is that
    first process itself (--as-pid-1): with bwrap's own init in between, bwrap exits before
    reaping it, and the orphan lingers as a zombie in the session's process group until the
    system's init reaps it (seconds, in a container), which a session's end waits out.

    network "outbound": bwrap runs in a network namespace of its own, held before the
    command until pasta has joined it (netbox.py); only plan.forward's loopback ports of the
    host are reachable there."""
    out = [bwrap, "--die-with-parent", "--unshare-pid", "--as-pid-1", "--unshare-ipc",
           "--unshare-uts", "--cap-drop", "ALL", "--new-session"]
    if plan.userns:
        out.append("--unshare-user")
    if plan.network in ("none", "outbound"):
        out.append("--unshare-net")
    for name in AGENT_VARIABLES:
        out += ["--unsetenv", name]
    out += ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
    if plan.private_tmp:
        out += ["--tmpfs", "/tmp"]
        tmp = os.path.realpath("/tmp") + os.sep
        # A repository, a HOME or a venv under /tmp stays where it was (read-only).
        back = [p for p in plan.reachable if os.path.realpath(p).startswith(tmp)
                or p.startswith("/tmp/")]
        for p in _depth_sorted(back):
            out += ["--ro-bind-try", p, p]
    out += _mounts(plan)
    out = [*out, "--", *command]
    if plan.network == "outbound":
        # -S: no site-packages scan (a venv's .pth files cost more than the rest together)
        return [sys.executable, "-I", "-S", "-c", NETBOX_START, *pasta_argv(plan.forward), "--",
                *out]
    return out


NETBOX = os.path.join(os.path.dirname(os.path.abspath(__file__)), "netbox.py")
# netbox.py imported, not run as a script: a script is compiled at every start (2-3 ms), an
# import uses its cached bytecode. Its directory goes last on the path (-I puts none of it
# there), after the standard library, which no file beside it can then shadow.
NETBOX_START = ("import sys; sys.path.append(%r); import netbox; "
                "sys.exit(netbox.main(sys.argv[1:]))" % os.path.dirname(NETBOX))


def pasta_argv(forward: Iterable[int]) -> list[str]:
    """pasta, attached to the sandbox's network namespace: outbound TCP/UDP through this
    machine's sockets, no way in, the gateway not mapped to this machine's loopback, and of
    its loopback only the ports in `forward`."""
    ports = ",".join(str(int(p)) for p in forward) or "none"
    out = [pasta_path() or "pasta", "-f", "-q", "--config-net", "--no-map-gw",
           "-t", "none", "-u", "none", "-T", ports, "-U", "none",
           "--no-dhcp", "--no-ndp", "--no-dhcpv6", "--no-ra"]
    if os.geteuid() == 0:
        # pasta run by root drops to nobody, who may not join root's namespaces
        out += ["--runas", "0"]
    return out


__all__ = ["Plan", "MODES", "NETWORKS", "argv", "effective", "bwrap_path", "expand",
           "state_paths", "hidden_paths", "runtime_paths", "unconfined_warning",
           "named_paths", "secrets", "describe_setting", "network_mode", "network_warning", "loopback_ports", "describe",
           "user_namespaces", "pasta_path", "pasta_argv", "without_agents", "agent_sockets",
           "agent_socket_paths", "has_default_route", "NETBOX", "NETBOX_START",
           "AGENT_VARIABLES"]
