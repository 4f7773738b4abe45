"""`git brat config get|set`: read and change .brat/config.toml (validated, comments kept), or this clone's own settings."""

from __future__ import annotations

import os

import click
import msgspec

from git_brat.brat import config, config_text
from git_brat.brat import trust
from git_brat.brat.layout import hub_config
from git_brat.clikit import emit, json_option, warn
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
    """Print the effective value of KEY (e.g. witness.concurrency), or everything.

    In a bare hub: its own brat/config.toml. Unapproved settings of the committed file show
    their approved values, with a warning (`git brat trust` reviews them).
    """
    store = Store.discover()
    loaded = trust.load(store)
    cfg = loaded.config
    value = config.get(cfg, key) if key else msgspec.to_builtins(cfg)
    note = trust.notice(loaded)
    if note:
        warn(note)
    emit(as_json, {"key": key, "value": value, "approved": loaded.approval.approved}
         if key else value, lambda: _toml(value))


# ignore_unknown_options: a negative VALUE such as -3 is a value, not an option.
@config_group.command("set", context_settings={"ignore_unknown_options": True})
@click.argument("key")
@click.argument("value")
@click.option("--local", "local", is_flag=True, help="This clone only, never committed: "
              "git config for refinery.trigger, .git/brat/config.local.toml for the rest.")
@json_option
def set_(key, value, local, as_json):
    """Set KEY to VALUE in .brat/config.toml (validated first; comments are kept).

    Setting a key in a file you approved keeps it approved: the new value is yours.
    """
    store = Store.discover()
    if store.bare:
        path = hub_config(store)
        text = config.read_text(path, path) or config_text.default_text(hub=True)
        new, parsed = config.set_text(text, key, value)
        atomic_write(path, new.encode())
        emit(as_json, {"key": key, "value": parsed, "file": path},
             lambda: f"{key} = {config.show_value(parsed)}")
        return
    if local:
        res = trust.set_local(store, key, value)
        emit(as_json, {"key": key, "value": res.value, "file": res.file, "local": True},
             lambda: f"{key} = {config.show_value(res.value)} (this clone only: {res.file})")
        return
    res = trust.set_committed(store, key, value)
    emit(as_json, {"key": key, "value": res.value, "file": os.path.join(".brat", "config.toml"),
                   "approved": res.approved},
         lambda: f"{key} = {config.show_value(res.value)}")
    if key == "refinery.trigger" and res.value == "hook":
        warn("hooks start the refinery only where a clone says so itself: "
             "`git brat config set refinery.trigger hook --local`")
    elif not res.approved:
        warn(f"{config.CONFIG_PATH} still has settings you have not approved: "
             f"review them with `git brat trust`")


def register(group: click.Group) -> None:
    group.add_command(config_group)
