"""`git brat mcp`: an MCP server on stdio whose tools are the CLI's library calls."""

from __future__ import annotations

import click

from git_brat.errors import UsageError

INSTALL = "pip install 'git-brat[mcp]'"


@click.command()
def mcp():
    """Serve MCP on stdin/stdout: status, inbox, task list/show/create/reply/approve/comment,
    convoy create, ready (brat_* names). For an MCP client's config (.mcp.json), not a
    terminal. Inside an agent's session only that session's task is reached."""
    from git_brat.brat import board, mcpserver
    board.open_grite()   # not a git-brat repository: said now, not on the first call
    try:
        server = mcpserver.build()
    except ModuleNotFoundError as exc:
        if (exc.name or "").split(".")[0] != "mcp":
            raise
        raise UsageError(f"`git brat mcp` needs the MCP SDK: {INSTALL}") from None
    server.run()


def register(group: click.Group) -> None:
    group.add_command(mcp)
