"""The real `claude` as the mayor, against the tests' fake model server on 127.0.0.1.

Skipped (with the reason) until both exist here: `claude` on PATH (npm @anthropic-ai/claude-code)
and tests/fakemodel.py, expected to offer `serve(reply=TEXT)`: a context manager that serves the
Anthropic Messages API (SSE and not) on 127.0.0.1, answers every request with TEXT as the final
text (no tool call), and yields an object with `url` (for ANTHROPIC_BASE_URL) and `requests`
(what it was sent, one decoded JSON body each).
"""

from __future__ import annotations

import json
import re
import shutil
import uuid

import pytest

from fake_mayor import PLAN
from helpers import ROOT, brat, brat_json, git, status

pytestmark = [
    pytest.mark.skipif(shutil.which("claude") is None,
                       reason="claude is not on PATH (npm @anthropic-ai/claude-code)"),
    pytest.mark.skipif(not (ROOT / "tests" / "fakemodel.py").exists(),
                       reason="tests/fakemodel.py (the fake model server) is not in this checkout"),
]

ANSWER = ("I looked at the repository. Here is the plan:\n\n```json\n"
          + json.dumps(PLAN, indent=2) + "\n```\n")


def test_claude_answers_a_plan_that_becomes_a_convoy_and_resumes_its_conversation(brepo):
    fakemodel = pytest.importorskip("fakemodel")
    if not hasattr(fakemodel, "serve"):
        pytest.skip("tests/fakemodel.py has no serve(reply=TEXT) (see this file's docstring)")
    brat(brepo, "config", "set", "mayor.engine", "claude")
    brat(brepo, "config", "set", "mayor.timeout", "120")
    git(brepo, "add", "-A")
    git(brepo, "commit", "-q", "-m", "mayor: claude")
    with fakemodel.serve(reply=ANSWER) as server:
        env = {"ANTHROPIC_BASE_URL": server.url, "ANTHROPIC_API_KEY": "sk-test-not-real"}
        first = brat_json(brepo, "mayor", "ask", "Analyze src/ and create tasks", "--yes",
                          env=env, timeout=300)
        assert first["created"] and first["engine"] == "claude" and not first["resumed"]
        assert [t["key"] for t in first["tasks"]] == ["tabs", "tests", "docs"]
        assert uuid.UUID(first["session_id"])          # claude's own conversation id
        c = brat_json(brepo, "convoy", "show", first["convoy"])
        assert c["title"] == "Fix the parser" and c["total"] == 3
        second = brat_json(brepo, "mayor", "ask", "And the docs?", "--yes", env=env,
                           timeout=300)
        assert second["resumed"] and second["conversation"] == first["conversation"]
        # The resumed request carries the first exchange (claude kept the conversation).
        last = json.dumps(server.requests[-1])
        assert re.search("Analyze src/ and create tasks", last)
    assert status(brepo) == ""
