"""The hand-written parts of the man pages (roff), which git_brat.manpage puts around the commands."""

_COMPLETION = r"""
.B {prog} completion bash\fR|\fBzsh\fR|\fBfish
prints a completion script: commands, options, and {ids}.
.PP
.nf
\fBsource <({prog} completion bash)\fR    # ~/.bashrc
\fBsource <({prog} completion zsh)\fR     # ~/.zshrc, after compinit
\fB{prog} completion fish | source\fR     # ~/.config/fish/config.fish
.fi
.PP
The bash script also defines
.BR _{func} ,
the function git's own completion calls for
.BR "{prog} " <TAB>;
the zsh and fish scripts hook into those shells' git completion the same way.
"""

BRAT = {
    "name": "run many AI coding agents on one repository, coordinated through git",
    "description": r"""
.B git brat
is the harness on top of
.BR git-grite (1).
Work is a
.I convoy
of
.IR tasks ;
each task moves through
.B queued \(-> running \(-> needs-review \(-> merging \(-> merged
(or
.BR blocked ", " failed ", " dropped ),
one event per transition. All of it is stored in the grite event log, so it is shared, synced
and audited the same way.
.PP
The roles that move work:
.B mayor
turns a request into a convoy,
.B witness
runs an engine session per ready task,
.B refinery
merges finished work, and
.B deacon
cleans up after crashes.
""",
    "notes": {
        "kb": r"""
Knowledge notes are entities of the log (kind
.BR note ):
they sync with it, and each change has an author. Each agent's prompt gets the notes whose paths
meet its task's paths, whose tag its text names, or that have neither, pitfalls first, about
6 KB at most; the mayor sees them when it plans. From a sandboxed session,
.B kb add
goes through the witness, which records the note as the session.
""",
        "init": r"""
Writes
.B .brat/config.toml
(every key present, commented with its default) and installs hooks and refspecs. Idempotent.
With
.B \-\-hub
in a bare repository: a hub whose
.B post-receive
hook runs the refinery on pushed
.B brat/*
branches; settings in
.B brat/config.toml
inside the git directory. It takes the project's committed
.B refinery.check
from the target branch when it has none (with
.BR hub.run_checks );
without a check it lands nothing until one is set or
.B hub.land_unchecked = true
is chosen.
""",
        "convoy list": r"""
A convoy's status (active, landed, failed, stalled) is derived from its tasks. Convoys whose
work all settled more than
.B grite.coldAfterDays
days ago are shown only with
.BR \-\-all .
""",
        "task list": r"""
Tasks merged or dropped more than
.B grite.coldAfterDays
days ago (git config; default 30, 0: never) are cold: shown only with
.BR \-\-all ,
and still found by show and by id everywhere.
""",
        "task update": r"""
Invalid transitions are refused naming the allowed ones;
.B \-\-force
is recorded in the audit log.
.B \-\-no\-resume
keeps a task from resuming by itself after its engine met a usage limit: it is blocked instead,
for you to requeue.
""",
        "task done": r"""
What an agent says from its session's work tree (no id needed there), fenced with the session's
lease: an agent whose lease has passed to another session is refused (exit 5).
The same holds for
.B task block
and
.BR "task comment" .
""",
        "task reply": r"""
Requests changes to a task in needs-review, or answers a failed or blocked attempt; the task is
re-queued and the next session continues on its branch, resuming the engine's conversation where
it can. A session that comes back without a new commit blocks the task instead of returning it
to review.
""",
        "task approve": r"""
Approves the commit a task in needs-review is at now: with
.B refinery.review = "human"
(the default) nothing lands without it, and a later commit needs a new approval.
""",
        "workflow list": r"""
Workflow templates come from
.B .brat/workflows/*.yaml
and the shipped
.BR feature ", " code-review " and " fix-bug .
""",
        "workflow run": "A run creates the convoy and all its tasks in one batch, or nothing.",
        "engine list": r"""
The engine presets (claude, aider, codex, opencode, gemini, cn, copilot, shell, demo) and engines
defined under
.BR [engines.\fIname\fB] :
binary, whether it is on PATH, version, the argv a session runs.
""",
        "engine release": r"""
Lifts the engine's usage-limit hold now (a limit known to be over): the witness starts its
sessions again on its next pass, and the tasks the limit paused run then. Only a hold this clone
honours can be lifted; exit 3 when the engine is not held (nothing is written).
""",
        "witness run": r"""
Each session runs in its own work tree under
.B .git/brat/worktrees/
on branch
.BR brat/\fItask\fR ,
supervised (heartbeats, timeouts, retries); the sessions of a witness that died are recovered.
""",
        "mayor ask": r"""
The Mayor runs an engine headless in the repository, asked not to edit files, with the
repository's layout, README and AGENTS.md excerpts, open convoys and tasks, the workflows and a
required JSON plan schema, and creates the convoy and all its tasks (or a workflow run) in one
batch once the plan is validated and confirmed.
A terminal asks before anything is created;
.B \-\-yes
skips that and is required without a terminal.
The engine's conversation id is kept, and the next
.B ask
resumes it; engines that cannot resume get the earlier exchanges summarized.
A failure, a timeout or an answer without a valid plan creates nothing and names the file the
answer was saved to.
""",
        "status": "At any size it fits a screen: a project of 1k tasks prints about 55 lines. An "
                  "intervention an agent caused names it: claude (session ab12cd3) via Eve.",
        "inbox": r"""
What waits for you (reviews, agents' questions, failures), each with the command that answers
it. The deacon sends each new item once, across clones, to the sinks of
.B [inbox]
in
.B .brat/config.toml
(approved with
.BR "git brat trust" )
or git config
.BR brat.inbox.command ", " brat.inbox.ntfy ", " brat.inbox.webhook .
A sink seen for the first time is not sent what already waited longer than
.B inbox.backlog_grace
(600 s); the claims of items gone for a week are pruned.
""",
        "mcp": r"""
An MCP server on stdio whose tools
.RB ( brat_status ", " brat_inbox ", " brat_task_list ", " brat_task_show ", "
.BR brat_task_create ", " brat_task_reply ", " brat_task_approve ", " brat_task_comment ", "
.BR brat_convoy_create ", " brat_ready )
answer what the commands' --json prints. Needs the
.B mcp
extra. In an agent's session it writes only to that session's task.
""",
        "refinery run": r"""
The merge queue: stacks requests onto the target branch in its own worktree, runs the check,
bisects failing batches, advances the target by compare-and-swap (pushing when a remote is
configured). Failures and conflicts re-queue the task for its agent, fail it, or block it for a
human, per config. A failed check checks the target alone: a target red on its own holds the
requests (no attempt counted) and is named once in
.BR status ;
the queue resumes once it passes.
""",
        "refinery log": r"""
The whole output of a task's last check (or, with
.BR \-\-target ,
of the red target's own): a local file, on the machine whose refinery ran it. Its failing tests
and last lines, redacted, are in
.B task show
and
.BR "refinery status" .
""",
    },
    "sections": [
        ("SHELL COMPLETION", _COMPLETION.format(prog="git brat", name="git-brat", func="git_brat",
                                                 ids="task, convoy and session ids")),
        ("EXIT STATUS", r"""
As for
.BR git-grite (1):
0 success, 1 failure, 2 bad input, 3 not found, 4 not a repository or not initialised,
5 conflict or refused transition.
.B witness run \-\-once
exits 1 when a task's last session failed and 130 after Ctrl-C.
"""),
        ("FILES", r"""
.TP
.B .brat/config.toml\fR, \fB.brat/workflows/
The user's configuration, meant to be committed.
.TP
.B .git/brat/
Session work trees, session logs
.RB ( sessions/\fIid\fB.log\fR ),
the detached witness's pid file and log (local);
.BI .git/brat/mayor/ n .txt
holds the whole answer of the mayor's
.IR n th
request in this clone.
"""),
        ("SEE ALSO", r"""
.BR git-grite (1),
.BR git (1);
docs/guide.md and docs/reference.md in the source distribution.
"""),
    ],
}

GRITE = {
    "name": "crash-safe event log in git refs, and the issue tracker replayed from it",
    "description": r"""
.B git grite
keeps an append-only log of events in git refs under
.BR refs/grite/ ,
never in the working tree.
Every command that changes something appends one commit (a
.I batch
of events) to
.B refs/grite/wal
by compare-and-swap; the change is reported only after the ref update succeeded.
Issues, tasks and locks are derived by replaying the events of every known log (this clone's and
every replica fetched from a remote), so the same events always give the same state.
.PP
Ids are 32 hex digits; any unique prefix of at least 4 digits may be used, as with git objects.
""",
    "notes": {
        "agents-md": r"""
The section sits between its own marker lines
.RB ( "<!-- grite:begin" ", " "<!-- grite:end -->" );
an update replaces it in place. A symbolic link is never written through.
""",
        "init": r"""
The replica id and actor live under
.BR .git/grite/ ;
every remote is configured for sync and the hooks are installed. In a fresh clone the
remote's best snapshot is fetched without the history before it
.RB ( grite.shallowClone ),
and without its settled entities, which follow as
.B grite.fetchCold
says: background (default), now, or when-needed.
""",
        "fetch-cold": r"""
The settled entities (closed, merged, ended, untouched for
.BR grite.coldAfterDays )
of the snapshot a clone was made from stay on the remote until this runs. Until then the
default lists answer; anything that needs one of them runs this first, or fails with one
line if the remote cannot be reached.
""",
        "issue list": r"""
JSON: an array of objects with
.BR id ", " title ", " state ", " labels ", " assignees ", " created_at ", " updated_at ", " author ", " comments .
Closed issues untouched for
.B grite.coldAfterDays
whole days (git config; default 30, 0: never) are cold: left out unless
.B \-\-all
is given. They stay in show, log and export.
""",
        "issue label": r"""
Labels and assignees are observed-remove sets: a remove cancels only the adds the
writer had seen, so concurrent edits merge without surprises.
""",
        "dep add": "A dependency that would close a cycle is refused and the cycle is named.",
        "log": "Events rejected by fencing are marked.",
        "import": r"""
FILE is what
.B export
wrote, or a plain JSON array of
.B {"title", "body", "labels", "state"}
objects.
.B \-
reads standard input.
""",
        "export": r"""
The JSON export holds
.BR issues ", " convoys " and " tasks
(fields, comments, state; a convoy's state is the count of its tasks by status).
.B \-\-format csv
is one row per issue, convoy and task; a cell that a spreadsheet would run as a formula
starts with a quote.
.B import
takes the issues back and says how many convoys and tasks it left out.
""",
        "context": r"""
.B .git/grite/context/index.sqlite
may be deleted at any time: the next command rebuilds it from the tree. Its answer depends
only on the tree and the versions of tree-sitter and its grammars (after an upgrade of either,
the next \fBcontext index\fR re-parses everything).
""",
        "doctor": r"""
Reports corrupt records, abandoned ref locks and half-written object files, rewritten replica
histories, grite hooks that are not live where git runs hooks from, and a cache that disagrees
with the log. Snapshots are replayed in full and compared too.
.B \-\-fix
clears abandoned locks and temp files, reinstalls the hooks, deletes snapshots that disagree
with their events, rebuilds a log git cannot read from every record still readable (naming what
is lost) so that git gc and git fsck work again, quarantines fetched batches that do not
decode (every read and fetch skips them; listed as quarantined), and rebuilds the cache.
.B \-\-unquarantine
takes a quarantined batch back.
""",
        "snapshot": r"""
The snapshot is
.BR refs/grite/snapshots/\fIREPLICA\fR ,
published with its log. Written automatically every
.B grite.snapshotEvery
events (default 10000; 0 turns that off);
.B grite.snapshots=false
neither uses nor writes them.
""",
        "actor": r"""
Actors are who events are written as (one per agent, for example).
.B GRITE_ACTOR
overrides the current actor for one process. An actor made before actors were keys (16 hex
digits) that several replicas speak as is disputed: each one's events are shown as its own
replica's words and \fBdoctor\fR names it; \fBactor new\fR \fINAME\fR \fB\-\-use\fR moves
to an actor bound to this clone's key.
""",
        "lock acquire": r"""
With a remote (\fB\-\-remote\fR, \fB[locks] remote\fR in the
committed \fB.brat/config.toml\fR, \fBgrite.lockRemote\fR, the one remote that syncs grite
state, or \fBorigin\fR among several) the remote decides: of many racing clones exactly one
wins; an ambiguous choice is refused; \fB\-\-local\fR keeps a lease on this clone only.
\fB\-\-force\fR overrides a live lease only with a key its holder named (the keys its clone
trusts, written in its lease), the same on every clone; otherwise it is refused (exit 5) and
nothing is written.
""",
        "uninstall": "What was there before is restored byte for byte.",
    },
    "sections": [
        ("OUTPUT", r"""
With
.BR \-\-json ,
stdout carries only JSON. Errors are one line on stderr:
.BR "git-grite: error: " ...
"""),
        ("SHELL COMPLETION", _COMPLETION.format(prog="git grite", name="git-grite",
                                                func="git_grite", ids="issue ids")),
        ("EXIT STATUS", r"""
.TP
.B 0
Success.
.TP
.B 1
An operation failed (a git error, I/O).
.TP
.B 2
Bad input: unknown flag, bad value, empty title, ambiguous id prefix. Nothing was written.
.TP
.B 3
Not found: an id, actor or file that does not exist. Nothing was written.
.TP
.B 4
Not in a git repository, or grite is not initialised here.
.TP
.B 5
Conflict: a lease held by someone else, a ref that stayed locked, a refused dependency cycle.
.TP
.B 6
.B doctor
found problems it did not fix.
"""),
        ("ENVIRONMENT", r"""
.TP
.B GRITE_ACTOR
Act as this actor (id, id prefix or name) instead of the clone's current actor.
.TP
.B GRITE_HOLDER
The holder of locks taken by this process (default: the current actor id).
.TP
.B GRITE_LOCK_TIMEOUT
Seconds a writer keeps retrying a contended or locked log ref (default 10).
"""),
        ("FILES", r"""
.TP
.B refs/grite/wal
This replica's event log.
.TP
.B refs/grite/replicas/*\fR, \fBrefs/remotes/*/grite/replicas/*
Other replicas' logs, as published and as fetched.
.TP
.B refs/grite/locks/*
Lease locks, one ref per resource.
.TP
.B .git/grite/
Replica id, actors and the cache (disposable: deleting it changes no answer).
"""),
        ("SEE ALSO", r"""
.BR git-brat (1),
.BR git (1)
"""),
    ],
}

PAGES = {"git-brat": BRAT, "git-grite": GRITE}
