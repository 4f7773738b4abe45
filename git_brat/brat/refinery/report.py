"""A failed check as people read it: the one report the CLI, the board and the inbox show.

What the log holds of a check (it syncs) is redacted when written: the output's tail, the
failing tests' names, the exit code and the commit checked. The whole output stays in the
merge's local log (0600), on the machine whose refinery ran it: `git brat refinery log TASK`.
"""

from __future__ import annotations

import os
from typing import Any

from git_brat import redact
from git_brat.brat import board as model
from git_brat.brat import layout
from git_brat.brat.board import MERGE, Board
from git_brat.brat.refinery.testnames import failing_tests
from git_brat.errors import NotFound
from git_brat.grite.model.state import Entity

TAIL = 20               # lines of the output's tail a report shows


class Failure(str):
    """A failed check's text as the refinery passes it on (its first line, then the output's
    tail), with what was learnt of the run: exit code (None: timed out), failing tests, the
    commit checked and the whole output's local log."""
    exit: int | None = None
    tests: list[str] = []
    commit: str = ""

    @classmethod
    def of(cls, text: str, exit: int | None, tests: list[str], commit: str) -> "Failure":
        out = cls(text)
        out.exit, out.tests, out.commit = exit, tests, commit
        return out


def headline(command: str, exit: int | None, commit: str, tests: list[str], tail: str) -> str:
    """One line saying why: the first failing test first (a list cut to its width still shows
    it), else the output's last line after what failed where."""
    why = "timed out" if exit is None else f"exit {exit}"
    if tests:
        more = f" (and {len(tests) - 1} more)" if len(tests) > 1 else ""
        return f"{tests[0]} failed{more}: check `{command}` ({why}) on {commit[:12]}"
    last = next((ln.strip() for ln in reversed(tail.splitlines()) if ln.strip()), "no output")
    return f"check `{command}` failed ({why}) on {commit[:12]}: {last}"


def names(output: bytes | str) -> list[str]:
    """The failing tests of a whole output, redacted (a name is anyone's text)."""
    text = output.decode("utf-8", "replace") if isinstance(output, bytes) else output
    return [redact.text(n) for n in failing_tests(text)]


def _failed_checks(board: Board, tid: str) -> list[Entity]:
    # (a task's merge records are its group: no walk over every merge at 10k tasks)
    return sorted((m for m in board.state.of_group(MERGE, tid) if m.get("task") == tid
                   and (m.get("output_tail") or m.get("failing_tests"))), key=model.age_key)


def _tail(text: Any) -> list[str]:
    return str(text or "").splitlines()[-TAIL:]


def check_report(g, board: Board, tid: str) -> dict | None:
    """The task's last failed check, or None: {"task", "merge", "commit", "exit" (None: timed
    out), "result" (one line), "tail" (its last lines), "failing_tests", "log" (the whole
    output's path here, "" when another machine ran it), "log_command"}."""
    found = _failed_checks(board, tid)
    return merge_report(g, found[-1]) if found else None


def merge_report(g, m: Entity) -> dict | None:
    """check_report of one merge entity (None: no failed check recorded on it)."""
    if not (m.get("output_tail") or m.get("failing_tests")):
        return None
    tid = str(m.get("task") or "")
    log = layout.merge_log(g.store, m.id)
    tests = m.get("failing_tests")
    return {"task": tid, "merge": m.id, "commit": str(m.get("checked_commit") or ""),
            "exit": m.get("exit_code") if isinstance(m.get("exit_code"), int) else None,
            "result": str(m.get("result") or ""), "tail": _tail(m.get("output_tail")),
            "failing_tests": [str(t) for t in tests] if isinstance(tests, list) else [],
            "log": log if os.path.exists(log) else "",
            "log_command": f"git brat refinery log {tid[:7]}"}


MAX_LOG = 64 << 20      # bytes of a log `refinery log` reads (its end, when longer)


def whole_log(g, board: Board, tid: str) -> dict:
    """The whole output of the task's last check run here: {"task", "merge", "log" (its path),
    "text", "truncated"}; a task checked only on another machine names that, with what the
    log holds of it (NotFound when it was never checked)."""
    merges = sorted((m for m in board.state.of_kind(MERGE) if m.get("task") == tid),
                    key=model.age_key)
    for m in reversed(merges):
        path = layout.merge_log(g.store, m.id)
        data, truncated = _read_end(path)
        if data is not None:
            return {"task": tid, "merge": m.id, "log": path, "text": data,
                    "truncated": truncated}
    last = check_report(g, board, tid)
    if last is None:
        raise NotFound(f"task {tid[:7]} has no check output: the refinery has not checked it"
                       + (" here" if merges else ""))
    raise NotFound(f"the whole output of task {tid[:7]}'s check is on the machine whose "
                   f"refinery ran it (not this clone); what the log holds of it: "
                   f"`git brat task show {tid[:7]}`")


def target_log(g, board: Board, target: str) -> dict:
    """The whole output of the red target's own check run here: {"target", "commit", "log",
    "text", "truncated"} (NotFound when the target is not red, or ran on another machine)."""
    from git_brat.brat.refinery import red
    found = red.red_target(board, target)
    if found is None:
        raise NotFound(f"{target} is not red: no check of it alone has failed since it last "
                       f"passed")
    path = red.log_path(g.store, found.commit)
    data, truncated = _read_end(path)
    if data is None:
        raise NotFound(f"the whole output of {target}'s check at {found.commit[:12]} is on the "
                       f"machine whose refinery ran it; what the log holds of it: `git brat "
                       f"status`")
    return {"target": target, "commit": found.commit, "log": path, "text": data,
            "truncated": truncated}


def _read_end(path: str) -> tuple[str | None, bool]:
    """The last MAX_LOG bytes of a local log as text, and whether it was longer."""
    try:
        size = os.path.getsize(path)
        with open(path, "rb") as f:
            f.seek(max(0, size - MAX_LOG))
            return f.read().decode("utf-8", "replace"), size > MAX_LOG
    except OSError:
        return None, False


def lines(report: dict, tail: int = 8) -> list[str]:
    """A report in a few lines of text (from a printable source: the CLI escapes them)."""
    out = [report["result"]]
    if report["failing_tests"]:
        out.append("failing: " + ", ".join(report["failing_tests"][:5])
                   + (f" and {len(report['failing_tests']) - 5} more"
                      if len(report["failing_tests"]) > 5 else ""))
    out += [f"| {ln}" for ln in report["tail"][-tail:]]
    out.append(f"whole output: {report['log_command']}"
               + ("" if report["log"] else " (on the machine whose refinery ran it)"))
    return out


__all__ = ["check_report", "merge_report", "whole_log", "target_log", "Failure", "headline", "names", "lines", "TAIL"]
