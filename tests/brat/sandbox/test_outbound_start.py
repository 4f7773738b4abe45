"""An outbound sandbox's start (issue 33: under 50 ms over a plain bwrap start): its launcher
(netbox.py, a Python of its own on every outbound session's start) pays only for what the
start needs. What it costs is in docs/performance.md (bench/bench_sandbox.py)."""

from __future__ import annotations

import builtins
import shutil
import subprocess
import sys

import pytest

from git_brat import process
from git_brat.brat.engines import netbox, sandbox


def test_the_outbound_launcher_starts_from_cached_bytecode_without_the_enum_machinery():
    # No "--" in its arguments: it stops right after its imports and its parent-death signal.
    proc = subprocess.run([sys.executable, "-I", "-S", "-X", "importtime", "-c",
                           sandbox.NETBOX_START, "no-separator"],
                          capture_output=True, text=True, timeout=60)
    imported = {line.rsplit("|", 1)[-1].strip() for line in proc.stderr.splitlines()
                if line.startswith("import time:")}
    assert "netbox" in imported, proc.stderr        # a module: its bytecode is cached
    assert "enum" not in imported and "signal" not in imported, sorted(imported)
    assert "ValueError" in proc.stderr and proc.returncode != 0


def test_the_launcher_reads_no_tcp_table_when_no_port_is_forwarded(monkeypatch):
    # Each read of /proc/PID/net/tcp walks the kernel's whole TCP hash (milliseconds).
    opened = []
    real_open = builtins.open

    def noting_open(path, *args, **kwargs):
        opened.append(str(path))
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", noting_open)
    assert netbox.listening(1, set())
    assert not [p for p in opened if "/net/tcp" in p], opened


@pytest.mark.skipif(not (shutil.which("bwrap") and sandbox.pasta_path()
                         and sandbox.has_default_route()),
                    reason="needs bwrap, pasta (Debian: passt) and a route out")
def test_an_outbound_sandbox_leaves_nothing_in_its_process_group_once_its_command_ends():
    """The witness waits at a session's end for the session's process group to empty. pasta,
    killed as the sandbox ends and not waited for, stays a zombie until init reaps it
    (about 2 s in a container): in that group it held every outbound session's end so long."""
    plan = sandbox.Plan(network="outbound", userns=sandbox.user_namespaces())
    proc = subprocess.Popen(sandbox.argv(plan, ["true"], sandbox.bwrap_path()), cwd="/",
                            start_new_session=True)
    assert proc.wait(timeout=60) == 0
    assert not process.group_alive(proc.pid)
