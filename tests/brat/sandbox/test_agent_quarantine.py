"""A sandboxed session is a quarantine, whoever runs the witness (root, as CI and containers
do, or a plain user: test_as_a_plain_user.py runs this file again as one): its agent cannot
remount its binds, read the user's or the repository's secrets, reach this machine's loopback
services or the user's agents; its ordinary commit still lands and the task goes to review."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import git
from agentkit import verdicts
from witnesskit import make_bench

AGENT = Path(__file__).resolve().parent / "secrets_agent.py"
needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None,
                                 reason="bubblewrap (bwrap) is not installed here")
needs_pasta = pytest.mark.skipif(shutil.which("pasta") is None,
                                 reason="pasta (Debian: passt) is not installed here")
EVERY_ATTEMPT = {"remount-rw", "signing-keys", "board-token", "board-log", "trust-file",
                 "other-session-log", "other-session-prompt", "loopback-service",
                 "ssh-agent-env", "ssh-agent", "dbus-env", "dbus", "gpg-agent",
                 "x11-display-env", "x11-abstract"}


def _listen_unix(path: Path | str) -> socket.socket:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    if isinstance(path, Path):
        path.parent.mkdir(parents=True, exist_ok=True)
        s.bind(str(path))
    else:
        s.bind("\0" + path)      # an abstract socket, as X11's: no file to hide
    s.listen(8)
    return s


def _ssh_agent(sock: Path) -> int | None:
    """A real ssh-agent on sock (its pid), or None where ssh-agent is missing."""
    if shutil.which("ssh-agent") is None:
        return None
    out = subprocess.run(["ssh-agent", "-s", "-a", str(sock)], capture_output=True, text=True,
                         timeout=30, check=True).stdout
    return int(out.split("SSH_AGENT_PID=")[1].split(";")[0])


def _plant_secrets(common: Path, other_sid: str) -> None:
    """The board's state, the trust file and another session's log and prompt, as a running
    board and an earlier session leave them."""
    brat_dir = common / "brat"
    (brat_dir / "ui.json").write_text(json.dumps({"url": "http://127.0.0.1:1/?token=T0KEN"}))
    (brat_dir / "ui.log").write_text("board log T0KEN\n")
    if not (brat_dir / "trust.json").exists():
        (brat_dir / "trust.json").write_text("{}\n")
    sessions = brat_dir / "sessions"
    (sessions / other_sid).mkdir(parents=True, exist_ok=True)
    (sessions / f"{other_sid}.log").write_text("another session's log\n")
    (sessions / other_sid / "prompt.txt").write_text("another session's prompt\n")


@needs_bwrap
@needs_pasta
def test_a_quarantined_agent_reaches_no_secret_service_or_agent_and_its_commit_lands(
        repo, tmp_path):
    import uuid
    bench = make_bench(repo, tmp_path)
    bench.config(engines__hostile__command=json.dumps(["python3", str(AGENT), "{prompt}"]),
                 witness__engine="hostile", witness__sandbox="bwrap",
                 witness__sandbox_network="outbound", witness__max_retries="0")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "brat config")
    common = repo / ".git"
    assert any((common / "grite" / "keys").iterdir())     # the replica's signing key
    other_sid = uuid.uuid4().hex
    _plant_secrets(common, other_sid)
    home = Path(os.environ["HOME"])
    run = home / "run"          # the user's runtime directory (as /run/user/<uid>)
    listeners = [_listen_unix(run / "bus"), _listen_unix(run / "gnupg" / "S.gpg-agent"),
                 _listen_unix(f"/tmp/.X11-unix/X{os.getpid() % 1000 + 100}")]
    x11 = listeners[-1].getsockname()[1:].decode()
    board = socket.socket()
    board.bind(("127.0.0.1", 0))
    board.listen(8)
    ssh_sock = home / "ssh-agent.sock"
    ssh_pid = _ssh_agent(ssh_sock)
    if ssh_pid is None:
        listeners.append(_listen_unix(ssh_sock))
    secrets = {"other_log": str(common / "brat" / "sessions" / f"{other_sid}.log"),
               "other_prompt": str(common / "brat" / "sessions" / other_sid / "prompt.txt"),
               "port": board.getsockname()[1], "ssh": str(ssh_sock),
               "dbus": str(run / "bus"), "gpg": str(run / "gnupg" / "S.gpg-agent"),
               "x11": x11}
    env = {"HOSTILE_SECRETS": json.dumps(secrets), "SSH_AUTH_SOCK": str(ssh_sock),
           "DBUS_SESSION_BUS_ADDRESS": f"unix:path={run / 'bus'}", "XDG_RUNTIME_DIR": str(run),
           "DISPLAY": f":{x11.rsplit('X', 1)[1]}"}
    checkout_before = sorted(p.name for p in repo.iterdir())
    cid = bench.convoy()
    tid = bench.task(cid, "Say hello")
    try:
        bench.brat("witness", "run", "--once", "--json", env=env, timeout=300)
    finally:
        for s in (*listeners, board):
            s.close()
        if ssh_pid:
            os.kill(ssh_pid, 15)
    sess = bench.sessions(tid)[0]
    assert sess["sandbox"] == "bwrap"
    assert "capabilities dropped" in sess["confinement"], sess
    assert "network outbound only" in sess["confinement"], sess
    log = (common / "brat" / "sessions" / f"{sess['id']}.log").read_text()
    said = verdicts(log, "SECRET")
    assert EVERY_ATTEMPT <= set(said), log
    assert [k for k in EVERY_ATTEMPT if said[k] != "refused"] == [], log
    assert "T0KEN" not in log and "another session's" not in log, log
    assert said.get("commit") == "ok" and said.get("done") == "ok", log
    assert sorted(p.name for p in repo.iterdir()) == checkout_before
    assert bench.show(tid)["status"] == "needs-review"
    assert git(repo, "show", f"brat/{tid}:hello.txt") == "hello from the quarantine"


PROBE = """
import socket, sys
for name, port in (("endpoint", sys.argv[1]), ("other", sys.argv[2])):
    try:
        socket.create_connection(("127.0.0.1", int(port)), 5).close()
        print("PROBE", name, "reached")
    except OSError as exc:
        print("PROBE", name, "refused", exc)
"""


@needs_bwrap
@needs_pasta
def test_an_outbound_sandbox_reaches_the_engines_own_loopback_endpoint_and_no_other_port(
        repo, tmp_path):
    bench = make_bench(repo, tmp_path)
    servers = []
    for _ in range(2):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        s.listen(8)
        servers.append(s)
    endpoint, other = (s.getsockname()[1] for s in servers)
    try:
        bench.config(engines__probe__command=json.dumps(
            ["python3", "-c", PROBE, str(endpoint), str(other), "{prompt}"]),
            witness__engine="probe", witness__sandbox="bwrap", witness__max_retries="0",
            witness__sandbox_network="outbound")
        tid = bench.task(bench.convoy(), "Probe")
        bench.brat("witness", "run", "--once", check=False, timeout=300,
                   env={"ANTHROPIC_BASE_URL": f"http://127.0.0.1:{endpoint}"})
    finally:
        for s in servers:
            s.close()
    sess = bench.sessions(tid)[0]
    log = (repo / ".git" / "brat" / "sessions" / f"{sess['id']}.log").read_text()
    said = [line for line in log.splitlines() if line.startswith("PROBE ")]
    assert "PROBE endpoint reached" in said, log
    assert any(line.startswith("PROBE other refused") for line in said), log
    assert f"ports {endpoint} forwarded" in sess["confinement"], sess


# (a shell's awk, not a Python: the sandbox's private /tmp hides a virtualenv under /tmp)
ROUTE_PROBE = "awk 'NR > 1 && $2 == \"00000000\" {found = 1} END {exit !found}' /proc/net/route"


@needs_bwrap
@needs_pasta
def test_outbound_sandboxes_started_all_at_once_each_get_their_network(tmp_path):
    """As a plain user, bwrap nests a second user namespace after making the sandbox's
    network; a pasta that started after that nesting could not configure the network, and
    many sandboxes started at once lost that race most times (exit 125, the agent never ran).
    Every one of them starts, and its command sees the route out pasta gave it."""
    from concurrent.futures import ThreadPoolExecutor

    from git_brat.brat.engines import sandbox
    plan = sandbox.Plan(network="outbound", userns=sandbox.user_namespaces(),
                        reachable=[str(tmp_path)])
    # (the launcher's python is this user's: the plain-user pass's interpreter may be one only
    # root may start)
    python = sys.executable if os.access(sys.executable, os.X_OK) else shutil.which("python3")
    command = sandbox.argv(plan, ["/bin/sh", "-c", ROUTE_PROBE], bwrap=shutil.which("bwrap"))
    command = [python if word == sys.executable else word for word in command]

    def start(_):
        proc = subprocess.run(command, capture_output=True, text=True, timeout=120,
                              start_new_session=True)
        return proc.returncode, proc.stderr[-400:]

    with ThreadPoolExecutor(8) as pool:
        ended = list(pool.map(start, range(24)))
    failed = [end for end in ended if end[0] != 0]
    assert not failed, f"{len(failed)} of {len(ended)} sandboxes failed: {failed[:3]}"
