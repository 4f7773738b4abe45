"""The board a person would choose, in a real browser at 1k tasks: find a task, see what needs
you, review on one screen, approve and watch it land, create and start work, see a dead session.

Each story runs on its own repository: the demo project with its scripted engine (offline), and
a thousand more tasks waiting behind a blocked one (so the witness leaves them be). Screenshots of
each page go to $BRAT_TEST_ARTIFACTS/<module>/<test> (CI keeps them; default: a temporary directory)."""

from __future__ import annotations

import os
import signal
import subprocess
import time

import pytest

import boardkit
from bratkit import convoy, demo_project, task
from helpers import brat, brat_json, git

pytestmark = pytest.mark.slow

EXPLAIN = "Explain the design in DESIGN.md"
VIEW = {"width": 1400, "height": 900}


@pytest.fixture
def shots(artifacts, request):
    path = os.path.join(artifacts, request.node.name)
    os.makedirs(path, exist_ok=True)
    return lambda page, name: page.screenshot(path=os.path.join(path, f"{name}.png"))


@pytest.fixture
def big(tmp_path):
    """The demo project at 1k tasks, its board running: (repo, board, demo convoy)."""
    repo = demo_project(tmp_path / "textstats", witness__engine="demo", witness__concurrency="2",
                        witness__backoff="0", refinery__on_conflict="block")
    git(repo, "add", ".brat")
    git(repo, "commit", "-qm", "git-brat configuration")
    boardkit.thousand_tasks(repo)
    demo = convoy(repo, "Fix textstats")
    board = boardkit.start(repo)
    yield repo, board, demo
    board.stop()


@pytest.fixture
def page(browser, big):
    with boardkit.browser_page(browser, viewport=VIEW) as p:
        yield p


go = boardkit.go


def needs_count(page) -> int:
    """The count on "Needs you" (worked out beside the page: it may land just after it)."""
    badge = page.locator("#needs-count:not(:empty)")
    badge.wait_for()
    return int(badge.inner_text())


def work_once(repo, convoy_id, **env):
    """`git brat witness run --once --convoy C`: the demo engine works on C's ready tasks."""
    return subprocess.run(["git", "brat", "witness", "run", "--once", "--convoy", convoy_id],
                          cwd=repo, env={**os.environ, **env}, stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, timeout=180)


def in_view(page, selector) -> bool:
    box = page.locator(selector).first.bounding_box()
    return box is not None and box["y"] >= 0 and box["y"] + min(box["height"], 40) <= VIEW["height"]


def test_a_task_is_found_by_search_among_a_thousand(big, page, shots):
    repo, board, demo = big
    tid = task(repo, demo, "Rename the quokka module", "-b", "the wombat helper moves too")
    go(page, board)
    # The columns come first: the queued column is on the first screen, however many convoys.
    assert in_view(page, ".column[data-state=queued] .card")
    assert "more" in page.locator(".column[data-state=queued] li.more").inner_text()
    for query in ("wombat", "quokka", tid[:8]):      # a body's word, a title's, an id's start
        page.fill("input[name=q]", query)
        page.press("input[name=q]", "Enter")
        page.locator(".found", has_text="1 task(s) match").wait_for()
        cards = page.locator(".card")
        assert cards.count() == 1 and cards.first.get_attribute("data-task") == tid, query
    shots(page, "search")


def test_the_needs_you_count_goes_up_when_an_agent_blocks(big, page, shots):
    repo, board, demo = big
    task(repo, demo, EXPLAIN)             # the demo agent asks a question: it blocks
    go(page, board)
    before = needs_count(page)
    assert page.title().startswith(f"({before}) ")
    page.evaluate("window.__same_page = true")
    assert work_once(repo, demo).returncode == 0
    page.locator("#needs-count", has_text=str(before + 1)).wait_for()
    assert page.title().startswith(f"({before + 1}) ")
    # The agent's question is on its card, in the blocked column; no reload happened.
    page.locator(".column[data-state=blocked] .card", has_text=EXPLAIN) \
        .locator(".msg", has_text="the demo engine is a scripted agent").wait_for()
    assert page.evaluate("window.__same_page") is True
    shots(page, "needs-you-count")
    go(page, board, "/needs-you")
    page.locator("#interventions tr", has_text=EXPLAIN).wait_for()
    shots(page, "needs-you")


def _in_review(repo, demo, fix):
    tid = task(repo, demo, fix.title, "-b", fix.body)
    assert work_once(repo, demo).returncode == 0
    assert brat_json(repo, "task", "show", tid)["status"] == "needs-review"
    return tid


def test_a_review_on_one_screen_requests_changes_with_a_line_note(big, page, shots):
    from git_brat.brat.demo import project as demo_files
    repo, board, demo = big
    median = demo_files.FIXES[1]
    tid = _in_review(repo, demo, median)
    go(page, board, f"/task/{tid}")
    # The diff, the decision and the check's output, together on the first screen.
    page.locator(".diff tr.add").first.wait_for()
    for part in (".diff tr.add", "form.approve button", "form.reply textarea", "#check"):
        assert in_view(page, part), part
    # Only what the state allows: a task under review is approved or answered, not retried.
    assert page.locator("form.retry").count() == 0 and page.locator("form.stop").count() == 0
    shots(page, "review")
    # A note on a line opens under that line, and goes with the request for changes.
    line = page.locator("tr.add").filter(has=page.locator("button.note")).first
    number = line.locator("button.note").get_attribute("data-line")
    line.locator("button.note").click()
    draft = page.locator("tr.add:has(button.note[data-line='%s']) + tr.note-draft input" % number)
    draft.fill("average the two middle values here")
    box, under = line.bounding_box(), draft.bounding_box()
    assert 0 <= under["y"] - (box["y"] + box["height"]) < 40      # right under its line
    page.fill("form.reply textarea[name=message]", "name the middle index")
    page.click("form.reply button")
    page.locator("#facts", has_text="queued").wait_for()
    shown = brat_json(repo, "task", "show", tid)
    assert shown["status"] == "queued"
    assert shown["comments"][-1]["body"] == (
        f"reply: name the middle index\n\nNotes on the diff:\n"
        f"- {median.path}:{number}: average the two middle values here")
    # The note stays at its line; a queued task is neither approved nor answered again.
    page.locator(f"tr:has(button.note[data-line='{number}']) + tr.note-row.past",
                 has_text="average the two middle values here").wait_for()
    assert page.locator("form.approve").count() == 0 and page.locator("form.reply").count() == 0
    shots(page, "review-noted")


def test_approving_on_the_board_then_a_refinery_pass_lands_the_work(big, page, shots):
    from git_brat.brat.demo import project as demo_files
    repo, board, demo = big
    tid = _in_review(repo, demo, demo_files.FIXES[1])
    go(page, board, f"/task/{tid}")
    page.click("form.approve button")
    page.locator(".decision output.ok").wait_for()
    assert brat_json(repo, "task", "show", tid)["approved_head"]
    go(page, board)
    page.locator(".column[data-state=needs-review] .card", has_text=demo_files.FIXES[1].title).wait_for()
    page.click("form.refinery-pass button")
    try:
        page.locator(".column[data-state=merged] .card", has_text=demo_files.FIXES[1].title) \
            .wait_for(timeout=90000)
        shots(page, "landed")
    finally:
        _wait_refinery_gone(repo)
    assert brat_json(repo, "task", "show", tid)["status"] == "merged"
    assert "sum(values)" in git(repo, "show", "main:textstats/stats.py")


def _wait_refinery_gone(repo, timeout=90):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and brat_json(repo, "refinery", "status")["running"]:
        time.sleep(0.3)
    assert not brat_json(repo, "refinery", "status")["running"]


def test_a_task_created_and_a_witness_started_from_the_board(big, page, shots):
    from git_brat.brat.demo import project as demo_files
    repo, board, demo = big
    mean = demo_files.FIXES[0]
    go(page, board)
    page.click("details.create summary")
    page.select_option("form.new-task select[name=convoy]", demo)
    page.fill("form.new-task input[name=title]", mean.title)
    page.fill("form.new-task textarea[name=body]", mean.body)
    page.select_option("form.new-task select[name=priority]", "0")   # urgent: first in its column
    page.click("form.new-task button")
    card = page.locator(".column[data-state=queued] .card", has_text=mean.title)
    card.wait_for()
    shots(page, "created")
    page.click("form.witness-start button")
    try:
        page.locator("#roles", has_text="witness running").wait_for()
        page.locator(".column[data-state=needs-review] .card", has_text=mean.title) \
            .wait_for(timeout=90000)
        shots(page, "witness-worked")
        page.click("form.witness-stop button")
        page.locator("#roles", has_text="no witness runs here").wait_for(timeout=60000)
    finally:
        brat(repo, "witness", "stop", check=False)
    [made] = [t for t in brat_json(repo, "task", "list", "--convoy", demo)]
    assert made["title"] == mean.title and made["status"] == "needs-review"


def test_a_session_whose_witness_was_killed_is_marked_dead(big, page, shots):
    from git_brat.brat.demo import project as demo_files
    repo, board, demo = big
    mean = demo_files.FIXES[0]
    task(repo, demo, mean.title, "-b", mean.body)
    go(page, board)
    witness = subprocess.Popen(["git", "brat", "witness", "run", "--once", "--convoy", demo],
                               cwd=repo, env={**os.environ, "BRAT_DEMO_DELAY": "60"},
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               start_new_session=True)
    try:
        card = page.locator(".column[data-state=running] .card", has_text=mean.title)
        card.locator(".liveness.alive").wait_for(timeout=60000)
        before = needs_count(page)
        # The witness dies (git and git-brat, its group); its agent, in a group of its own,
        # and its session's record, which still says running, stay.
        os.killpg(witness.pid, signal.SIGKILL)
        witness.wait(10)
        card.locator(".liveness.dead").wait_for(timeout=10000)   # no write happened: live all the same
        page.locator("#needs-count", has_text=str(before + 1)).wait_for()
        shots(page, "dead")
        # The sessions page and the task's page say so too.
        go(page, board, "/sessions")
        page.locator("#sessions tr", has_text="running").locator(".liveness.dead").wait_for()
        shots(page, "dead-sessions")
        card_id = [t for t in brat_json(repo, "task", "list", "--convoy", demo)][0]["id"]
        go(page, board, f"/task/{card_id}")
        page.locator("#sessions .liveness.dead").wait_for()
    finally:
        if witness.poll() is None:
            os.killpg(witness.pid, signal.SIGKILL)
            witness.wait(10)
        # Recovery (the next witness run) stops the orphaned agent and records the crash.
        work_once(repo, demo)
    sessions = brat_json(repo, "session", "list", "--all")
    assert sessions[0]["status"] == "crashed"
