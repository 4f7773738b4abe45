"""`git brat trust`: review and approve the committed config's settings that run code here."""

from __future__ import annotations

import click
import msgspec

from git_brat.brat import config, trust
from git_brat.clikit import emit, json_option, printable
from git_brat.errors import UsageError
from git_brat.git.store import Store


class TrustReport(msgspec.Struct):
    file: str
    approved: bool              # after this command
    recorded: bool              # this command recorded an approval
    changes: list[trust.Change]  # what differed from the approved values
    settings: dict              # the committed file's code-running settings now
    engine_files: list[trust.EngineFile] = []   # engine settings in the tree, as before this
    commit: str = ""
    author: str = ""
    subject: str = ""
    fingerprint: str = ""


def _lines(report: TrustReport, a: trust.Approval) -> list[str]:
    lines = [f"{config.CONFIG_PATH} ({trust.origin(a)})"] if report.changes else []
    for c in report.changes:
        lines.append(f"  {c.key}: {printable(config.show_value(c.approved))} -> "
                     f"{printable(config.show_value(c.committed))}")
    if report.engine_files:
        lines.append("engine settings in the repository (they can run commands):")
        for f in report.engine_files:
            lines.append(f"  {f.status:<8} {printable(f.path)} {f.blob[:12]} "
                         f"(read by {', '.join(f.engines)})")
    return lines


@click.command("trust")
@click.option("--show", is_flag=True, help="Only show what would be approved; record nothing.")
@click.option("--revoke", is_flag=True, help="Forget the approval: the defaults apply to the "
                                             "committed code-running settings until approved.")
@json_option
def trust_(show, revoke, as_json):
    """Approve the code-running settings of .brat/config.toml (witness.engine, witness.setup,
    refinery.check, mayor.engine, locks.remote, engines.*, hub.*, inbox.*) as they are now, and the
    engines' own settings files in the repository (.claude/, .mcp.json, .gemini/, .codex/,
    opencode.json, .opencode/, .continue/, .github/copilot*, .aider* ...): hooks, MCP servers
    and plugins there run commands, so no engine runs here while one is new or changed.

    Shows each one that differs from what you approved before, with the commit and author
    that changed the file; records the approval in .git/brat/trust.json (never synced).
    """
    store = Store.discover()
    if store.bare:
        raise UsageError("a hub reads only its own brat/config.toml, which nobody can push: "
                         "there is nothing to approve here")
    if show and revoke:
        raise UsageError("--show and --revoke: give one of them")
    if revoke:
        gone = trust.revoke(store)
        emit(as_json, {"revoked": gone}, lambda: "approval forgotten: committed code-running "
             "settings wait for `git brat trust`" if gone else "nothing was approved here")
        return
    if not show:
        trust.refuse_in_session(store)
    loaded = trust.load(store)
    a = loaded.approval
    settings = trust.guarded(loaded.committed)
    recorded = False
    if not show and (not a.approved or a.approved_fingerprint != a.fingerprint):
        trust.approve(store, loaded.committed, "git brat trust", a.engine_files)
        recorded = True
    report = TrustReport(config.CONFIG_PATH, recorded or a.approved, recorded, a.changes,
                         settings, a.engine_files, a.commit, a.author, a.subject, a.fingerprint)

    def human():
        lines = _lines(report, a)
        if a.approved:
            lines.append("nothing new to approve: the code-running settings are those you "
                         "approved (or the defaults, which run nothing)")
        elif show:
            lines.append("not approved yet: `git brat trust` approves these")
        else:
            lines.append(f"approved: these settings take effect here (fingerprint "
                         f"{report.fingerprint[:12]})")
        return "\n".join(lines)
    emit(as_json, report, human)


def register(group: click.Group) -> None:
    group.add_command(trust_)
