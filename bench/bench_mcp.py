"""`git brat mcp`'s cost, and what the CLI does not pay for it.

Measures, in a fresh repository with a convoy of tasks: `git brat --version` and `git brat
status --json` (median wall time, and whether any module of the MCP SDK was imported, read
from `python -X importtime`), the SDK's own import (`from mcp.server import MCPServer`), and
a server's start: launch + initialize + list tools by the SDK's client over stdio, then one
brat_status call.

With --before CHECKOUT (another checkout of git-brat, e.g. main's), the two CLI commands are
timed from both, alternately, so the machine's drift does not enter the comparison.

Usage: python bench/bench_mcp.py [--runs N] [--tasks N] [--before CHECKOUT]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchlib import ROOT, env, time_cmd


def run(cmd: list[str], cwd) -> str:
    return subprocess.run(cmd, cwd=cwd, env=env(), check=True, capture_output=True,
                          text=True).stdout


def project(path: Path, tasks: int) -> Path:
    run(["git", "init", "-q", "-b", "main", str(path)], ROOT)
    run(["git", "commit", "-q", "--allow-empty", "-m", "start"], path)
    run(["git", "brat", "init"], path)
    # Without the [inbox] section init writes now, an older checkout reads the file too.
    cfg = path / ".brat" / "config.toml"
    text = cfg.read_text()
    start = text.find("[inbox]")
    if start >= 0:
        end = text.find("\n[", start + 1)
        cfg.write_text(text[:start] + (text[end + 1:] if end >= 0 else ""))
    cid = run(["git", "brat", "convoy", "create", "bench"], path).strip()
    for i in range(tasks):
        run(["git", "brat", "task", "create", "--convoy", cid, f"task {i}"], path)
    return path


def sdk_modules(args: list[str], cwd) -> list[str]:
    """Modules of the MCP SDK a CLI run imports (from -X importtime)."""
    probe = (f"import sys; sys.argv = ['git-brat', *{args!r}]\n"
             "from git_brat.brat.cli import main\nmain()\n")
    err = subprocess.run([sys.executable, "-X", "importtime", "-c", probe], cwd=cwd,
                         env={**env(), "PYTHONPATH": str(ROOT)}, capture_output=True,
                         text=True).stderr
    names = [line.rsplit("|", 1)[-1].strip() for line in err.splitlines() if "|" in line]
    return [n for n in names if n == "mcp" or n.startswith(("mcp.", "mcp_types"))]


def compare(args: list[str], repo, runs: int, before: str | None) -> tuple[float, float]:
    """Median wall time of `git-brat ARGS` from this checkout (and from before's), alternately."""
    mine, theirs = [], []
    for _ in range(runs):
        mine.append(time_cmd([str(ROOT / "bin" / "git-brat"), *args], repo, 1))
        if before:
            theirs.append(time_cmd([str(Path(before) / "bin" / "git-brat"), *args], repo, 1))
    return statistics.median(mine), statistics.median(theirs) if theirs else 0.0


def server_start(cwd, runs: int) -> tuple[float, float]:
    """(median seconds to launch + initialize + list tools, median seconds of brat_status)."""
    from mcp import Client, StdioServerParameters

    async def once() -> tuple[float, float]:
        t0 = time.perf_counter()
        params = StdioServerParameters(command="git", args=["brat", "mcp"], cwd=str(cwd),
                                       env=env())
        async with Client(params) as client:
            await client.list_tools()
            t1 = time.perf_counter()
            await client.call_tool("brat_status", {})
            return t1 - t0, time.perf_counter() - t1
    got = [asyncio.run(once()) for _ in range(runs)]
    return statistics.median(g[0] for g in got), statistics.median(g[1] for g in got)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--tasks", type=int, default=50)
    ap.add_argument("--before", help="another checkout whose bin/git-brat is compared")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        repo = project(Path(tmp) / "repo", a.tasks)
        for args in (["--version"], ["status", "--json"]):
            here, before = compare(args, repo, a.runs, a.before)
            print(f"git brat {' '.join(args):<14} {here * 1000:7.0f} ms" +
                  (f" (before: {before * 1000:.0f} ms)" if a.before else "") +
                  f"   SDK modules imported: {len(sdk_modules(args, repo))}")
        sdk = time_cmd([sys.executable, "-c", "from mcp.server import MCPServer"], repo, a.runs)
        print(f"{'SDK import':<23} {sdk * 1000:7.0f} ms   (paid by `git brat mcp` alone)")
        start, call = server_start(repo, a.runs)
        print(f"{'mcp start + tools/list':<23} {start * 1000:7.0f} ms")
        print(f"{'brat_status call':<23} {call * 1000:7.0f} ms   ({a.tasks} tasks)")


if __name__ == "__main__":
    main()
