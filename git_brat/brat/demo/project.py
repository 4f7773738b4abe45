"""The demo's project: a small Python package with three real bugs, its tests, and the fixes."""

from __future__ import annotations

import msgspec

FILES = {
    ".gitignore": "__pycache__/\n",
    "README.md": "# textstats\n\nSmall text statistics. `python -m unittest -q` runs the tests.\n",
    "AGENTS.md": "Run `python -m unittest -q` before you commit. Keep changes minimal.\n",
    "textstats/__init__.py": '"""Small text statistics."""\n',
    "textstats/stats.py": '''"""Averages of numbers."""


def mean(values):
    """The arithmetic mean; 0.0 for no values."""
    if not values:
        return 0.0
    return sum(values) // len(values)


def median(values):
    """The middle value; the mean of the two middle ones for an even count."""
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid]
''',
    "textstats/words.py": '''"""Counting words."""

from textstats.stats import median


def word_count(text):
    """How many words text holds, whatever whitespace separates them."""
    return len(text.split(" "))


def summary(texts):
    """One line: how many texts, and the median word count."""
    counts = [word_count(t) for t in texts]
    return f"{len(texts)} texts, median {median(counts)} words"
''',
    "tests/__init__.py": "",
    "tests/test_stats.py": '''import unittest

from textstats.stats import mean, median


class Mean(unittest.TestCase):
    def test_fractional_mean(self):
        self.assertEqual(mean([1, 2]), 1.5)

    def test_empty(self):
        self.assertEqual(mean([]), 0.0)


class Median(unittest.TestCase):
    def test_odd(self):
        self.assertEqual(median([3, 1, 2]), 2)

    def test_even(self):
        self.assertEqual(median([4, 1, 3, 2]), 2.5)
''',
}

CHECK = "python3 -m unittest -q"


WORDS_TEST = '''import unittest

from textstats.words import summary, word_count


class Words(unittest.TestCase):
    def test_runs_of_spaces(self):
        self.assertEqual(word_count("a  b\\tc\\n"), 3)

    def test_summary(self):
        self.assertEqual(summary(["a b", "a  b c d"]), "2 texts, median 3.0 words")
'''


class Fix(msgspec.Struct):
    key: str
    title: str
    body: str
    path: str
    old: str
    new: str
    needs: list[str] = []
    adds: dict[str, str] = {}      # new files the fix brings (a test)


FIXES = [
    Fix("mean", "Fix mean(): integer division drops the fraction",
        "mean([1, 2]) returns 1 instead of 1.5: `//` floors. Use true division.",
        "textstats/stats.py", "sum(values) // len(values)", "sum(values) / len(values)"),
    Fix("median", "Fix median() for an even number of values",
        "median([4, 1, 3, 2]) returns 3; it must average the two middle values (2.5).",
        "textstats/stats.py", "    return ordered[mid]\n",
        "    if len(ordered) % 2:\n        return ordered[mid]\n"
        "    return (ordered[mid - 1] + ordered[mid]) / 2\n"),
    Fix("words", "Fix word_count() on runs of whitespace",
        "word_count('a  b\\tc') counts the empty strings between spaces; split on any "
        "whitespace, and add tests/test_words.py. Its summary() test reports a median word "
        "count, so this waits for the median fix.",
        "textstats/words.py", 'text.split(" ")', "text.split()", needs=["median"],
        adds={"tests/test_words.py": WORDS_TEST}),
]


def plan() -> dict:
    """The plan the demo engine answers the mayor with."""
    return {"convoy": {"title": "Fix the bugs in textstats",
                       "body": "The test suite fails: three bugs found by reading the code."},
            "tasks": [{"key": f.key, "title": f.title, "body": f.body, "paths": [f.path],
                       "priority": 1, "needs": list(f.needs)} for f in FIXES]}


def fix_for(title: str) -> Fix | None:
    return next((f for f in FIXES if f.title == title.strip()), None)


__all__ = ["FILES", "FIXES", "CHECK", "Fix", "plan", "fix_for"]
