"""`git grite trust …`: the replica keys this clone believes."""

from __future__ import annotations

import click

from git_brat.clikit import emit, json_option, table
from git_brat.grite.cli.common import open_grite


@click.group()
def trust():
    """List, add and remove the keys whose signed batches this clone trusts."""


@trust.command("list")
@json_option
def list_(as_json):
    """Keys seen signing each replica's batches (pinned) and the ones trusted."""
    from git_brat.grite import trust as tr
    result = tr.listing(open_grite())

    def text() -> str:
        rows = [[r.replica or "-", r.key, r.source + (" (trusted)" if r.trusted and
                                                      r.source == "pinned" else "")]
                for r in result.keys]
        lines = [table(rows, [18, 46, None])] if rows else ["no keys seen yet"]
        lines.append(f"grite.requireSigned: {'true' if result.require_signed else 'false'}; "
                     f"{result.unsigned} unsigned batches, {result.unknown_signer} signed by "
                     f"untrusted keys, {result.rejected} rejected")
        return "\n".join(lines)
    emit(as_json, result, text)


@trust.command()
@click.argument("key_or_replica")
@json_option
def add(key_or_replica, as_json):
    """Trust KEY_OR_REPLICA (a base64 Ed25519 key, or a replica whose key is pinned here)."""
    from git_brat.grite import trust as tr
    entry = tr.add(open_grite(), key_or_replica)
    emit(as_json, entry, lambda: f"trusted {entry.key}" + (f" (replica {entry.replica})"
                                                            if entry.replica else ""))


@trust.command()
@click.argument("key_or_replica")
@json_option
def remove(key_or_replica, as_json):
    """Stop trusting KEY_OR_REPLICA (one added by `git grite trust add`)."""
    from git_brat.grite import trust as tr
    entry = tr.remove(open_grite(), key_or_replica)
    emit(as_json, entry, lambda: f"no longer trusted: {entry.key}")


def register(group: click.Group) -> None:
    group.add_command(trust)
