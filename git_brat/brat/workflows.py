"""Workflow templates (.brat/workflows/*.yaml, or shipped) → a convoy and its tasks in one batch."""

from __future__ import annotations

import os
import re
from typing import Any

import msgspec
import yaml

from git_brat.brat import board as model
from git_brat.brat.tasks import task_drafts
from git_brat.grite.model import events as ev
from git_brat.errors import NotFound, UsageError
from git_brat.files import atomic_write, read_inside
from git_brat.git.store import Store
from git_brat.grite.issues import summary
from git_brat.grite.log.wal import Draft
from git_brat.grite.repo import Grite

LOCAL_DIR = os.path.join(".brat", "workflows")
TYPES = ("workflow", "convoy")
EXTENSIONS = (".yaml", ".yml")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
_STEP_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]*")
_INPUT = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")
_PLACEHOLDER = re.compile(r"\{\{(.*?)\}\}", re.S)

# brat's own format: `labels` (task labels) and `depends_on` (the same as `needs`) too.
_STEP_KEYS = ("id", "title", "body", "needs", "depends_on", "priority", "paths", "labels")
_LABEL = re.compile(r"[^\s\x00-\x1f\x7f]+")
_INPUT_KEYS = ("description", "default", "required")


class WorkflowError(UsageError):
    """A template that cannot be used, or bad --var input; says file and line where it can."""


class Input(msgspec.Struct):
    name: str
    description: str
    default: str | None        # None: no default (required, or empty when not given)
    required: bool
    line: int = 1              # where it is declared, for messages


class Step(msgspec.Struct):
    id: str
    role: str                  # step (type: workflow), leg or synthesis (type: convoy)
    title: str
    body: str
    needs: list[str]
    priority: int
    paths: list[str]
    line: int
    labels: list[str] = []


class Workflow(msgspec.Struct):
    name: str
    type: str
    description: str
    title: str
    body: str
    inputs: list[Input]
    steps: list[Step]
    source: str                # file shown in messages: .brat/workflows/x.yaml or shipped:x.yaml
    shipped: bool
    overrides: bool            # a local template that replaces a shipped one of the same name
    inputs_line: int = 1       # line of `inputs:` (or 1 without one), for messages


class WorkflowInfo(msgspec.Struct):
    name: str
    type: str
    description: str
    source: str
    shipped: bool
    overrides: bool
    error: str | None = None


class PlannedTask(msgspec.Struct):
    step: str
    title: str
    body: str
    needs: list[str]
    priority: int
    paths: list[str]
    labels: list[str] = []


class Plan(msgspec.Struct):
    workflow: str
    type: str
    title: str
    body: str
    vars: dict[str, str]
    tasks: list[PlannedTask]


class RunTask(msgspec.Struct):
    step: str
    id: str
    title: str
    needs: list[str]


class RunResult(msgspec.Struct):
    convoy: str
    title: str
    workflow: str
    vars: dict[str, str]
    tasks: list[RunTask]
    dry_run: bool = False


# -- YAML with line numbers ----------------------------------------------------------

class _Doc:
    """Typed access to composed YAML nodes; every error carries file and line."""

    def __init__(self, loader, where: str):
        self.loader, self.where = loader, where

    def fail(self, node_or_line, message: str) -> WorkflowError:
        line = node_or_line if isinstance(node_or_line, int) else node_or_line.start_mark.line + 1
        return WorkflowError(f"{self.where}:{line}: {message}")

    def mapping(self, node, what: str, allowed: tuple[str, ...]) -> dict[str, tuple[Any, Any]]:
        """key -> (key node, value node); unknown and duplicate keys are errors."""
        if not isinstance(node, yaml.MappingNode):
            raise self.fail(node, f"{what} must be a mapping (key: value lines)")
        out: dict[str, tuple[Any, Any]] = {}
        for knode, vnode in node.value:
            key = knode.value if isinstance(knode, yaml.ScalarNode) else None
            if not isinstance(key, str) or key == "<<":
                raise self.fail(knode, f"{what}: keys must be plain names")
            if key not in allowed:
                raise self.fail(knode, f"unknown key {key!r} in {what} (allowed: {', '.join(allowed)})")
            if key in out:
                raise self.fail(knode, f"duplicate key {key!r} in {what} (first on line "
                                       f"{out[key][0].start_mark.line + 1})")
            out[key] = (knode, vnode)
        return out

    def sequence(self, node, what: str) -> list:
        if not isinstance(node, yaml.SequenceNode):
            raise self.fail(node, f"{what} must be a list")
        return list(node.value)

    def text(self, node, what: str) -> str:
        """A scalar as written (so `title: 2024-01-01` stays text); null is ''."""
        if not isinstance(node, yaml.ScalarNode):
            raise self.fail(node, f"{what} must be text")
        return "" if node.tag == "tag:yaml.org,2002:null" else str(node.value)

    def value(self, node, what: str, kind: type, describe: str):
        if not isinstance(node, yaml.ScalarNode):
            raise self.fail(node, f"{what} must be {describe}")
        try:   # explicit tags (`!!int abc`, `!!python/name:…`) fail inside PyYAML
            v = self.loader.construct_object(node)
        except (yaml.YAMLError, ValueError, KeyError, TypeError, AttributeError):
            raise self.fail(node, f"{what} must be {describe}, not {node.value!r}")
        if type(v) is not kind:
            raise self.fail(node, f"{what} must be {describe}, not {node.value!r}")
        return v


# Templates are committed files (any pusher writes them): bounded before PyYAML sees them. Its
# composer recurses once per nesting level, so 50,000 nested brackets were a RecursionError.
MAX_BYTES = 256 << 10
MAX_DEPTH = 32


class _BoundedLoader(yaml.SafeLoader):
    """SafeLoader that refuses nesting deeper than MAX_DEPTH while composing."""
    _depth = 0

    def compose_node(self, parent, index):
        if self._depth >= MAX_DEPTH:
            raise yaml.composer.ComposerError(None, None, f"nested deeper than {MAX_DEPTH} "
                                              "levels", self.peek_event().start_mark)
        self._depth += 1
        try:
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


def _compose(text: str, where: str):
    loader = _BoundedLoader(text)
    try:
        node = loader.get_single_node()
    except yaml.YAMLError as exc:
        loader.dispose()
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        at = f":{mark.line + 1}" if mark is not None else ""
        raise WorkflowError(f"{where}{at}: malformed YAML: {problem}") from None
    if node is None:
        loader.dispose()
        raise WorkflowError(f"{where}:1: the file is empty (expected `type: workflow` or `type: convoy`)")
    return loader, node


def parse(text: str, name: str, source: str, shipped: bool = False,
          overrides: bool = False) -> Workflow:
    """Parse and fully validate a template (placeholders, needs, cycles) without running it."""
    loader, root = _compose(text, source)
    try:
        return _parse(_Doc(loader, source), root, name, source, shipped, overrides)
    finally:
        loader.dispose()


def _parse(d: _Doc, root, name: str, source: str, shipped: bool, overrides: bool) -> Workflow:
    every = ("name", "version", "type", "description", "inputs", "title", "body", "steps", "legs",
             "synthesis")
    top = d.mapping(root, "the workflow", every)
    if "name" in top:   # brat's format names the workflow; here the file name does
        named = d.text(top["name"][1], "name")
        if named != name:
            raise d.fail(top["name"][1], f"name {named!r} does not match the file name "
                                         f"{name!r}: rename the file to {named}.yaml or change "
                                         f"`name:`")
    if "version" in top:   # informational
        v = top["version"][1]
        if not isinstance(v, yaml.ScalarNode):
            raise d.fail(v, "version must be a number or text")
    if "type" not in top:
        raise d.fail(root, "missing `type:` (workflow or convoy)")
    wtype = d.text(top["type"][1], "type")
    if wtype not in TYPES:
        raise d.fail(top["type"][1], f"type {wtype!r} is not allowed: use workflow or convoy")
    wrong = ("legs", "synthesis") if wtype == "workflow" else ("steps",)
    for key in wrong:
        if key in top:
            raise d.fail(top[key][0], f"`{key}` is not allowed in a type: {wtype} template "
                                      f"(use {'steps' if wtype == 'workflow' else 'legs and synthesis'})")
    inputs = _inputs(d, top["inputs"][1]) if "inputs" in top else []
    declared = {i.name for i in inputs}
    desc = d.text(top["description"][1], "description") if "description" in top else ""
    title = d.text(top["title"][1], "title") if "title" in top else name
    body = d.text(top["body"][1], "body") if "body" in top else ""
    for key, text in (("title", title), ("body", body)):
        if key in top:
            _check_placeholders(d, top[key][1], text, declared)

    if wtype == "workflow":
        if "steps" not in top:
            raise d.fail(root, "a type: workflow template needs `steps:` (a list of steps)")
        nodes = d.sequence(top["steps"][1], "steps")
        if not nodes:
            raise d.fail(top["steps"][1], "steps must not be empty")
        parsed = [_step(d, n, "step", declared) for n in nodes]
    else:
        for key in ("legs", "synthesis"):
            if key not in top:
                raise d.fail(root, f"a type: convoy template needs `{key}:`")
        nodes = d.sequence(top["legs"][1], "legs")
        if not nodes:
            raise d.fail(top["legs"][1], "legs must not be empty")
        parsed = [_step(d, n, "leg", declared) for n in nodes]
        parsed.append(_step(d, top["synthesis"][1], "synthesis", declared,
                            legs=[s.id for s, _lines in parsed]))
    _check_graph(d, parsed)
    steps = [s for s, _lines in parsed]
    inputs_line = top["inputs"][0].start_mark.line + 1 if "inputs" in top else 1
    return Workflow(name, wtype, desc, title, body, inputs, steps, source, shipped, overrides,
                    inputs_line)


def _inputs(d: _Doc, node) -> list[Input]:
    if isinstance(node, yaml.ScalarNode) and node.tag == "tag:yaml.org,2002:null":
        return []
    out = []
    for key, (knode, vnode) in d.mapping(node, "inputs", _allow_any(node)).items():
        if not _INPUT.fullmatch(key):
            raise d.fail(knode, f"input name {key!r} is not allowed: use letters, digits, _ and -")
        spec = ({} if isinstance(vnode, yaml.ScalarNode) and vnode.tag == "tag:yaml.org,2002:null"
                else d.mapping(vnode, f"input {key!r}", _INPUT_KEYS))
        description = d.text(spec["description"][1], "description") if "description" in spec else ""
        required = (d.value(spec["required"][1], f"input {key!r} required", bool, "true or false")
                    if "required" in spec else False)
        default = d.text(spec["default"][1], f"input {key!r} default") if "default" in spec else None
        if required and default is not None:
            raise d.fail(spec["default"][0], f"input {key!r} is required, so it cannot have a default")
        out.append(Input(key, description, default, required, knode.start_mark.line + 1))
    return out


def _allow_any(node) -> tuple[str, ...]:
    """Every key of a mapping node (for mappings whose keys are user-chosen names)."""
    if not isinstance(node, yaml.MappingNode):
        return ()
    return tuple(k.value for k, _v in node.value if isinstance(k, yaml.ScalarNode))


def _step(d: _Doc, node, role: str, declared: set[str],
          legs: list[str] | None = None) -> tuple[Step, dict[str, int]]:
    """One step, and the line each of its `needs` entries is on (for error messages)."""
    keys = tuple(k for k in _STEP_KEYS if not (role == "leg" and k in ("needs", "depends_on")))
    what = {"step": "a step", "leg": "a leg", "synthesis": "the synthesis"}[role]
    if role == "leg" and isinstance(node, yaml.MappingNode):
        for k, _v in node.value:
            if getattr(k, "value", None) in ("needs", "depends_on"):
                raise d.fail(k, f"legs run in parallel: `{k.value}` is not allowed in a leg "
                                "(the synthesis waits for the legs)")
    m = d.mapping(node, what, keys)
    if "id" in m:
        sid = d.text(m["id"][1], "id")
        if not _STEP_ID.fullmatch(sid):
            raise d.fail(m["id"][1], f"step id {sid!r} is not allowed: use letters, digits, _ and -")
    elif role == "synthesis":
        sid = "synthesis"
    else:
        raise d.fail(node, f"{what} needs an `id:`")
    if "title" not in m:
        raise d.fail(node, f"{role} {sid!r} needs a `title:`")
    title = d.text(m["title"][1], "title")
    if not title.strip():
        raise d.fail(m["title"][1], f"{role} {sid!r} has an empty title")
    body = d.text(m["body"][1], "body") if "body" in m else ""
    for key, text in (("title", title), ("body", body)):
        if key in m:
            _check_placeholders(d, m[key][1], text, declared)
    priority = model.DEFAULT_PRIORITY
    if "priority" in m:
        priority = d.value(m["priority"][1], "priority", int, "an integer from 0 to 4")
        if priority not in model.PRIORITIES:
            raise d.fail(m["priority"][1], f"priority {priority} is not allowed: use 0 (most urgent) to 4")
    paths = []
    if "paths" in m:
        for p in d.sequence(m["paths"][1], "paths"):
            text = d.text(p, "a path glob")
            if not text.strip() or "\n" in text:
                raise d.fail(p, "a path glob must be one non-empty line")
            _check_placeholders(d, p, text, declared)
            paths.append(text)
    if "needs" in m and "depends_on" in m:
        raise d.fail(m["depends_on"][0], "`depends_on` and `needs` say the same thing: use one")
    labels = []
    if "labels" in m:
        vnode = m["labels"][1]
        items = [vnode] if isinstance(vnode, yaml.ScalarNode) else d.sequence(vnode, "labels")
        for n in items:
            text = d.text(n, "a label")
            if not _LABEL.fullmatch(text):
                raise d.fail(n, f"label {text!r} is not allowed: one word, no spaces or "
                                "control characters")
            labels.append(text)
    needs: list[tuple[str, int]] = []
    if "needs" in m or "depends_on" in m:
        vnode = m["needs" if "needs" in m else "depends_on"][1]
        items = [vnode] if isinstance(vnode, yaml.ScalarNode) else d.sequence(vnode, "needs")
        needs = [(d.text(n, "needs"), n.start_mark.line + 1) for n in items]
    elif role == "synthesis":
        needs = [(leg, node.start_mark.line + 1) for leg in legs or ()]
    if role == "synthesis":
        for n, line in needs:
            if n not in (legs or ()):
                raise d.fail(line, f"the synthesis needs {n!r}, which is not a leg "
                                   f"(legs: {', '.join(legs or ())})")
    step = Step(sid, role, title, body, [n for n, _ in needs], priority, paths,
                node.start_mark.line + 1, list(dict.fromkeys(labels)))
    return step, dict(needs)


def _check_placeholders(d: _Doc, node, text: str, declared: set[str]) -> None:
    for m in _PLACEHOLDER.finditer(text):
        name = m.group(1).strip()
        line = node.start_mark.line + 1 + _line_offset(node, text, m.start())
        if not _INPUT.fullmatch(name):
            raise d.fail(line, f"malformed placeholder {m.group(0)!r}: use {{{{name}}}} with a declared input")
        if name not in declared:
            shown = ", ".join(sorted(declared)) or "none"
            raise d.fail(line, f"placeholder {{{{{name}}}}} names an undeclared input "
                               f"(declared inputs: {shown})")


def _line_offset(node, text: str, pos: int) -> int:
    """Lines into a block scalar (`|`/`>`) where pos lies; a plain scalar is one line."""
    return 1 + text.count("\n", 0, pos) if node.style in ("|", ">") else 0


def _check_graph(d: _Doc, parsed: list[tuple[Step, dict[str, int]]]) -> None:
    steps = [s for s, _lines in parsed]
    need_lines = {s.id: lines for s, lines in parsed}
    ids: dict[str, Step] = {}
    for s in steps:
        if s.id in ids:
            raise d.fail(s.line, f"duplicate step id {s.id!r} (first on line {ids[s.id].line})")
        ids[s.id] = s
    for s in steps:
        lines = need_lines.get(s.id, {})
        for n in s.needs:
            if n == s.id:
                raise d.fail(lines.get(n, s.line), f"step {s.id!r} needs itself")
            if n not in ids:
                raise d.fail(lines.get(n, s.line), f"step {s.id!r} needs unknown step {n!r} "
                                                   f"(steps: {', '.join(ids)})")
    # Cycle: depth-first search with colours, reporting the path it closes.
    colour: dict[str, int] = {}
    for start in ids:
        if colour.get(start):
            continue
        stack = [(start, iter(ids[start].needs))]
        path = [start]
        colour[start] = 1
        while stack:
            node, it = stack[-1]
            nxt = next(it, None)
            if nxt is None:
                colour[node] = 2
                stack.pop()
                path.pop()
            elif colour.get(nxt) == 1:
                cycle = path[path.index(nxt):] + [nxt]
                raise d.fail(ids[nxt].line, "steps form a cycle: " + " -> ".join(cycle))
            elif not colour.get(nxt):
                colour[nxt] = 1
                path.append(nxt)
                stack.append((nxt, iter(ids[nxt].needs)))


# -- finding templates -----------------------------------------------------------

def shipped_dir() -> str:
    from git_brat.brat import templates
    return os.path.dirname(os.path.abspath(templates.__file__))


def local_dir(store: Store) -> str | None:
    top = store.toplevel()
    return os.path.join(top, LOCAL_DIR) if top else None


def _scan(directory: str | None) -> dict[str, str]:
    out: dict[str, str] = {}
    if not directory or not os.path.isdir(directory):
        return out
    for fn in sorted(os.listdir(directory)):
        stem, ext = os.path.splitext(fn)
        if ext in EXTENSIONS and _NAME.fullmatch(stem) and stem not in out:
            out[stem] = os.path.join(directory, fn)
    return out


def _located(store: Store) -> dict[str, tuple[str, str, bool, bool]]:
    """name -> (path, source label, shipped, overrides); local templates win."""
    shipped = _scan(shipped_dir())
    local = _scan(local_dir(store))
    out = {n: (p, f"shipped:{os.path.basename(p)}", True, False) for n, p in shipped.items()}
    for n, p in local.items():
        out[n] = (p, os.path.join(LOCAL_DIR, os.path.basename(p)), False, n in shipped)
    return dict(sorted(out.items()))


def _read(path: str, source: str) -> str:
    # A regular file in its folder only: never through a committed symlink, nor from a FIFO.
    got = read_inside(os.path.dirname(path), os.path.basename(path), MAX_BYTES)
    if got is None:
        raise WorkflowError(f"{source}: not a regular file inside {os.path.dirname(source) or '.'}"
                            f"/: not read")
    try:
        if got[1]:
            raise WorkflowError(f"{source}: larger than {MAX_BYTES >> 10} KiB: not read")
        return got[0].decode("utf-8")
    except UnicodeDecodeError as exc:
        raise WorkflowError(f"{source}: cannot read: {exc}") from None


def check_name(name: str) -> str:
    if not _NAME.fullmatch(name or ""):
        raise UsageError(f"invalid workflow name {name!r}: use letters, digits, '.', '_' and '-'")
    return name


def find(store: Store, name: str) -> Workflow:
    check_name(name)
    located = _located(store)
    if name not in located:
        raise NotFound(f"no workflow named {name!r} (available: {', '.join(located) or 'none'})")
    path, source, shipped, overrides = located[name]
    return parse(_read(path, source), name, source, shipped, overrides)


def list_all(store: Store) -> list[WorkflowInfo]:
    out = []
    for name, (path, source, shipped, overrides) in _located(store).items():
        try:
            wf = parse(_read(path, source), name, source, shipped, overrides)
            out.append(WorkflowInfo(name, wf.type, wf.description, source, shipped, overrides))
        except WorkflowError as exc:
            out.append(WorkflowInfo(name, "", "", source, shipped, overrides, exc.message))
    return out


def copy(store: Store, name: str, force: bool = False) -> str:
    """Copy a shipped template into .brat/workflows/ so it can be edited (returns the path)."""
    check_name(name)
    shipped = _scan(shipped_dir())
    if name not in shipped:
        raise NotFound(f"no shipped workflow named {name!r} (shipped: {', '.join(shipped)})")
    directory = local_dir(store)
    if directory is None:
        raise UsageError("this repository has no work tree (bare): there is no .brat/workflows/ "
                         "to copy into")
    dest = os.path.join(directory, os.path.basename(shipped[name]))
    existing = _scan(directory).get(name)
    if existing and not force:
        raise UsageError(f"{os.path.relpath(existing, store.toplevel())} already exists; "
                         f"use --force to overwrite it")
    with open(shipped[name], "rb") as f:
        atomic_write(dest, f.read())
    return dest


# -- running -----------------------------------------------------------------------

def _substitute(text: str, values: dict[str, str]) -> str:
    return _PLACEHOLDER.sub(lambda m: values[m.group(1).strip()], text)


def _body(text: str, values: dict[str, str]) -> str:
    """Substituted body; an empty optional input leaves no run of blank lines behind."""
    return re.sub(r"\n{3,}", "\n\n", _substitute(text, values))


def parse_vars(pairs: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        key = key.strip()
        if not sep or not key:
            raise UsageError(f"--var {pair!r} is not KEY=VALUE")
        if key in out:
            raise UsageError(f"--var {key} given twice")
        out[key] = value
    return out


def plan(wf: Workflow, given: dict[str, str]) -> Plan:
    """Inputs checked and substituted; every task title checked. Writes nothing."""
    declared = {i.name: i for i in wf.inputs}
    for key in given:
        if key not in declared:
            shown = ", ".join(declared) if declared else "it declares no inputs"
            raise WorkflowError(f"{wf.source}:{wf.inputs_line}: workflow {wf.name} has no input "
                                f"{key!r} (declared: {shown})")
    values: dict[str, str] = {}
    for inp in wf.inputs:
        if inp.name in given and (given[inp.name].strip() or not inp.required):
            values[inp.name] = given[inp.name]
        elif inp.required:
            raise WorkflowError(f"{wf.source}:{inp.line}: workflow {wf.name} needs input {inp.name!r}"
                                f"{' (' + inp.description + ')' if inp.description else ''}: "
                                f"pass --var {inp.name}=VALUE")
        else:
            values[inp.name] = inp.default or ""

    def one_line(text: str, what: str, line: int) -> str:
        text = text.strip()
        if not text or any(c in text for c in "\n\r\0"):
            raise WorkflowError(f"{wf.source}:{line}: {what} must be one non-empty line after "
                                f"substituting the inputs, got {text!r}")
        return text

    title = one_line(_substitute(wf.title, values), "the convoy title", 1)
    tasks = []
    for s in wf.steps:
        tasks.append(PlannedTask(
            s.id, one_line(_substitute(s.title, values), f"the title of {s.role} {s.id!r}", s.line),
            _body(s.body, values), list(s.needs), s.priority,
            [one_line(_substitute(p, values), f"a path of {s.role} {s.id!r}", s.line) for p in s.paths],
            list(s.labels)))
    return Plan(wf.name, wf.type, title, _body(wf.body, values), values, tasks)


def run(g: Grite, wf: Workflow, given: dict[str, str], dry_run: bool = False) -> RunResult:
    """Create the convoy and all its tasks in one batch: everything, or (on any error) nothing."""
    p = plan(wf, given)
    cid = ev.new_entity_id()
    ids = {t.step: ev.new_entity_id() for t in p.tasks}
    drafts = [Draft(cid, ev.Create(model.CONVOY, {"title": p.title, "body": p.body,
                                                  "workflow": wf.name, "vars": p.vars}))]
    for t in p.tasks:
        drafts += task_drafts(ids[t.step], cid, t.title, t.body, [ids[n] for n in t.needs],
                                    t.priority, t.paths, step=t.step)
        drafts += [Draft(ids[t.step], ev.AddTo("labels", label)) for label in t.labels]
    if not dry_run:
        g.append(drafts, summary(f"workflow.run {wf.name}", cid, p.title))
    tasks = [RunTask(t.step, ids[t.step], t.title, [ids[n] for n in t.needs]) for t in p.tasks]
    return RunResult(cid, p.title, wf.name, p.vars, tasks, dry_run)


__all__ = ["Workflow", "WorkflowError", "find", "list_all", "copy", "parse", "parse_vars",
           "plan", "run"]
