"""The demo loop watched and steered from the board, in a real browser, offline (scripted engine)."""

from __future__ import annotations

import os
import subprocess

import boardkit
from bratkit import demo_project
from helpers import brat, brat_json, git

QUESTION = "find the bugs"
EXPLAIN = "Explain the design in DESIGN.md"
ANSWER = "It is a tiny stats package: keep it that way"


def _project(path):
    demo_project(path, witness__engine="demo", mayor__engine="demo", witness__concurrency="3",
                 witness__backoff="0", refinery__on_conflict="block")
    git(path, "add", ".brat")
    git(path, "commit", "-qm", "git-brat configuration")
    return path


def _shot(page, artifacts, name):
    page.screenshot(path=os.path.join(artifacts, f"{name}.png"), full_page=True)


def _task_by_title(repo, title):
    return next(t for t in brat_json(repo, "task", "list") if t["title"] == title)


def test_watching_and_steering_the_demo_loop_from_the_board(tmp_path, browser, artifacts):
    from git_brat.brat import layout
    from git_brat.brat.demo import project as demo_project
    from git_brat.git.store import Store
    repo = _project(tmp_path / "textstats")
    mean, median, words = demo_project.FIXES
    board = boardkit.start(repo)
    ctx = browser.new_context(viewport={"width": 1400, "height": 900})
    witness = None
    try:
        page = ctx.new_page()
        page.set_default_timeout(15000)
        go = lambda path: page.goto(board.url.replace("/?", f"{path}?"))  # noqa: E731

        # The mayor: ask, see the plan, confirm.
        go("/mayor")
        page.fill("form.ask textarea[name=question]", QUESTION)
        page.click("form.ask button")
        page.locator("#plan", has_text="3 task(s)").wait_for()
        _shot(page, artifacts, "mayor-plan")
        page.click("#plan button.confirm")
        page.locator("#plan", has_text="created convoy").wait_for()

        # Tasks appear on the board; one added from the terminal appears without a reload.
        go("/")
        page.locator("#live.on").wait_for()
        page.evaluate("window.__same_page = true")
        for fix in (mean, median, words):
            page.locator(".column[data-state=queued] .card", has_text=fix.title).wait_for()
        convoy = brat_json(repo, "convoy", "list")[0]["id"]
        brat(repo, "task", "create", "--convoy", convoy, EXPLAIN)
        page.locator(".column[data-state=queued] .card", has_text=EXPLAIN).wait_for(timeout=3000)
        assert page.evaluate("window.__same_page") is True

        # A witness runs (slowly): the sessions' logs stream on the Sessions page.
        go("/sessions")
        witness = subprocess.Popen(["git", "brat", "witness", "run", "--once"], cwd=repo,
                                   env={**os.environ, "BRAT_DEMO_DELAY": "3"},
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        page.locator("pre.log", has_text="[demo engine] editing").first.wait_for()
        _shot(page, artifacts, "sessions-live")
        assert witness.wait(120) == 0
        witness = None
        page.locator("pre.log.ended").first.wait_for()

        # The running tasks moved on by themselves on the board.
        go("/")
        for fix in (mean, median):
            page.locator(".column[data-state=needs-review] .card", has_text=fix.title).wait_for()
        page.locator(".column[data-state=blocked] .card", has_text=EXPLAIN).wait_for()
        _shot(page, artifacts, "board")

        # Block the median fix from its page, then approve it: back to the merge queue.
        med = _task_by_title(repo, median.title)["id"]
        go(f"/task/{med}")
        page.fill("form.block input[name=message]", "let me read it first")
        page.click("form.block button")
        page.locator("#facts", has_text="blocked").wait_for()
        page.locator(".diff", has_text=median.new.splitlines()[0].strip()).first.wait_for()
        _shot(page, artifacts, "task")
        page.click("form.approve button")
        page.locator("#facts", has_text="needs-review").wait_for()

        # Someone changes the mean line on main meanwhile: its merge will conflict.
        stats = repo / mean.path
        stats.write_text(stats.read_text().replace(mean.old, "sum(values) // max(1, len(values))"))
        git(repo, "commit", "-qam", "mean: guard the division")
        # ... after the human approved the mean fix too (from the CLI this time).
        brat(repo, "task", "approve", _task_by_title(repo, mean.title)["id"])

        go("/queue")
        page.locator("#queue", has_text=median.title).wait_for()
        brat(repo, "refinery", "run", "--once")
        page.locator("#queue .st-merged").first.wait_for()       # live: the outcomes appear
        _shot(page, artifacts, "queue")
        assert brat_json(repo, "task", "show", med)["status"] == "merged"

        # The conflict is under Needs you, with its file; so is the agent's question.
        go("/needs-you")
        conflict = page.locator("#interventions tr", has_text=mean.title)
        conflict.wait_for()
        assert mean.path in conflict.inner_text()
        page.locator("#interventions tr", has_text=EXPLAIN).wait_for()
        _shot(page, artifacts, "needs-you")

        # A reply with a comment on a line of the diff: both go to the agent, re-queued.
        mean_id = _task_by_title(repo, mean.title)["id"]
        go(f"/task/{mean_id}")
        page.locator("tr.add button.note").first.click()
        page.fill("tr.note-draft input", "keep the guard from main")
        page.fill("form.reply textarea[name=message]", "rebase onto main")
        page.click("form.reply button")
        page.locator("#timeline", has_text="keep the guard from main").wait_for()
        body = brat_json(repo, "task", "show", mean_id)["comments"][-1]["body"]
        assert body.startswith("reply: rebase onto main\n\nNotes on the diff:\n- textstats/stats.py:")
        assert body.endswith(": keep the guard from main")

        # A reply typed in the browser re-queues the task; the next session gets it.
        explain = _task_by_title(repo, EXPLAIN)["id"]
        go(f"/task/{explain}")
        page.fill("form.reply textarea[name=message]", ANSWER)
        page.click("form.reply button")
        page.locator("#facts", has_text="queued").wait_for()
        page.locator("#timeline", has_text=ANSWER).wait_for()
        brat(repo, "witness", "run", "--once")
        sessions = brat_json(repo, "session", "list", "--task", explain)
        assert len(sessions) == 2
        prompt = layout.session_prompt(Store.discover(str(repo)), sessions[-1]["id"])
        with open(prompt, encoding="utf-8") as f:
            assert ANSWER in f.read()
        # The second session shows without a reload (a locator waits: the page's CSP
        # refuses the eval a polled function needs).
        page.locator("#sessions tbody tr").nth(1).wait_for()
        assert page.locator("#sessions tbody tr").count() == 2
    finally:
        if witness is not None:
            witness.kill()
            witness.wait(30)
        ctx.close()
        board.stop()
