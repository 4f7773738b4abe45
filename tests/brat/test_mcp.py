"""`git brat mcp` driven by the MCP SDK's own client over stdio: every tool answers what the
same command's --json prints, a refusal is an MCP tool error, and inside an agent's session
the server reaches only that session's task."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from bratkit import convoy, move, task
from helpers import brat, brat_json, git, wal_tip
from witnesskit import AGENTS, make_bench

mcp = pytest.importorskip("mcp")   # the optional extra (CI installs it)
ROOT = Path(__file__).resolve().parents[2]


def _env(**extra) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("BRAT_")}
    env.update(extra)
    return env


def call_all(repo, calls: list[tuple[str, dict]], **env) -> tuple[list[str], list]:
    """(the tools the server lists, each call's result) from one server over stdio."""
    from mcp import Client, StdioServerParameters

    async def session():
        params = StdioServerParameters(command="git", args=["brat", "mcp"], cwd=str(repo),
                                       env=_env(**env))
        async with Client(params, read_timeout_seconds=60) as client:
            names = [t.name for t in (await client.list_tools()).tools]
            return names, [await client.call_tool(name, args) for name, args in calls]
    return asyncio.run(asyncio.wait_for(session(), 120))


def value(result):
    assert not result.is_error, result.content[0].text
    return json.loads(result.content[0].text)


def _review(repo, c: str) -> str:
    """A task its agent finished, its branch here: it waits for review."""
    t = task(repo, c, "Finished work")
    move(repo, t, "running", "needs-review")
    git(repo, "branch", f"brat/{t}", "main")
    return t


@pytest.mark.slow
def test_every_tool_answers_what_the_cli_prints_as_json(brepo):
    c = convoy(brepo, "Work")
    asks = task(brepo, c, "Asks")
    brat(brepo, "task", "update", asks, "--status", "blocked", "-m", "which database?")
    done = _review(brepo, c)
    later = task(brepo, c, "Later", "--needs", asks)
    cli = {"status": brat_json(brepo, "status"), "inbox": brat_json(brepo, "inbox"),
           "list": brat_json(brepo, "task", "list"),
           "blocked": brat_json(brepo, "task", "list", "--status", "blocked"),
           "ready": brat_json(brepo, "task", "ready"),
           "show": brat_json(brepo, "task", "show", later[:6])}
    names, res = call_all(brepo, [
        ("brat_status", {}), ("brat_inbox", {}), ("brat_task_list", {}),
        ("brat_task_list", {"status": ["blocked"]}), ("brat_ready", {}),
        ("brat_task_show", {"task": later[:6]}),
        ("brat_convoy_create", {"title": "Next", "body": "more"}),
        ("brat_task_create", {"convoy": c, "title": "New", "body": "do it", "priority": 1}),
        ("brat_task_reply", {"task": asks, "message": "postgres"}),
        ("brat_task_approve", {"task": done, "message": "good"}),
        ("brat_task_comment", {"task": later, "message": "soon"})])
    assert set(names) >= {"brat_status", "brat_inbox", "brat_task_list", "brat_ready",
                          "brat_task_show", "brat_task_create", "brat_convoy_create",
                          "brat_task_reply", "brat_task_approve", "brat_task_comment"}
    got = [value(r) for r in res]
    for mine in (got[0], cli["status"]):
        mine.pop("generated_at")
    assert got[:6] == [cli[k] for k in ("status", "inbox", "list", "blocked", "ready", "show")]
    new_convoy, new_task, replied, approved, commented = got[6:]
    assert new_convoy == brat_json(brepo, "convoy", "show", new_convoy["id"])
    assert new_task == brat_json(brepo, "task", "show", new_task["id"])
    assert (new_task["title"], new_task["priority"], new_task["body"]) == ("New", 1, "do it")
    assert replied["status"] == "queued" and replied["comments"][-1]["body"].endswith("postgres")
    assert approved["approved_head"] == git(brepo, "rev-parse", f"brat/{done}")
    assert commented == brat_json(brepo, "task", "show", later)
    assert commented["comments"][-1]["body"] == "soon"


@pytest.mark.slow
def test_a_refusal_is_an_mcp_tool_error_with_the_clis_message_and_writes_nothing(brepo):
    c = convoy(brepo, "Work")
    queued = task(brepo, c, "Not finished")
    tip = wal_tip(brepo)
    cli = brat(brepo, "task", "approve", queued, check=False).err.strip()
    _, res = call_all(brepo, [("brat_task_approve", {"task": queued}),
                              ("brat_task_show", {"task": "ffffffff"}),
                              ("brat_task_list", {"status": ["sideways"]})])
    assert [r.is_error for r in res] == [True, True, True]
    assert cli.removeprefix("git-brat: error: ") in res[0].content[0].text
    assert "ffffffff" in res[1].content[0].text and "sideways" in res[2].content[0].text
    assert wal_tip(brepo) == tip


@pytest.mark.slow
def test_inside_a_session_the_server_refuses_every_write_but_to_its_own_task(brepo):
    c = convoy(brepo, "Work")
    mine, other = task(brepo, c, "Mine"), task(brepo, c, "Another's")
    other_done = _review(brepo, c)
    tip = wal_tip(brepo)
    _, res = call_all(brepo, [
        ("brat_task_comment", {"task": other, "message": "I took over"}),
        ("brat_task_reply", {"task": other, "message": "redo it"}),
        ("brat_task_approve", {"task": other_done}),
        ("brat_task_approve", {"task": mine}),
        ("brat_task_create", {"convoy": c, "title": "More work for me"}),
        ("brat_convoy_create", {"title": "Mine now"})],
        BRAT_SESSION="0" * 32, BRAT_TASK=mine)
    assert [r.is_error for r in res] == [True] * 6
    assert "task " + other[:7] + " is another's" in res[0].content[0].text
    assert all("an agent's session cannot" in r.content[0].text for r in res[1:6])
    assert wal_tip(brepo) == tip      # nothing written
    assert brat_json(brepo, "task", "show", other_done)["approved_head"] == ""


def test_the_cli_never_imports_the_mcp_sdk(brepo):
    probe = ("import sys\nfrom git_brat.brat.cli import cli\n"
             "for args in (['--version'], ['status', '--json'], ['inbox']):\n"
             "    try:\n        cli.main(args, prog_name='git-brat')\n"
             "    except SystemExit:\n        pass\n"
             "print(sorted(m for m in sys.modules if m == 'mcp' or m.startswith('mcp.')))\n")
    out = subprocess.run([sys.executable, "-c", probe], cwd=brepo, capture_output=True,
                         text=True, timeout=60, env=_env(PYTHONPATH=str(ROOT)))
    assert out.stdout.strip().splitlines()[-1] == "[]", out.stderr


@pytest.mark.slow
@pytest.mark.parametrize("sandbox", ["none", "bwrap"])
def test_an_agent_in_its_session_comments_on_its_own_task_through_mcp_and_no_other(
        repo, tmp_path, sandbox):
    if sandbox == "bwrap" and not shutil.which("bwrap"):
        pytest.skip("no bwrap here")
    bench = make_bench(repo, tmp_path)
    record = tmp_path / "mcp.jsonl"
    record.touch()
    bench.config(engines__mcp__command=json.dumps([sys.executable, str(AGENTS / "mcp_agent.py"),
                                                   "{prompt}"]),
                 engines__mcp__state=json.dumps([str(record)]),
                 witness__engine="mcp", witness__sandbox=sandbox, witness__max_retries="0",
                 witness__sandbox_network="none")
    c = bench.convoy()
    other = bench.task(c, "Another's task")
    bench.brat("task", "update", other, "--status", "blocked", "-m", "parked")
    mine = bench.task(c, "Mine", body=f"OTHER: {other}")
    bench.brat("witness", "run", "--once", check=False,
               env={"MCP_RECORD": str(record), "PYTHONPATH": str(ROOT)})
    calls = [json.loads(line) for line in record.read_text().splitlines()]
    assert [c["is_error"] for c in calls] == [False, True, True, True], calls
    assert json.loads(calls[0]["text"])["id"] == mine
    # refused by the server, or (in a sandbox) by the witness the comment goes through
    assert other[:7] in calls[1]["text"] and ("is another's" in calls[1]["text"] or
                                              "cannot speak about task" in calls[1]["text"])
    own = bench.show(mine)["comments"]
    assert [x["body"] for x in own] == ["halfway there"]
    assert bench.show(other)["comments"] == [] and bench.show(other)["status"] == "blocked"


# The tools over other roles' modules, with the command whose --json each must equal.
OPTIONAL = {"brat_kb_search": ({"words": "retry"}, ["brat", "kb", "search", "retry"]),
            "brat_context_query": ({"name": "main"}, ["grite", "context", "query", "main"])}


@pytest.mark.slow
def test_the_kb_and_context_tools_answer_as_their_commands_where_this_git_brat_has_them(brepo):
    from git_brat.brat import mcpserver
    present = [f.__name__ for f in mcpserver.optional_tools()]
    if not present:
        pytest.skip("neither git_brat.brat.kb nor git_brat.grite.context is in this checkout")
    (brepo / "app.py").write_text("def main():\n    return 1\n")
    git(brepo, "add", "app.py")
    git(brepo, "commit", "-qm", "app")
    names, res = call_all(brepo, [(n, OPTIONAL[n][0]) for n in present])
    assert set(present) <= set(names)
    for name, r in zip(present, res):
        args = OPTIONAL[name][1]
        cli = json.loads(subprocess.run(["git", *args, "--json"], cwd=brepo, text=True,
                                        capture_output=True, check=True, env=_env()).stdout)
        assert value(r) == cli, name
