"""brat's own workflow format runs unchanged: `name`, `version`, `labels`, `depends_on`."""

from __future__ import annotations

import textwrap

from bratkit import fail
from helpers import brat_json, grite_json

UPSTREAM_CODE_REVIEW = """\
name: code-review
type: convoy
legs:
  - id: correctness
    title: "Review correctness"
  - id: security
    title: "Review security"
  - id: performance
    title: "Review performance"
synthesis:
  title: "Synthesize review findings"
"""


def _write(repo, name, text) -> None:
    d = repo / ".brat" / "workflows"
    d.mkdir(parents=True, exist_ok=True)
    (d / name).write_text(textwrap.dedent(text))


def test_the_upstream_readme_code_review_runs_verbatim(brepo):
    _write(brepo, "code-review.yaml", UPSTREAM_CODE_REVIEW)
    run = brat_json(brepo, "workflow", "run", "code-review")
    assert [t["step"] for t in run["tasks"]] == ["correctness", "security", "performance",
                                                 "synthesis"]
    synthesis = run["tasks"][-1]
    assert len(synthesis["needs"]) == 3


def test_version_labels_and_depends_on_are_understood(brepo):
    _write(brepo, "review2.yaml", """\
        name: review2
        version: 2
        type: convoy
        legs:
          - id: a
            title: "Leg a"
            labels: [review, a]
          - id: b
            title: "Leg b"
        synthesis:
          title: "Both"
          labels: [synthesis]
          depends_on: [a]
        """)
    run = brat_json(brepo, "workflow", "run", "review2")
    tasks = {t["step"]: t for t in run["tasks"]}
    assert tasks["synthesis"]["needs"] == [tasks["a"]["id"]]
    log = grite_json(brepo, "log", tasks["a"]["id"])
    assert {e["summary"] for e in log if e["op"] == "add"} >= {"labels +review", "labels +a"}


def test_a_name_that_differs_from_the_file_name_is_refused_precisely(brepo):
    _write(brepo, "mine.yaml", UPSTREAM_CODE_REVIEW)
    code, err = fail(brepo, "workflow", "run", "mine")
    assert code == 2 and "mine.yaml:1" in err and "code-review" in err
    # The shipped code-review is not shadowed by a file of another name.
    assert brat_json(brepo, "workflow", "run", "code-review", "--var", "target=main",
                     "--dry-run")["dry_run"]
