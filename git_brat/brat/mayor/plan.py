"""The mayor's plan: its JSON schema, finding it in an answer, and validating it (task keys named)."""

from __future__ import annotations

import json
import re
from typing import Any

import msgspec

from git_brat.brat.board import DEFAULT_PRIORITY, PRIORITIES
from git_brat.errors import GriteError

MAX_SCAN = 500            # '{' positions tried when the JSON sits inside prose


class PlanError(GriteError):
    """An answer that holds no usable plan; the message names the task key where there is one."""


class ConvoySpec(msgspec.Struct, forbid_unknown_fields=True):
    title: str
    body: str = ""


class TaskSpec(msgspec.Struct, forbid_unknown_fields=True):
    key: str
    title: str
    body: str = ""
    paths: list[str] = []
    priority: int = DEFAULT_PRIORITY
    needs: list[str] = []


class TasksPlan(msgspec.Struct, forbid_unknown_fields=True):
    """A new convoy and its tasks; `needs` name other tasks' keys."""
    convoy: ConvoySpec
    tasks: list[TaskSpec]


class WorkflowPlan(msgspec.Struct, forbid_unknown_fields=True):
    """Run one of the repository's workflows with these inputs."""
    workflow: str
    vars: dict[str, str] = {}


Plan = TasksPlan | WorkflowPlan

# Shown to the engine; deliberately not valid JSON (… and NAME), so a prompt echoed back in an
# answer can never be taken for the plan.
SCHEMA = """\
{"convoy": {"title": "one line", "body": "what and why"},
 "tasks": [{"key": "short-unique-name", "title": "one line", "body": "instructions for the agent",
            "paths": ["src/file.py", …], "priority": 2, "needs": ["key-of-another-task", …]},
           …]}"""

WORKFLOW_SCHEMA = '{"workflow": NAME, "vars": {"INPUT": "value", …}}'

_FENCE = re.compile(r"```[^\n`]*\n(.*?)```", re.S)
_PLAN_KEYS = {"convoy", "tasks", "workflow"}


# -- finding the JSON ----------------------------------------------------------------

def _decode(text: str) -> Any:
    return msgspec.json.decode(text.encode())


def _scan(text: str, errors: list[str]) -> list[Any]:
    """Every outermost JSON object in prose; the first failure's reason kept for the message."""
    out, pos, tried = [], 0, 0
    decoder = json.JSONDecoder()
    while tried < MAX_SCAN:
        i = text.find("{", pos)
        if i < 0:
            break
        tried += 1
        try:
            _obj, end = decoder.raw_decode(text, i)
        except ValueError as exc:
            if not errors:
                errors.append(f"malformed JSON: {exc.args[0] if exc.args else exc}")
            pos = i + 1
            continue
        try:   # the boundaries are stdlib's; the value is msgspec's (no NaN, exact types)
            out.append(_decode(text[i:end]))
        except msgspec.DecodeError as exc:
            errors.append(f"malformed JSON: {exc}")
        pos = end
    return out


def find_json(text: str) -> dict:
    """The plan object in an answer: bare, in a fenced block, or inside prose (the last one wins)."""
    errors: list[str] = []
    candidates: list[Any] = []
    for m in _FENCE.finditer(text):
        try:
            candidates.append(_decode(m.group(1).strip()))
        except msgspec.DecodeError as exc:
            errors.append(f"malformed JSON in a fenced block: {exc}")
    if not any(_plan_like(c) for c in candidates):
        try:
            candidates.append(_decode(text.strip()))
        except msgspec.DecodeError:
            candidates += _scan(text, errors)
    plans = [c for c in candidates if _plan_like(c)]
    if plans:
        return plans[-1]
    if errors:
        raise PlanError(f"no valid JSON plan in the answer ({errors[0]})")
    if not text.strip():
        raise PlanError("the answer is empty")
    raise PlanError('no JSON plan in the answer (expected an object with "convoy" and "tasks", '
                    'or "workflow")')


def _plan_like(obj: Any) -> bool:
    return isinstance(obj, dict) and bool(_PLAN_KEYS & obj.keys())


# -- validating ------------------------------------------------------------------------

def _where(obj: dict, exc: msgspec.ValidationError) -> str:
    """msgspec's message with `$.tasks[3].title` told as task 'key': title."""
    text = str(exc)
    m = re.search(r" - at `\$(.*)`$", text)
    if not m:
        return text
    msg, path = text[:m.start()], m.group(1)
    t = re.match(r"\.tasks\[(\d+)\](.*)", path)
    if t:
        i, rest = int(t.group(1)), t.group(2).lstrip(".")
        tasks = obj.get("tasks")
        key = tasks[i].get("key") if isinstance(tasks, list) and i < len(tasks) \
            and isinstance(tasks[i], dict) else None
        who = f"task {key!r}" if isinstance(key, str) and key.strip() else f"task number {i + 1}"
        return f"{who}: {rest + ': ' if rest else ''}{msg}"
    return f"{path.lstrip('.') or 'the plan'}: {msg}"


def _title(value: str, who: str) -> str:
    value = value.strip()
    if not value:
        raise PlanError(f"{who} has an empty title")
    if any(c in value for c in "\n\r\0"):
        raise PlanError(f"{who} has a title of more than one line")
    return value


def validate(obj: dict, max_tasks: int) -> Plan:
    """The plan typed and checked: keys, titles, priorities, needs, cycles, the task limit."""
    if "workflow" in obj:
        if "tasks" in obj or "convoy" in obj:
            raise PlanError('the plan has both "workflow" and "tasks"/"convoy": give one of them')
        try:
            wp = msgspec.convert(obj, WorkflowPlan)
        except msgspec.ValidationError as exc:
            raise PlanError(f"invalid workflow plan: {_where(obj, exc)}") from None
        if not wp.workflow.strip():
            raise PlanError("the plan names an empty workflow")
        return wp
    for key in ("convoy", "tasks"):
        if key not in obj:
            raise PlanError(f'the plan has no "{key}"')
    try:
        plan = msgspec.convert(obj, TasksPlan)
    except msgspec.ValidationError as exc:
        raise PlanError(f"invalid plan: {_where(obj, exc)}") from None
    if not plan.tasks:
        raise PlanError("the plan has no tasks")
    if len(plan.tasks) > max_tasks:
        extra = plan.tasks[max_tasks].key
        raise PlanError(f"the plan has {len(plan.tasks)} tasks, more than mayor.max_tasks = "
                        f"{max_tasks} (task {extra!r} is number {max_tasks + 1})")
    plan.convoy.title = _title(plan.convoy.title, "the convoy")
    seen: dict[str, TaskSpec] = {}
    for i, t in enumerate(plan.tasks, 1):
        if not t.key.strip() or any(c in t.key for c in "\n\r\0"):
            raise PlanError(f"task number {i} has no key (a short unique name, one line)")
        t.key = t.key.strip()
        if t.key in seen:
            raise PlanError(f"task key {t.key!r} is used twice")
        seen[t.key] = t
        t.title = _title(t.title, f"task {t.key!r}")
        if t.priority not in PRIORITIES:
            raise PlanError(f"task {t.key!r} has priority {t.priority}, out of range: use 0 "
                            f"(most urgent) to 4")
        paths = []
        for p in t.paths:
            p = p.strip()
            if not p or any(c in p for c in "\n\r\0"):
                raise PlanError(f"task {t.key!r} has an empty or multi-line path")
            if p not in paths:
                paths.append(p)
        t.paths = paths
        t.needs = list(dict.fromkeys(n.strip() for n in t.needs))
    keys = ", ".join(seen)
    for t in plan.tasks:
        for n in t.needs:
            if n == t.key:
                raise PlanError(f"task {t.key!r} needs itself")
            if n not in seen:
                raise PlanError(f"task {t.key!r} needs unknown task {n!r} (keys: {keys})")
    cycle = find_cycle({t.key: t.needs for t in plan.tasks})
    if cycle:
        raise PlanError(f"tasks form a cycle: {' -> '.join(cycle)} (task {cycle[0]!r})")
    return plan


def find_cycle(needs: dict[str, list[str]]) -> list[str]:
    """A dependency cycle as the path that closes it ([a, b, a]), or []."""
    colour: dict[str, int] = {}
    for start in needs:
        if colour.get(start):
            continue
        colour[start] = 1
        path, stack = [start], [iter(needs[start])]
        while stack:
            nxt = next(stack[-1], None)
            if nxt is None:
                colour[path.pop()] = 2
                stack.pop()
            elif colour.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            elif not colour.get(nxt):
                colour[nxt] = 1
                path.append(nxt)
                stack.append(iter(needs.get(nxt, ())))
    return []


def parse(text: str, max_tasks: int) -> Plan:
    return validate(find_json(text), max_tasks)


__all__ = ["PlanError", "TasksPlan", "WorkflowPlan", "TaskSpec", "ConvoySpec", "Plan", "SCHEMA",
           "WORKFLOW_SCHEMA", "find_json", "validate", "parse", "find_cycle"]
