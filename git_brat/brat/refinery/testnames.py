"""The failing tests' names in a check's output, read from the summary lines test runners print.

pytest (`FAILED path::name - why`, `ERROR path::name`), unittest (`FAIL: name (module.Class.name)`),
go test (`--- FAIL: TestName (0.00s)`), cargo test (`test path::name ... FAILED`), jest
(`● Suite › name`) and vitest (`FAIL  file > suite > name`). A line no runner's form fits is left
alone: the names are a pointer into the output, never a verdict (the exit code is that).
"""

from __future__ import annotations

import re

MAX_NAMES = 50          # a check that fails everything names the first ones
MAX_NAME = 300          # characters of one name

_FORMS = [
    re.compile(r"^(?:FAILED|ERROR) (\S+::\S.*?)(?: - .*)?$"),            # pytest summary
    re.compile(r"^(?:FAIL|ERROR): (\S+ \([\w.]+\))$"),                  # unittest
    re.compile(r"^\s*--- FAIL: (\S+) \(\d"),                            # go test (subtests too)
    re.compile(r"^test (\S+) \.\.\. FAILED$"),                          # cargo test
    re.compile(r"^\s*● (\S.*? › .*\S)\s*$"),                            # jest
    re.compile(r"^\s*(?:FAIL|×|✗) +(\S+ > .*\S)\s*$"),                  # vitest
]
_MARKS = ("FAIL", "ERROR", "●", "×", "✗")   # every form above holds one of these
_ESCAPE = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")   # runners colour their summaries


def failing_tests(output: str) -> list[str]:
    """The names of the failing tests the output's summary lines give, in order, each once."""
    seen: dict[str, None] = {}
    for raw in output.splitlines():
        if not any(mark in raw for mark in _MARKS):
            continue   # (most lines: a few substring searches instead of six patterns)
        line = (_ESCAPE.sub("", raw) if "\x1b" in raw else raw).rstrip()
        if not line or len(line) > 4 * MAX_NAME:
            continue
        for form in _FORMS:
            found = form.match(line)
            if found:
                seen.setdefault(found.group(1)[:MAX_NAME], None)
                break
        if len(seen) >= MAX_NAMES:
            break
    return list(seen)


__all__ = ["failing_tests", "MAX_NAMES"]
