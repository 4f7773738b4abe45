"""The kinds of entity, in one table: per kind, its status field, its settled statuses, its group field.

grite stores every kind alike; what it needs to know of one is here. Settled statuses end an
entity's work: settled and unchanged for grite.coldAfterDays, it is cold, left out of default
lists and moved by a snapshot to its cold part (snapdb.cold_condition), so a fresh clone is
ready before that part arrives. brat's task, session and merge lists (brat/board.py) are these
rows, not copies of them; so is the task state machine (board.TRANSITIONS), kept here as data
because replay, below brat, re-checks every move a fetched log brings against it. The cold
split decides only what a fresh clone can answer early, never an answer: every reader takes
whatever split a snapshot made.
"""

from __future__ import annotations

from typing import NamedTuple


class Kind(NamedTuple):
    """One kind of entity, as grite's cold logic and brat's views see it."""
    name: str
    status: str = ""                  # the field holding its status ("": it has none)
    settled: tuple[str, ...] = ()     # statuses that end its work (): never cold
    group: str = ""                   # the field naming what it belongs to ("": nothing)
    # The state machine replay re-checks (writers check it too): status -> where it may go
    # unforced; None: any change is fine. `initial`: the status its create must give it.
    transitions: dict[str, tuple[str, ...]] | None = None
    initial: str = ""


# grite's own
ISSUE, ACTOR = "issue", "actor"
# grite's project context: one entity per repository, its keys (context set) fields ctx:<key>
PROJECT = "project"
# brat's (grite stores them; the harness gives them meaning)
CONVOY, TASK, SESSION, MERGE, MAYOR, DEACON = "convoy", "task", "session", "merge", "mayor", "deacon"
NOTE = "note"   # a knowledge note (`git brat kb`): what the next agent should know

KINDS: dict[str, Kind] = {k.name: k for k in (
    Kind(ISSUE, "state", ("closed",)),            # exactly what `issue list` leaves out
    Kind(ACTOR),                                  # never cold: every list names actors
    Kind(CONVOY),                                 # its status is derived from its tasks
    Kind(TASK, "status", ("merged", "dropped"), group=CONVOY, initial="queued", transitions={
        "queued": ("running", "blocked", "dropped"),
        "running": ("needs-review", "queued", "blocked", "failed", "dropped"),
        "needs-review": ("merging", "queued", "blocked", "failed", "dropped"),
        "merging": ("merged", "needs-review", "queued", "blocked", "failed"),
        "merged": (),
        "blocked": ("queued", "dropped"),
        "failed": ("queued", "dropped"),
        "dropped": ("queued",),
    }),
    Kind(SESSION, "status", ("done", "failed", "timed-out", "blocked", "stopped", "crashed",
                             "ended"), group=TASK),
    Kind(MERGE, "status", ("merged", "failed", "requeued", "conflict", "blocked", "dropped",
                           "superseded"), group=TASK),
    Kind(MAYOR, "status", ("closed",)),           # a mayor conversation
    Kind(DEACON),                                 # one record per deacon run that acted
    Kind(PROJECT),                                # the project context: never cold
    # a knowledge note: kept until forgotten (never cold while kept: every prompt may need it)
    Kind(NOTE, "status", ("forgotten",)),
)}

# status_of and group_of try these fields in this order, whatever the entity's kind: the cache
# file's status and grp columns hold what they find, so the order is part of the stored rows.
STATUS_FIELDS = ("status", "state")
GROUP_FIELDS = tuple(dict.fromkeys(k.group for k in KINDS.values() if k.group))   # convoy, task


def settled(kind: str) -> tuple[str, ...]:
    """The statuses that end the work of an entity of this kind (() for a kind never cold)."""
    found = KINDS.get(kind)
    return found.settled if found is not None else ()
