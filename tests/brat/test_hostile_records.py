"""No value a log brings crashes a reader: every event kind and every field has a schema, and an
event that does not fit it is rejected on replay (listed with why), the same in every clone.

In-process, a property over every operation and every field of the schema (wrong types, huge
and negative numbers, malformed ids, control characters, markup); then, as processes, a compact
set of such events written by a pusher with its own valid signing key (t06) and a forged task
with a short id (s20b): status, task ready, task show, a witness pass, a refinery pass, a deacon
pass, doctor, the log and export all run, list the events as rejected, and agree across clones.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from git_brat.brat import board as model
from git_brat.grite.model import events as ev
from git_brat.grite.model import schema
from git_brat.grite.model.state import canonical, replay
from gritekit import forge_log
from gritekit import pusher_append
from helpers import brat, brat_json, git, grite, grite_json, run
from sync_helpers import clone, seeded_hub

ALICE = "a1" * 8
MALLORY = "ba" * 8
CONVOY, TASK1, TASK2, SESSION, MERGE = ("c0" * 16, "d1" * 16, "d2" * 16, "5e" * 16, "3e" * 16)


def _honest() -> list[ev.Event]:
    """A convoy, two tasks (one waiting on the other), a session and a merge request."""
    def at(lam, entity, op):
        return ev.make_event(entity, ALICE, lam, 1000 + lam, op)
    return [
        at(1, CONVOY, ev.Create("convoy", {"title": "c", "body": ""})),
        at(2, TASK1, ev.Create("task", {"title": "one", "body": "", "status": "queued",
                                        "convoy": CONVOY, "priority": 1, "paths": []})),
        at(3, TASK2, ev.Create("task", {"title": "two", "body": "", "status": "queued",
                                        "convoy": CONVOY, "priority": 2, "paths": ["src/*"]})),
        at(4, TASK2, ev.AddTo("dep:depends_on", TASK1)),
        at(5, TASK1, ev.SetFields({"status": "running", "status_from": "queued"})),
        at(6, SESSION, ev.Create("session", {"task": TASK1, "status": "running", "engine": "e",
                                             "branch": "brat/" + TASK1, "attempt": 1})),
        at(7, TASK1, ev.SetFields({"status": "needs-review", "status_from": "running"})),
        at(8, MERGE, ev.Create("merge", {"task": TASK1, "status": "queued", "session": SESSION})),
        at(9, TASK1, ev.Comment("looks fine")),
    ]


# -- hostile values -------------------------------------------------------------------

_TEXTS = st.sampled_from(["", "x", "<script>alert(1)</script>", "\x1b]52;c;AAAA\x07", "a\nb",
                          "\0", "--upload-pack=touch /tmp/p", "../../../../tmp/x", "zz",
                          "A" * (schema.LINE_MAX + 1)])
_NUMBERS = st.one_of(st.integers(-(1 << 63), (1 << 64) - 1),
                     st.sampled_from([-1, 5, 1 << 53, (1 << 64) - 1, -(1 << 63)]))
HOSTILE = st.one_of(_TEXTS, _NUMBERS, st.booleans(), st.none(), st.floats(allow_nan=True),
                    st.lists(st.one_of(_NUMBERS, _TEXTS, st.none()), max_size=3),
                    st.dictionaries(_TEXTS, st.one_of(_NUMBERS, _TEXTS), max_size=2),
                    st.binary(max_size=4))
BAD_IDS = st.sampled_from(["zz", "", "ZZ" * 16, "a" * 31, "a" * 33 + "\n", "../" * 11,
                           "-" + "a" * 31, "é" * 32, "a" * 65])


def _fits(check, value) -> bool:
    return check(value) is None


@st.composite
def hostile_events(draw):
    """One event of any operation, with one part of it of a wrong type or past its bounds."""
    what = draw(st.sampled_from(["field", "create-field", "create-id", "kind", "header",
                                 "add", "remove", "lease", "fence", "malformed"]))
    entity, actor, fence = draw(st.sampled_from([TASK1, TASK2, CONVOY, SESSION, MERGE])), MALLORY, None
    header = None
    if what in ("field", "create-field"):
        name = draw(st.sampled_from(sorted(schema.FIELDS) + ["x:0a1b2c", "action001",
                                                           "ctx:build_command"]))
        check = schema.FIELDS.get(name) or schema.PREFIXED[
            name[:name.index(":") + 1] if ":" in name else "action"]
        value = draw(HOSTILE.filter(lambda v: not _fits(check, v)))
        op = ev.SetFields({name: value}) if what == "field" else \
            ev.Create(draw(st.sampled_from(["task", "convoy", "session", "merge"])), {name: value})
        if what == "create-field":
            entity = "f" * 32
    elif what == "create-id":
        entity, op = draw(BAD_IDS), ev.Create("task", {"title": "t", "status": "queued",
                                                       "convoy": CONVOY, "priority": 4})
        entity = entity if schema.ANY_ENTITY.match(entity) is None else "f" * 16
    elif what == "kind":
        op = ev.Create(draw(_TEXTS.filter(lambda k: schema.KIND_NAME.match(k) is None)), {})
    elif what == "header":
        which = draw(st.sampled_from(["entity", "actor"]))
        fmt = schema.ANY_ENTITY if which == "entity" else schema.ACTOR_ID
        bad = draw(BAD_IDS.filter(lambda i: fmt.match(i) is None))
        entity, actor = (bad, actor) if which == "entity" else (entity, bad)
        op = ev.SetFields({"title": "x"})
    elif what == "add":
        op = draw(st.one_of(
            st.builds(ev.AddTo, st.just("dep:depends_on"), BAD_IDS),
            st.builds(ev.AddTo, _TEXTS.filter(lambda n: schema.SET_NAME.match(n) is None), st.just("x")),
            st.builds(ev.AddTo, st.just("labels"), st.sampled_from(["a\x1b[2J", "a\nb", "A" * 2000]))))
    elif what == "remove":
        op = ev.RemoveFrom("labels", "bug", [draw(BAD_IDS)])
    elif what == "lease":
        op = ev.LeaseToken(draw(st.sampled_from(["task:" + TASK1, "a\nb"])),
                           draw(st.sampled_from([-1, (1 << 64) - 1, 1 << 54])), "x", -5)
        entity = "10c0" * 8
    elif what == "fence":
        op, fence = ev.SetFields({"title": "x"}), ev.Fence("task:" + TASK1,
                                                           draw(st.sampled_from([-1, 1 << 60])))
    else:   # a known operation whose parts are not of its types (a writer's encoder allows it)
        op = draw(st.sampled_from([ev.AddTo("labels", 5), ev.Comment(["x"]), ev.SetFields("x"),
                                   ev.Create("task", [1, 2]), ev.RemoveFrom("labels", "x", "ab"),
                                   ev.LeaseToken("r", "1")]))
    header = header or (entity, actor)
    lam = draw(st.integers(1, 20))
    return ev.make_event(header[0], header[1], lam, 1000 + lam, op, fence)


def _roundtrip(events: list[ev.Event]) -> list[ev.Event]:
    """As a clone reads them: encoded in a batch by the pusher, decoded by the reader."""
    return ev.decode_batch(ev.encode_batch(ev.Batch(1, "ab" * 8, 100, events))).events


def _read_everything(state) -> None:
    """What status, task ready, task show, the board and the refinery queue read of a state."""
    b = model.Board(state)
    b.ready()
    b.task_list()
    b.convoy_list()
    b.merge_queue()
    b.sessions(None)
    for tid in list(b.tasks):
        b.task_detail(b.tasks[tid])
    for cid in list(b.convoys):
        b.convoy_detail(b.convoys[cid])
    msgspec.json.encode([b.task_list(), b.convoy_list(), b.merge_queue()])


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(bad=st.lists(hostile_events(), min_size=1, max_size=4), seed=st.randoms())
def test_a_hostile_record_of_any_kind_is_rejected_and_never_reaches_a_reader(bad, seed):
    honest = _honest()
    log = _roundtrip(honest + bad)
    shuffled = list(log)
    seed.shuffle(shuffled)
    first, second = replay(log), replay(shuffled)
    assert canonical(first) == canonical(second)          # every clone: one state
    assert canonical(first) == canonical(replay(_roundtrip(bad + honest)))
    ids = {e.id for e in log[len(honest):]}
    assert ids <= set(first.rejected), "every hostile event is listed as rejected"
    assert not {e.id for e in log[:len(honest)]} & set(first.rejected)
    assert first.entities[TASK1].get("status") == "needs-review"
    assert first.entities[TASK2].get("priority") == 2
    _read_everything(first)


def test_every_field_the_schema_names_rejects_a_value_of_another_type():
    # (the table is the contract: a field added to it is typed, and this shows what it refuses)
    for name, check in schema.FIELDS.items():
        wrong = [v for v in ("x", 7, True, None, [1], {"a": 1}, 1.5) if check(v) is not None]
        assert len(wrong) >= 4, name
        for v in wrong:
            e = ev.make_event(TASK1, ALICE, 1, 1, ev.SetFields({name: v}))
            assert name in ev.event_problem(e)


def test_a_known_operation_of_the_wrong_shape_is_rejected_and_a_newer_writers_is_kept_and_skipped():
    newer = ev.make_event(TASK1, ALICE, 1, 1, ev.Comment("newer"))
    wrong = ev.make_event(TASK1, ALICE, 2, 2, ev.Comment("wrong"))
    raw = ev.encode_batch(ev.Batch(1, "ab" * 8, 2, [newer, wrong]))
    # in their places: tag "z", one this version does not know; tag "a" (add) with a number
    raw = raw.replace(msgspec.msgpack.encode(newer.op), b"\x93\xa1z\x01\x02")
    raw = raw.replace(msgspec.msgpack.encode(wrong.op), b"\x93\xa1a\xa6labels\x05")
    state = replay(ev.decode_batch(raw).events)
    assert list(state.unknown) == [newer.id]
    assert list(state.rejected) == [wrong.id] and "malformed add" in state.rejected[wrong.id].reason


# -- as processes: a pusher's own signed batch, and a forged task id ------------------

def _engine_config(repo: Path) -> None:
    with open(repo / ".brat" / "config.toml", "a") as f:
        f.write('\n[engines.mine]\ncommand = ["sh", "-c", "echo hi > work.txt; git add work.txt; '
                'git commit -qm work; git brat task done -m ok"]\n')
    brat(repo, "config", "set", "witness.engine", "mine")
    git(repo, "add", ".brat")
    git(repo, "commit", "-qm", "brat")
    git(repo, "push", "-q", "origin", "main")
    brat(repo, "trust")


def _pusher_writes(repo: Path, drafts) -> None:
    pusher_append(repo, drafts)


def _state_digest(repo: Path) -> str:
    from git_brat.grite.model.state import digest
    from git_brat.grite.repo import Grite
    g = Grite.open(str(repo))
    return digest(g.state(refresh=True)).hex()


def _clean(proc) -> None:
    assert proc.returncode in (0, 1, 3, 4, 5), proc.err
    assert "Traceback" not in proc.err and "Error:" not in proc.err.replace("error:", ""), proc.err


@pytest.mark.slow
def test_mistyped_fields_from_a_pushers_signed_batch_and_a_forged_task_id_crash_no_reader(tmp_path):
    from git_brat.grite.log.wal import Draft
    hub = seeded_hub(tmp_path)
    victim = clone(str(hub), tmp_path / "victim", init=False)
    brat(victim, "init")
    _engine_config(victim)
    conv = brat_json(victim, "convoy", "create", "parser work")["id"]
    t1 = brat_json(victim, "task", "create", "--convoy", conv, "fix tabs")["id"]
    t2 = brat_json(victim, "task", "create", "--convoy", conv, "fix spaces", "--needs", t1)["id"]
    grite(victim, "sync")
    pusher = clone(str(hub), tmp_path / "pusher", init=False)
    brat(pusher, "init")
    # t06, and one representative of each kind of bad part, in the pusher's signed log
    bad = [Draft(t1, ev.SetFields({"priority": "high"})),
           Draft(t2, ev.SetFields({"priority": -1, "title": "x"})),
           Draft(t2, ev.SetFields({"convoy": "../../../../tmp/x"})),
           Draft(t1, ev.SetFields({"paths": "src/*", "failures": 1 << 62})),
           Draft(t2, ev.SetFields({"status": 3})),
           Draft(conv, ev.SetFields({"vars": ["a", "b"], "title": "a\nb"})),
           Draft(t1, ev.AddTo("dep:depends_on", "zz")),
           Draft(t1, ev.AddTo("labels", 5)),
           Draft(t1, ev.RemoveFrom("labels", "x", ["not an event"])),
           Draft("b" * 32, ev.Create("session", {"task": t1, "status": "running", "pid": "1"}))]
    _pusher_writes(pusher, bad)
    grite(pusher, "sync")
    # s20b: an unsigned task with id zz from a new replica
    forged = forge_log(pusher, "00000000000000f3", [ev.make_event("zz", "x", 10, 1, ev.Create(
        "task", {"title": "t", "status": "queued", "convoy": conv, "priority": 4}))])
    # (the pusher's grite hooks may carry it to the hub first: then this push finds it there)
    run(["git", "push", "-q", "origin", f"{forged}:refs/grite/replicas/00000000000000f3"], pusher,
        check=False)
    assert git(hub, "rev-parse", "refs/grite/replicas/00000000000000f3") == forged
    grite(victim, "sync")
    fresh = clone(str(hub), tmp_path / "fresh", init=False)
    brat(fresh, "init")
    brat(fresh, "trust")
    grite(fresh, "sync")

    for repo in (victim, fresh):
        shown = brat_json(repo, "status")
        assert shown["recovery"]["rejected_events"] >= len(bad) + 1
        ready = brat_json(repo, "task", "ready")
        assert [t["id"] for t in ready] == [t1]
        for tid in (t1, t2):
            task = brat_json(repo, "task", "show", tid)
            assert task["priority"] == 2 and isinstance(task["title"], str)
        assert brat(repo, "task", "show", "zz", check=False).returncode != 0
        findings = grite_json(repo, "doctor", check=False)["findings"]
        reasons = [f["detail"] for f in findings if f["kind"] == "rejected"]
        assert any("priority" in r and "not a whole number" in r for r in reasons)
        assert any("'zz'" in r for r in reasons)
        log = grite(repo, "log", check=False)
        _clean(log)
        assert "REJECTED" in log.out
        _clean(grite(repo, "export", check=False))
        _clean(brat(repo, "deacon", "run", "--once", check=False))
        _clean(brat(repo, "refinery", "run", "--once", check=False))
    witness = brat(victim, "witness", "run", "--once", check=False)
    _clean(witness)
    assert "not an entity id" not in witness.err
    deadline = time.monotonic() + 60
    while brat_json(victim, "task", "show", t1)["status"] in ("queued", "running") \
            and time.monotonic() < deadline:
        time.sleep(0.5)
    assert brat_json(victim, "task", "show", t1)["status"] == "needs-review"
    for repo in (victim, pusher, fresh, victim, pusher):   # (twice: each has what all wrote)
        grite(repo, "sync")
    assert _state_digest(victim) == _state_digest(fresh) == _state_digest(pusher)


def test_values_an_older_cache_already_applied_sort_without_a_crash():
    # A cache or snapshot made before replay checked schemas may hold what it now rejects
    # (cache format 12 makes an older cache rebuild; readers' sorts are total all the same).
    state = replay(_honest() + [ev.make_event(TASK1, ALICE, 20, 1020, ev.SetFields(
        {"status": "queued", "status_from": "needs-review"}))])
    held = state.entities[TASK2].fields["priority"]
    state.entities[TASK2].fields["priority"] = ("high", *held[1:])
    state.entities[TASK1].fields["priority"] = (None, *held[1:])
    state.entities[TASK2].sets = {}   # (its dependency gone: both ready, so sorted by priority)
    b = model.Board(state)
    assert [t.id for t in b.ready()] == [TASK1, TASK2]   # (both the default: oldest first)
    _read_everything(state)
    assert [t.priority for t in b.task_list()] == [model.DEFAULT_PRIORITY] * 2
