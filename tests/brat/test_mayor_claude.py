"""The real `claude` as the mayor, against the tests' fake model server on 127.0.0.1.

Skipped (with the reason) until both are there: `claude` on PATH (npm @anthropic-ai/claude-code)
and a tests/fakemodel.py whose FakeModel takes `reply=TEXT`: the final text it gives a request
that holds no FAKE-EDIT task (where it now says "OK"), so the mayor's answer can be scripted.
The server must also keep `url` and `requests` (each with its decoded JSON `body`).
"""

from __future__ import annotations

import inspect
import json
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


def _fake_model(**kw):
    fakemodel = pytest.importorskip("fakemodel")
    cls = getattr(fakemodel, "FakeModel", None)
    if cls is None or "reply" not in inspect.signature(cls).parameters:
        pytest.skip("tests/fakemodel.py cannot script a final answer: FakeModel(reply=TEXT) is "
                    "missing (see this file's docstring)")
    return cls(**kw)


def test_claude_answers_a_plan_that_becomes_a_convoy_and_resumes_its_conversation(brepo):
    brat(brepo, "config", "set", "mayor.engine", "claude")
    brat(brepo, "config", "set", "mayor.timeout", "120")
    git(brepo, "add", "-A")
    git(brepo, "commit", "-q", "-m", "mayor: claude")
    with _fake_model(reply=ANSWER) as server:
        env = {"ANTHROPIC_BASE_URL": server.url, "ANTHROPIC_API_KEY": "sk-test-not-real"}
        first = brat_json(brepo, "mayor", "ask", "Analyze src/ and create tasks", "--yes",
                          env=env, timeout=300)
        assert first["created"] and first["engine"] == "claude" and not first["resumed"]
        assert [t["key"] for t in first["tasks"]] == ["tabs", "tests", "docs"]
        assert uuid.UUID(first["session_id"])          # claude's own conversation id
        c = brat_json(brepo, "convoy", "show", first["convoy"])
        assert c["title"] == "Fix the parser" and c["total"] == 3
        seen = len(server.requests)
        second = brat_json(brepo, "mayor", "ask", "And the docs?", "--yes", env=env,
                           timeout=300)
        assert second["resumed"] and second["conversation"] == first["conversation"]
        # claude kept the conversation: the resumed request carries the first question too.
        sent = [json.dumps(r.get("body", r)) for r in server.requests[seen:]]
        assert any("Analyze src/ and create tasks" in b and "And the docs?" in b for b in sent)
    assert status(brepo) == ""
