"""Redaction's cost: what every synced text pays (a comment, a check's output, a session record).

Redaction of a 100 KB clean check output (pytest lines, tracebacks, commit ids, UUIDs, paths)
by this checkout's git_brat.redact and by an earlier revision's (default main), against a floor
in the same run (one regex scan of the text for a character it lacks), measured round-robin so
the machine's drift does not enter the ratios; then a short comment's first redaction in a
fresh process (what a `task comment` pays, compiling included), and `python -X importtime`
of the CLI (git_brat's own modules) for both revisions.

Usage: python bench/bench_redact.py [--before REV] [--rounds N]
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import re
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def clean_output(size: int = 100_000) -> str:
    """A check's output holding no credential, but every word that may look like one."""
    lines, n, i = [], 0, 0
    while n < size:
        i += 1
        h = hashlib.sha1(str(i).encode()).hexdigest()
        line = [
            f"tests/test_mod{i % 40}.py::test_parse_case_{i} PASSED                  [{i % 100:3d}%]",
            f'  File "/home/ci/src/pkg/module_{i % 30}.py", line {i % 900}, in handle_{i % 17}',
            f"commit {h} Merge: {h[:7]} {h[7:14]} key = self._key(item)",
            f'    assert result == expected, f"got {{result!r}}"  # id={uuid.UUID(int=i)}',
            f"E   KeyError: 'field_{i}' while reading tests/fixtures/data_{i}.json",
            f"3 passed, 1 failed, 2 warnings in {i / 100:.2f}s; the token count is {i}",
        ][i % 6]
        lines.append(line)
        n += len(line) + 1
    return "\n".join(lines)[:size]


def load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def timed(f) -> float:
    t0 = time.perf_counter()
    f()
    return (time.perf_counter() - t0) * 1000


def import_ms(root: Path) -> float:
    """git_brat's own modules' import time (ms) for `import git_brat.brat.cli` from root."""
    proc = subprocess.run([sys.executable, "-X", "importtime", "-c", "import git_brat.brat.cli"],
                          cwd=root, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    own = 0
    for line in proc.stderr.splitlines():
        parts = line.split("|")
        if len(parts) == 3 and parts[0].split(":")[-1].strip().isdigit():
            name = parts[2].strip()
            if name == "git_brat" or name.startswith("git_brat."):
                own += int(parts[0].split(":")[-1])
    return own / 1000


def first_comment_ms(root: Path) -> float:
    code = ("import time; from git_brat import redact; t = time.perf_counter(); "
            "redact.text('fixed the parser: see tests/test_parse.py::test_utf8, token: abc'); "
            "print((time.perf_counter() - t) * 1000)")
    return float(subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True,
                                text=True, check=True).stdout)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--before", default="main")
    ap.add_argument("--rounds", type=int, default=21)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        before_root = Path(d) / "before"
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "-q", "--detach",
                        str(before_root), args.before], check=True)
        try:
            run(before_root, args)
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force",
                            str(before_root)], check=True)


def run(before_root: Path, args) -> None:
    before = load(before_root / "git_brat" / "redact.py", "redact_before")
    after = load(ROOT / "git_brat" / "redact.py", "redact_after")
    text = clean_output()
    assert after.text(text) == text, "the clean output was changed"
    floor = re.compile("\x00")
    before.text(text), after.text(text)   # (compiled)
    samples: dict[str, list[float]] = {"floor": [], "before": [], "after": []}
    for _ in range(args.rounds):
        samples["floor"].append(timed(lambda: floor.search(text)))
        samples["before"].append(timed(lambda: before.text(text)))
        samples["after"].append(timed(lambda: after.text(text)))
    med = {k: statistics.median(v) for k, v in samples.items()}
    print(f"redaction of {len(text)} characters of clean check output, median of {args.rounds}:")
    print(f"  floor (one regex scan) {med['floor']:.3f} ms; before {med['before']:.2f} ms "
          f"({med['before'] / med['floor']:.0f}x); after {med['after']:.2f} ms "
          f"({med['after'] / med['floor']:.0f}x); after/before {med['after'] / med['before']:.2f}")
    comments = {"before": [], "after": []}
    imports = {"before": [], "after": []}
    for _ in range(max(5, args.rounds // 3)):
        for name, root in (("before", before_root), ("after", ROOT)):
            comments[name].append(first_comment_ms(root))
            imports[name].append(import_ms(root))
    print("a short comment's first redaction in a fresh process (compiling included), median: "
          + ", ".join(f"{k} {statistics.median(v):.2f} ms" for k, v in comments.items()))
    print("import git_brat.brat.cli, git_brat's own modules, median: "
          + ", ".join(f"{k} {statistics.median(v):.1f} ms" for k, v in imports.items()))


if __name__ == "__main__":
    main()
