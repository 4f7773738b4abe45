"""`git brat ui [--port] [--host] [--no-open] [--detach]`, `git brat ui stop`: the local web board."""

from __future__ import annotations

import click

from git_brat.brat.cli.common import open_grite
from git_brat.clikit import emit, json_option, warn


@click.group(invoke_without_command=True)
@click.option("--port", type=click.IntRange(0, 65535), default=0, show_default=True,
              help="Port to listen on (0: a free one).")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to listen on; anything but loopback is warned about.")
@click.option("--no-open", is_flag=True, help="Do not open a browser.")
@click.option("--detach", is_flag=True, help="Run in the background; `git brat ui stop` stops it.")
@click.option("--in-background", is_flag=True, hidden=True,
              help="Started by --detach: print the address without its token (to the log).")
@json_option
@click.pass_context
def ui(ctx, port, host, no_open, detach, in_background, as_json):
    """Serve a live web board of this repository: tasks in columns with a search, what needs
    you, a review screen per task, sessions and their logs, the merge queue, the mayor; with
    actions (approve, request changes with line notes, re-queue, block, drop, stop; create a
    task or convoy, start and stop a witness, run a refinery pass, push the log).

    Prints one line, the address with its access token (--json: {"url", "port", "pid"});
    when a board already runs for this repository, its address, and starts no other.
    """
    if ctx.invoked_subcommand is not None:
        return
    from git_brat.brat.ui import serve
    g = open_grite()
    already = None if in_background else serve.running(g.store)
    if already is not None:   # one board per clone: say where it is (the owner may read its token)
        shown = serve.Shown(already.url, already.port, already.pid)
        emit(as_json, shown, lambda: shown.url)
        if not no_open:
            serve.open_browser(g.store, shown.url)
        return
    note = serve.warn_host(host)
    if note:
        warn(note)
    if detach:
        shown = serve.detach(g.store, ["--port", str(port), "--host", host])
        emit(as_json, shown, lambda: shown.url)
        if not no_open:
            serve.open_browser(g.store, shown.url)
        return

    def announce(shown: serve.Shown) -> None:
        if in_background:
            shown = serve.Shown(serve.without_token(shown.url), shown.port, shown.pid)
        emit(as_json, shown, lambda: shown.url)
        if not no_open:
            serve.open_browser(g.store, shown.url)
    try:
        serve.serve(g.store, host, port, announce)
    except KeyboardInterrupt:
        pass


@ui.command()
@json_option
def stop(as_json):
    """Stop the board running for this repository."""
    from git_brat.brat.ui import serve
    g = open_grite()
    r = serve.stop(g.store)
    emit(as_json, {"stopped": True, "pid": r.pid}, lambda: f"stopped the board (pid {r.pid})")


def register(group: click.Group) -> None:
    group.add_command(ui)
