"""(its own process, stdlib only) A sandbox whose network goes out through pasta.

    python -I -S -c "<sandbox.NETBOX_START>" PASTA [OPTION]... -- BWRAP [OPTION]... -- COMMAND...

(or `python -I -S netbox.py ...`). It is on every outbound session's start, so it imports
little: `_signal`, not `signal` (whose enums cost more than the rest of the imports), and is
itself imported from its cached bytecode (sandbox.NETBOX_START), not compiled at each start.

bwrap makes the sandbox's namespaces and holds its command (--info-fd tells its pid,
--block-fd holds it); pasta joins that network namespace and configures it; once its default
route is there the command is let go. pasta dies with this process (parent-death signal), and
is stopped when bwrap ends (the
command is let go only once pasta listens on the forwarded ports too); the exit status is bwrap's. A pasta that cannot attach fails the
session before the command runs, saying so.
"""

import _signal as signal     # the C module itself: `signal` imports enum (4 ms a start)
import ctypes
import fcntl
import os
import sys
import time

ATTACH_TIMEOUT = 10.0
NEST_WAIT = 2.0             # at most this long for bwrap's nested user namespace (see nested)
PR_SET_PDEATHSIG = 1
NS_GET_USERNS = 0xB701      # ioctl: the user namespace that owns a namespace


def say(text: str) -> None:
    os.write(2, f"brat sandbox: {text}\n".encode())


def spawn(argv: list[str], keep: tuple[int, ...] = (), die_with_us: bool = False,
          own_group: bool = False) -> int:
    parent = os.getpid()
    pid = os.fork()
    if pid == 0:
        try:
            if own_group:
                os.setpgid(0, 0)
            if die_with_us:
                ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
                if os.getppid() != parent:
                    os._exit(1)
            signal.signal(signal.SIGPIPE, signal.SIG_DFL)   # as Python found it
            for fd in keep:
                os.set_inheritable(fd, True)
            os.execvp(argv[0], argv)
        finally:
            os._exit(127)
    return pid


def child_pid(fd: int) -> int | None:
    """bwrap's {"child-pid": N, ...} (None: it ended before telling)."""
    data = b""
    while b"}" not in data:
        chunk = os.read(fd, 4096)
        if not chunk:
            return None
        data += chunk
    # (its first field; json's import alone costs more than this whole search)
    _, _, rest = data.partition(b'"child-pid":')
    digits = rest.lstrip()[:12]
    n = len(digits) - len(digits.lstrip(b"0123456789"))
    return int(digits[:n]) if n else None


def mapped(pid: int) -> bool:
    """Whether the user namespace of pid has its uid map yet. bwrap tells the child's pid
    before an unprivileged child has written its own map; pasta joining the namespace before
    that finds no user it may be there and exits ("Couldn't switch to pasta namespaces")."""
    try:
        with open(f"/proc/{pid}/uid_map") as f:
            return bool(f.read().strip())
    except OSError:
        return False


def network_owner(pid: int) -> int | None:
    """An open descriptor of the user namespace owning pid's network namespace (None: root,
    or pid is gone).

    pasta given only a pid joins that process's user namespace; but a plain user's bwrap,
    after making the sandbox's namespaces (the network one owned by its first user
    namespace), makes a nested user namespace for the command (it does for --dev), and a
    pasta that joined the nested one may not configure the network ("Couldn't switch to
    pasta namespaces"). Whether pasta starts before or after that nesting is a race (lost
    most times under load), so pasta is told the owner instead. Root's bwrap does not nest,
    and root's pasta, its capabilities dropped, may not open this process's descriptors."""
    if os.geteuid() == 0:
        return None
    try:
        net = os.open(f"/proc/{pid}/ns/net", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        return fcntl.ioctl(net, NS_GET_USERNS)
    except OSError:
        return None
    finally:
        os.close(net)


def nested(pid: int, owner: int) -> bool:
    """Whether pid has left the user namespace owning its network for a nested one: a plain
    user's bwrap does that after setting up the sandbox's loopback and mounts, so pasta
    started then configures the network without racing bwrap over the loopback ("bwrap:
    loopback: Failed RTM_NEWADDR")."""
    try:
        return os.stat(owner).st_ino != os.stat(f"/proc/{pid}/ns/user").st_ino
    except OSError:
        return True     # gone: pasta's start will say so


def routed(pid: int) -> bool:
    """Whether the namespace of pid has a default route yet (pasta's configuration done)."""
    try:
        with open(f"/proc/{pid}/net/route") as f:
            return any(row.split()[1:2] == ["00000000"] for row in f.read().splitlines()[1:])
    except OSError:
        return False


def forwarded(pasta: list[str]) -> set[int]:
    """The loopback ports pasta's -T forwards (the last -T; "none": none)."""
    spec = "none"
    for i, word in enumerate(pasta[:-1]):
        if word in ("-T", "--tcp-ns"):
            spec = pasta[i + 1]
    return {int(p) for p in spec.split(",") if p.isdigit()}


def listening(pid: int, ports: set[int]) -> bool:
    """Whether pasta listens inside the namespace on every forwarded port yet.

    Each table read walks the kernel's whole TCP hash, every namespace's (3-7 ms a read with
    a 262144-bucket table, measured): none is read when no port is forwarded, and tcp6 only
    when tcp lacks one."""
    seen: set[int] = set()
    for table in ("tcp", "tcp6"):
        if ports <= seen:
            break
        try:
            with open(f"/proc/{pid}/net/{table}") as f:
                rows = f.read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            cols = row.split()
            if len(cols) > 3 and cols[3] == "0A":
                seen.add(int(cols[1].rsplit(":", 1)[1], 16))
    return ports <= seen


def exit_status(status: int) -> int:
    return os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else \
        128 + os.WTERMSIG(status)


def die_with_parent() -> None:
    """As bwrap's --die-with-parent: the witness killed, its sandbox goes too."""
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() == 1:
        sys.exit(1)


def main(argv: list[str]) -> int:
    die_with_parent()
    cut = argv.index("--")
    pasta, box = argv[:cut], argv[cut + 1:]
    info_r, info_w = os.pipe()
    block_r, block_w = os.pipe()
    box = [box[0], "--info-fd", str(info_w), "--block-fd", str(block_r), *box[1:]]
    bwrap = spawn(box, keep=(info_w, block_r))
    os.close(info_w)
    os.close(block_r)
    inner = child_pid(info_r)
    os.close(info_r)
    if inner is None:       # bwrap failed before its namespaces: it said why
        os.close(block_w)
        return exit_status(os.waitpid(bwrap, 0)[1])
    deadline = time.monotonic() + ATTACH_TIMEOUT
    while not mapped(inner) and time.monotonic() < deadline:
        time.sleep(0.001)
    owner = network_owner(inner)
    settle = min(deadline, time.monotonic() + NEST_WAIT)
    while owner is not None and not nested(inner, owner) and time.monotonic() < settle:
        time.sleep(0.001)
    userns = ["--userns", f"/proc/{os.getpid()}/fd/{owner}"] if owner is not None else []
    # pasta in a group of its own: killed, not waited for, at the end, it is a zombie until
    # init reaps it (seconds, in a container), and in the session's group it held the
    # witness's end-of-session wait for that group the whole time (+1.6 s a session, measured)
    net = spawn([*pasta, *userns, str(inner)], die_with_us=True, own_group=True)
    ports = forwarded(pasta)
    while not (routed(inner) and listening(inner, ports)):
        if os.waitpid(net, os.WNOHANG)[0] or time.monotonic() > deadline:
            say("pasta could not give the sandbox its outbound network (see its message "
                "above): set witness.sandbox_network to \"none\" or \"open\"")
            for pid in (inner, bwrap):   # the held command must never run unconfined of it
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            os.waitpid(bwrap, 0)
            return 125
        time.sleep(0.001)
    if owner is not None:       # pasta joined it: configured, it needs the path no more
        os.close(owner)
    os.write(block_w, b"1")
    os.close(block_w)
    try:
        status = os.waitpid(bwrap, 0)[1]
    finally:
        try:   # not waited for: its teardown would hold the session's end (init reaps it)
            os.kill(net, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return exit_status(status)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
