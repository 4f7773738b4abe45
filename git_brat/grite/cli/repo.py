"""`git grite init|log|export|import|doctor|rebuild|snapshot`: the repository-level commands (thin)."""

from __future__ import annotations

import sys

import click

from git_brat.clikit import ProgressLine, emit, json_option, printable, warn, when
from git_brat.errors import DEEPEN_HINT
from git_brat.grite.cli.common import open_grite, report_problems
from git_brat.grite.log.refs import log_tips


@click.command()
@json_option
def init(as_json):
    """Create this clone's replica id and actor (idempotent)."""
    from git_brat.grite import init as setup
    result = setup.init(open_grite(require_init=False))
    emit(as_json, result, lambda: (
        f"initialised grite: replica {result.replica}, actor {result.actor_name} ({result.actor[:8]})"
        if result.created else f"grite already initialised: replica {result.replica}, "
                               f"actor {result.actor_name} ({result.actor[:8]})")
        + "".join(f"\nhook {h.hook}: {h.action}" + (f" ({h.detail})" if h.detail else "")
                  for h in result.hooks if h.action not in ("unchanged", "skipped"))
        + (f"\nsyncing through: {', '.join(result.remotes)}" if result.remotes else ""))
    for w in result.warnings:
        warn(w)


@click.command()
@click.argument("entity", required=False)
@click.option("-n", "--limit", type=click.IntRange(min=1), help="Show only the newest N entries.")
@json_option
def log(entity, limit, as_json):
    """The audit trail: who did what, when, from which replica."""
    from git_brat.grite import audit
    g = open_grite()
    ent_id = g.resolve(entity).id if entity else None
    entries = audit.entries(g, ent_id)
    report_problems(g)
    from git_brat.grite.log import cut
    if cut.cut(g.store, log_tips(g.store).values()):
        warn("this clone was made from a snapshot: events before it are not in its logs, so "
             f"they are not listed ({DEEPEN_HINT})")
    if limit:
        entries = entries[-limit:]

    def human():
        lines = []
        for a in entries:
            what = f"{a.kind}.{a.op}" if a.kind else a.op
            flag = f"  [REJECTED: {a.rejected}]" if a.rejected else ""
            via = f" via {a.via[:7]}" if a.via else ""
            lines.append(f"{when(a.at)}  {a.entity[:7]}  {what:<14} {a.actor_name}{via} "
                         f"@{a.replica[:8]}  {a.summary}{flag}".rstrip())
        return "\n".join(lines) or "no events"
    emit(as_json, entries, human)


@click.command()
@click.option("--format", "fmt", type=click.Choice(["json", "md", "csv"]), default="json",
              show_default=True)
@click.option("-o", "--output", type=click.Path(dir_okay=False, writable=True),
              help="Write to this file instead of stdout.")
@click.option("--json", "as_json", is_flag=True,
              help="The JSON export (the same as --format json, the default).")
def export(fmt, output, as_json):
    """Export every issue, convoy and task (with comments, dependencies and state) as JSON,
    Markdown or CSV (one row each; `import` takes the issues of a JSON export back)."""
    import msgspec
    from git_brat.grite import transfer
    from git_brat.errors import UsageError
    if as_json and fmt != "json":
        raise UsageError(f"--json and --format {fmt} contradict each other: give one")
    g = open_grite()
    state = g.state()
    report_problems(g)
    if fmt == "json":
        data = msgspec.json.format(msgspec.json.encode(transfer.export(state)), indent=2) + b"\n"
    elif fmt == "csv":
        data = printable(transfer.export_csv(state)).encode()   # cells read by people too
    else:
        data = printable(transfer.export_markdown(state)).encode()   # a document for people
    if output:
        from git_brat.errors import GriteError
        try:
            with open(output, "wb") as f:
                f.write(data)
        except OSError as exc:
            raise GriteError(f"cannot write {output}: {exc.strerror}")
    else:
        sys.stdout.buffer.write(data)


@click.command(name="import")
@click.argument("file", type=click.Path(dir_okay=False, allow_dash=True))
@json_option
def import_(file, as_json):
    """Import issues: checked whole, then written in parts of whole issues (one batch each, a
    small file in one); importing the same file twice adds nothing, and completes an import
    a crash cut short."""
    from git_brat.grite import transfer
    from git_brat.errors import NotFound
    g = open_grite()
    try:
        data = sys.stdin.buffer.read() if file == "-" else open(file, "rb").read()
    except OSError as exc:
        raise NotFound(f"cannot read {file}: {exc.strerror}")
    items = transfer.parse(data, "<stdin>" if file == "-" else file)
    result = transfer.import_issues(g, items, "stdin" if file == "-" else file)
    result.left_out = transfer.left_out(data)
    emit(as_json, result, lambda: f"imported {len(result.created)} issues"
         + (f" in {len(result.commits)} parts" if len(result.commits) > 1 else "")
         + (f", {len(result.skipped)} already present" if result.skipped else "")
         + "".join(f"\n{n} {key} left out (brat's: import takes issues)"
                   for key, n in result.left_out.items()))


@click.command()
@click.option("--fix", is_flag=True, help="Clear abandoned ref locks, rebuild a wrong cache, "
              "acknowledge rewritten replica refs (their events stay kept), quarantine fetched "
              "batches that do not decode.")
@click.option("--stale-after", type=click.FloatRange(min=0), default=None, metavar="SECONDS",
              help="Age after which a ref .lock counts as abandoned (default 10).")
@click.option("--unquarantine", metavar="COMMIT", default=None,
              help="Take back a batch --fix quarantined (it is read, and reported, again).")
@json_option
def doctor(fix, stale_after, unquarantine, as_json):
    """Verify every log commit and event, ref locks and the cache. Exit 6 if problems remain."""
    from git_brat.grite import doctor as doc
    from git_brat.errors import EXIT_PROBLEMS
    g = open_grite()
    if unquarantine is not None:
        taken = doc.unquarantine(g, unquarantine.lower())
        emit(as_json, {"unquarantined": taken},
             lambda: "\n".join(f"unquarantined {sha}: read again" for sha in taken))
        return
    with ProgressLine("replaying the log") as line:
        g.cache.progress = None if as_json else line
        report = doc.check(g, fix=fix, stale_after=doc.STALE_LOCK_SECONDS if stale_after is None
                           else stale_after)

    def human():
        lines = [f"{len(report.logs)} logs, {report.commits} commits, {report.events} events"]
        for f in report.findings:
            mark = "LOST" if f.kind == "lost" else "note" if f.kind in doc.NOTES else \
                "fixed" if f.fixed else "PROBLEM"
            kind = "" if f.kind == "lost" else f"{f.kind} "
            lines.append(f"{mark}: {kind}{f.subject}: {f.detail}".replace(" : ", ": "))
        lines.append("ok" if report.ok else "problems found" + ("" if fix else
                     "; `git grite doctor --fix` repairs locks and cache"))
        return "\n".join(lines)
    emit(as_json, report, human)
    if not report.ok:
        sys.exit(EXIT_PROBLEMS)


@click.command()
@click.option("--full", is_flag=True, help="Replay every event, ignoring snapshots.")
@json_option
def rebuild(full, as_json):
    """Rebuild the cache from the logs (from the newest usable snapshot on, unless --full)."""
    g = open_grite()
    with ProgressLine("replaying the log") as line:
        g.cache.progress = None if as_json else line
        state = g.cache.rebuild(full=full)
    report_problems(g)
    live = len(state.kinds)
    snap = g.cache.from_snapshot
    out = {"entities": live, "events": state.event_count, "problems": g.cache.problems,
           "snapshot": snap.commit if snap else None,
           "replayed": max(0, state.event_count - g.cache.from_snapshot_events)}

    def human():
        line = f"rebuilt cache: {live} entities from {state.event_count} events"
        if snap:
            line += (f" ({g.cache.from_snapshot_events} from snapshot {snap.commit[:10]} of replica "
                     f"{snap.meta.replica[:10]}, {out['replayed']} replayed)")
        return line
    emit(as_json, out, human)


@click.command()
@json_option
def snapshot(as_json):
    """Commit the projected state as this replica's snapshot, so rebuilds and clones start there."""
    g = open_grite()
    snap, written = g.cache.take_snapshot()
    report_problems(g)
    if snap is None:
        emit(as_json, {"snapshot": None, "written": False}, lambda: "no events yet: nothing to snapshot")
        return
    out = {"snapshot": snap.commit, "ref": snap.ref, "written": written, "events": snap.meta.events,
           "entities": snap.meta.entities, "covers": snap.meta.covers}
    emit(as_json, out, lambda: f"{'wrote' if written else 'up to date:'} snapshot {snap.commit[:10]} "
                               f"on {snap.ref}: {snap.meta.events} events, {snap.meta.entities} entities")


def register(group: click.Group) -> None:
    for command in (init, log, export, import_, doctor, rebuild, snapshot):
        group.add_command(command)
