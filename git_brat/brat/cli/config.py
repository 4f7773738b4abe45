"""`git brat config get|set`: read and change .brat/config.toml (validated, comments kept)."""

from __future__ import annotations

import os

import click
import msgspec

from git_brat.brat import config
from git_brat.clikit import emit, json_option
from git_brat.errors import UsageError
from git_brat.files import atomic_write
from git_brat.git.store import Store


def _toml(value) -> str:
    """A value as it would be written in the file; strings bare, for shell use."""
    if isinstance(value, str):
        return value
    import tomlkit
    if isinstance(value, dict):
        doc = tomlkit.document()
        for k, v in _drop_none(value).items():
            doc[k] = v
        return tomlkit.dumps(doc).rstrip("\n")
    return config.show_value(value)


def _drop_none(d):
    if isinstance(d, dict):
        return {k: _drop_none(v) for k, v in d.items() if v is not None}
    return d


@click.group("config")
def config_group():
    """Read and change .brat/config.toml."""


@config_group.command("get")
@click.argument("key", required=False)
@json_option
def get(key, as_json):
    """Print the effective value of KEY (e.g. witness.concurrency), or everything."""
    store = Store.discover()
    cfg = config.load(store.toplevel())
    value = config.get(cfg, key) if key else msgspec.to_builtins(cfg)
    emit(as_json, {"key": key, "value": value} if key else value, lambda: _toml(value))


# ignore_unknown_options: a negative VALUE such as -3 is a value, not an option.
@config_group.command("set", context_settings={"ignore_unknown_options": True})
@click.argument("key")
@click.argument("value")
@json_option
def set_(key, value, as_json):
    """Set KEY to VALUE in .brat/config.toml (validated first; comments are kept)."""
    store = Store.discover()
    top = store.toplevel()
    if store.bare or not top:
        raise UsageError("this repository has no work tree (bare), so it has no .brat/config.toml")
    path = config.path_in(top)
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except FileNotFoundError:
        text = config.text_for(store)
    new, parsed = config.set_text(text, key, value)
    if key == "refinery.target_branch":
        problem = config.target_branch_problem(store, parsed)
        if problem:
            raise UsageError(f"refused: refinery.target_branch = {config.show_value(parsed)}: "
                             f"{problem}; name a branch that exists, or create it first")
    atomic_write(path, new.encode())
    emit(as_json, {"key": key, "value": parsed, "file": os.path.join(".brat", "config.toml")},
         lambda: f"{key} = {config.show_value(parsed)}")


def register(group: click.Group) -> None:
    group.add_command(config_group)
