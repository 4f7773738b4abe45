"""`git brat engine …`: the engine presets and configured engines, and whether each is installed."""

from __future__ import annotations

import os
import shlex
from concurrent.futures import ThreadPoolExecutor

import click
import msgspec

from git_brat.brat import engines
from git_brat.brat import holds
from git_brat.brat.engines import sandbox
from git_brat.brat.cli.common import load_config, open_grite
from git_brat.clikit import emit, json_option, table


@click.group()
def engine():
    """Coding agents the witness can run: presets, overrides in .brat/config.toml."""


def _infos(names: list[str], cfg, g) -> list[engines.EngineInfo]:
    presets = [engines.resolve(n, cfg.engines) for n in names]
    # The repository's files are never run to ask a version: its top and its git directory.
    repo = engines.repository_dirs(g.store.toplevel(), g.store.common_dir)
    # `--version` of seven tools, a core's worth at a time: seven node and python start-ups at
    # once on a loaded 2-core machine take 20 s each, past any sane probe timeout.
    with ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2)) as pool:
        return list(pool.map(lambda p: engines.info(p, repo=repo), presets))


@engine.command("list")
@json_option
def list_(as_json):
    """Every engine: binary, on PATH or not, version, the argv a session runs."""
    g = open_grite()
    cfg = load_config(g)
    box = sandbox.effective(cfg.witness.sandbox)
    infos = [msgspec.structs.replace(i, sandbox=box)
             for i in _infos(engines.all_names(cfg.engines), cfg, g)]

    def human():
        rows = [[i.name, i.binary or "-", "yes" if i.path else "no", i.version or "-",
                 shlex.join(i.argv) if i.argv else "(set engines.shell.command)"] for i in infos]
        said = sandbox.unconfined_warning(cfg.witness.sandbox) or (
            box == "bwrap" and sandbox.network_warning(cfg.witness.sandbox_network))
        return table([["ENGINE", "BINARY", "ON PATH", "VERSION", "ARGV"], *rows],
                     [9, 8, 7, 14, None]) + \
            (f"\nwarning: {said}" if said else "") + \
            ("" if box != "bwrap" and said else f"\nsessions run in: "
             f"{sandbox.describe_setting(cfg.witness.sandbox, cfg.witness.sandbox_network)} "
             f"(witness.sandbox = {cfg.witness.sandbox})")
    emit(as_json, infos, human)


@engine.command()
@click.argument("name")
@json_option
def show(name, as_json):
    """One engine in full: argv, resume, env, prompt and result handling."""
    g = open_grite()
    cfg = load_config(g)
    p = engines.resolve(name, cfg.engines)
    i = _infos([name], cfg, g)[0]

    def human():
        lines = [f"{i.name}" + ("" if i.builtin else "  (defined in .brat/config.toml)"),
                 f"binary:   {i.binary or '-'} ({i.path or 'not on PATH'})",
                 f"version:  {i.version or '-'}"]
        if i.package:
            lines.append(f"install:  {i.package}")
        lines += [f"argv:     {shlex.join(i.argv) if i.argv else '(none: set engines.' + name + '.command)'}",
                  f"prompt:   {i.prompt}", f"result:   {i.result}",
                  f"resume:   {shlex.join(p.resume) if p.resume else 'no (fresh prompt each time)'}"]
        if i.model:
            lines.append(f"model:    {i.model}")
        for k, v in sorted(i.env.items()):
            lines.append(f"env:      {k}={v}")
        if i.timeout:
            lines.append(f"timeout:  {i.timeout:g}s")
        lines += [f"reads:    {i.instructions or 'no instructions file in its work tree'}"
                  + (f", skills in {i.skills}/" if i.skills else ""),
                  f"meter:    {i.meter or 'none (its spending is unknown)'}"]
        return "\n".join(lines)
    emit(as_json, i, human)


@engine.command()
@click.argument("name")
@json_option
def release(name, as_json):
    """Lift NAME's usage-limit hold now: the witness starts its sessions again on its next
    pass, and the tasks the limit paused run then (for a limit known to be over: a new plan, a
    reset misread)."""
    g = open_grite()
    done = holds.release(g, name)

    def human():
        tasks = f"; {len(done.tasks)} paused task(s) run on the witness's next pass" \
            if done.tasks else ""
        return f"engine {done.engine} released ({len(done.sessions)} hold(s) lifted){tasks}"
    emit(as_json, done, human)


def register(group: click.Group) -> None:
    group.add_command(engine)
