"""The failing tests' names read from real runners' output: pytest and unittest run here, the
other runners' summary lines as they print them."""

from __future__ import annotations

import subprocess
import sys

from git_brat.brat.refinery.testnames import MAX_NAMES, failing_tests

SUITE = """\
import unittest


def test_passes():
    assert True


def test_adds():
    assert 1 + 1 == 3


class Money(unittest.TestCase):
    def test_rounds(self):
        self.assertEqual(round(2.5), 3)

    def test_parses(self):
        raise ValueError("no such currency")
"""


def _run(tmp_path, *args: str) -> str:
    (tmp_path / "test_money.py").write_text(SUITE)
    proc = subprocess.run([sys.executable, "-m", *args], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode != 0
    return proc.stdout + proc.stderr


def test_pytest_names_each_failing_test_from_its_short_summary(tmp_path):
    out = _run(tmp_path, "pytest", "-q", "-p", "no:cacheprovider", "test_money.py")
    assert failing_tests(out) == ["test_money.py::test_adds", "test_money.py::Money::test_parses",
                                  "test_money.py::Money::test_rounds"]


def test_unittest_names_its_failures_and_errors(tmp_path):
    out = _run(tmp_path, "unittest", "test_money")
    assert sorted(failing_tests(out)) == ["test_parses (test_money.Money.test_parses)",
                                          "test_rounds (test_money.Money.test_rounds)"]


def test_go_test_names_failing_tests_and_subtests():
    out = """=== RUN   TestAdd
--- FAIL: TestAdd (0.00s)
    add_test.go:9: Add(1, 1) = 3, want 2
=== RUN   TestTable/negative
    --- FAIL: TestTable/negative (0.00s)
FAIL
FAIL\texample.com/calc\t0.002s
"""
    assert failing_tests(out) == ["TestAdd", "TestTable/negative"]


def test_cargo_test_names_the_tests_it_marks_failed():
    out = """running 3 tests
test tests::adds ... ok
test tests::rounds ... FAILED
test parse::tests::empty ... FAILED

failures:
    tests::rounds

test result: FAILED. 1 passed; 2 failed; 0 ignored; 0 measured; 0 filtered out
"""
    assert failing_tests(out) == ["tests::rounds", "parse::tests::empty"]


def test_jest_and_vitest_summaries_name_the_suite_and_test():
    jest = """FAIL src/sum.test.js
  \x1b[1m\x1b[31m● sum › adds two numbers\x1b[39m\x1b[22m

    expect(received).toBe(expected) // Object.is equality

Tests:       1 failed, 2 passed, 3 total
"""
    vitest = """ FAIL  src/sum.test.ts > sum > adds two numbers
AssertionError: expected 3 to be 2
 Test Files  1 failed (1)
"""
    assert failing_tests(jest) == ["sum › adds two numbers"]
    assert failing_tests(vitest) == ["src/sum.test.ts > sum > adds two numbers"]


def test_output_without_a_runners_summary_names_nothing_and_many_failures_are_capped():
    assert failing_tests("make: *** [Makefile:3: test] Error 1\nFAILED (failures=2)\n") == []
    many = "\n".join(f"FAILED t.py::test_{i} - boom" for i in range(500))
    assert len(failing_tests(many)) == MAX_NAMES
