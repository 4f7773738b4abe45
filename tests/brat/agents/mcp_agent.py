#!/usr/bin/env python3
"""An agent that reaches git-brat through `git brat mcp` from inside its session: it comments on
its own task, then tries another task's writes, and records what each call answered in
$MCP_RECORD (one JSON line per call: tool, is_error, text). Its prompt names the other task as
`OTHER: <id>`."""
import asyncio
import json
import os
import re
import sys

from mcp import Client, StdioServerParameters

other = re.search(r"OTHER: ([0-9a-f]{32})", sys.argv[-1]).group(1)
CALLS = [("brat_task_comment", {"message": "halfway there"}),
         ("brat_task_comment", {"task": other, "message": "I took over"}),
         ("brat_task_reply", {"task": other, "message": "redo it"}),
         ("brat_task_create", {"convoy": other, "title": "more for me"})]


async def main():
    params = StdioServerParameters(command="git", args=["brat", "mcp"], env=dict(os.environ))
    async with Client(params, read_timeout_seconds=60) as client:
        for name, args in CALLS:
            r = await client.call_tool(name, args)
            with open(os.environ["MCP_RECORD"], "a") as f:
                f.write(json.dumps({"tool": name, "is_error": r.is_error,
                                    "text": r.content[0].text}) + "\n")

asyncio.run(asyncio.wait_for(main(), 90))
