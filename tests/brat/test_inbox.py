"""Needs you, delivered: one inbox of what waits for the human, sent to a command and to a
webhook by the deacons of every clone, each item exactly once."""

from __future__ import annotations

import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from bratkit import convoy, move, task
from helpers import brat, brat_json, git, grite
from refinerykit import two_clones

RECORD = """import sys
data = sys.stdin.read()
with open(sys.argv[1], "a") as f:
    f.write(data.replace("\\n", " ") + "\\n")
"""


class Receiver:
    """A webhook on 127.0.0.1 that keeps every body it is sent."""

    def __init__(self):
        got = self.got = []

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                got.append((self.path, self.rfile.read(int(self.headers["Content-Length"]))))
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(5)


def _sinks(clone: Path, url: str, out: Path, script: Path) -> None:
    git(clone, "config", "brat.inbox.webhook", f"{url}/hook")
    git(clone, "config", "brat.inbox.ntfy", f"{url}/brat-topic")
    git(clone, "config", "brat.inbox.command", f"{sys.executable} {script} {out}")
    brat(clone, "config", "set", "--local", "inbox.debounce", "0")


def _needs_you(clone: Path, name: str) -> list[str]:
    """A question, a failure and a finished task waiting for review, raised on this clone."""
    c = convoy(clone, f"{name} work")
    asked, broke, finished = (task(clone, c, f"{name} {w}") for w in ("asks", "fails", "ends"))
    brat(clone, "task", "update", asked, "--status", "blocked", "-m", "which <!channel> db?")
    move(clone, broke, "running", "failed")
    move(clone, finished, "running", "needs-review")
    git(clone, "branch", f"brat/{finished}", "main")   # its work, here only (not pushed)
    return [asked, broke, finished]


def test_the_inbox_lists_questions_failures_and_reviews_with_what_answers_each(brepo):
    asked, broke, finished = _needs_you(brepo, "solo")
    items = brat_json(brepo, "inbox")
    assert {(i["kind"], i["task"]) for i in items} == {
        ("question", asked), ("failure", broke), ("review", finished)}
    [q] = [i for i in items if i["kind"] == "question"]
    assert q["text"] == "which <!channel> db?"
    assert q["command"].startswith(f"git brat task reply {asked[:7]}")
    assert items[0]["kind"] == "review"                  # what lands once you decide, first
    text = brat(brepo, "inbox").out
    assert text.startswith("3 item(s) wait for you") and "which <!channel> db?" in text
    brat(brepo, "task", "reply", asked, "-m", "postgres")
    assert asked not in [i["task"] for i in brat_json(brepo, "inbox")]


@pytest.mark.slow
def test_two_clones_deacons_send_each_needs_you_item_exactly_once_to_each_sink(tmp_path):
    hub, a, b = two_clones(tmp_path)
    script = tmp_path / "record.py"
    script.write_text(RECORD)
    out = tmp_path / "events.jsonl"
    with Receiver() as rx:
        for clone in (a, b):
            _sinks(clone, rx.url, out, script)
        raised = _needs_you(a, "a")
        for _ in range(2):   # each pass: sync, then deliver what is due
            brat(a, "deacon", "run", "--once")
            brat(b, "deacon", "run", "--once")
        raised += _needs_you(b, "b")
        threads = [threading.Thread(target=brat, args=(c, "deacon", "run", "--once"))
                   for c in (a, b, a, b)]
        for t in threads:   # both at once: each claim is decided on the hub
            t.start()
        for t in threads:
            t.join(120)
        for clone in (b, a, b):
            brat(clone, "deacon", "run", "--once")
        hooks = [json.loads(body)["text"] for path, body in rx.got if path == "/hook"]
        ntfy = [body.decode() for path, body in rx.got if path == "/brat-topic"]
    events = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(events) == len(raised) == 6
    assert sorted(e["task"] for e in events) == sorted(raised)
    assert len({e["key"] for e in events}) == 6
    for sent in (hooks, ntfy):
        assert len(sent) == 6 and all(sum(t[:7] in h for h in sent) == 1 for t in raised)
    assert sum("&lt;!channel&gt;" in h for h in hooks) == 2      # Slack: nobody is mentioned
    assert not any("<!channel>" in h for h in hooks)
    keys = [sorted(i["key"] for i in brat_json(c, "inbox")) for c in (a, b)]
    assert keys[0] == keys[1] == sorted(e["key"] for e in events)   # one item on every clone


def test_a_committed_sink_runs_nothing_until_its_settings_are_approved(brepo, tmp_path):
    out = tmp_path / "ran.txt"
    script = tmp_path / "touch.py"
    script.write_text(f"open({str(out)!r}, 'a').write('ran\\n')\n")
    brat(brepo, "config", "set", "--local", "inbox.debounce", "0")
    brat(brepo, "config", "set", "inbox.command", json.dumps([sys.executable, str(script)]))
    brat(brepo, "trust", "--revoke")   # as a pull brings it: a pusher's, not yours
    git(brepo, "add", ".brat")
    git(brepo, "commit", "-qm", "a pusher's sink")
    c = convoy(brepo)
    brat(brepo, "task", "update", task(brepo, c), "--status", "blocked", "-m", "help")
    report = brat_json(brepo, "deacon", "run", "--once")
    assert report["duties"]["inbox"].startswith("skipped: no sink") and not out.exists()
    brat(brepo, "trust")
    report = brat_json(brepo, "deacon", "run", "--once")
    assert [a["action"] for a in report["actions"] if a["duty"] == "inbox"] == ["sent"]
    assert out.read_text() == "ran\n"
    # Its claim is a lease on the lock remote's refs; no token of it goes into the event log
    # that every clone syncs (recorded for each item sent, it would only grow the log).
    assert "inbox:" not in grite(brepo, "log", "--json").out


@pytest.mark.slow
def test_a_sink_that_hangs_is_stopped_at_the_timeout_and_the_pass_goes_on(brepo, tmp_path):
    script = tmp_path / "hang.py"
    script.write_text("import time\ntime.sleep(60)\n")
    git(brepo, "config", "brat.inbox.command", f"{sys.executable} {script}")
    brat(brepo, "config", "set", "--local", "inbox.debounce", "0")
    brat(brepo, "config", "set", "--local", "inbox.timeout", "1")
    c = convoy(brepo)
    brat(brepo, "task", "update", task(brepo, c), "--status", "blocked", "-m", "help")
    import time
    start = time.monotonic()
    report = brat_json(brepo, "deacon", "run", "--once")
    assert time.monotonic() - start < 15
    [sent] = [a for a in report["actions"] if a["duty"] == "inbox"]
    assert "timed out after 1 s" in sent["detail"]
    assert report["duties"]["leases"].startswith("ok")


def test_an_item_younger_than_the_debounce_waits_and_a_bad_sink_url_is_refused(brepo, tmp_path):
    git(brepo, "config", "brat.inbox.webhook", "http://127.0.0.1:9/never")
    c = convoy(brepo)
    brat(brepo, "task", "update", task(brepo, c), "--status", "blocked", "-m", "help")
    report = brat_json(brepo, "deacon", "run", "--once")     # debounce: 30 s by default
    assert [a for a in report["actions"] if a["duty"] == "inbox"] == []
    git(brepo, "config", "brat.inbox.webhook", "--upload-pack=touch /tmp/x")
    report = brat_json(brepo, "deacon", "run", "--once")
    assert "an http:// or https:// URL" in report["duties"]["inbox"]
    git(brepo, "config", "--unset", "brat.inbox.webhook")
    git(brepo, "config", "brat.inbox.command", "notify 'unclosed")
    report = brat_json(brepo, "deacon", "run", "--once")
    assert report["duties"]["inbox"].startswith("failed: git config brat.inbox.command")
    assert report["duties"]["leases"] == "ok"          # the other duties ran


def test_the_inbox_is_the_same_from_a_subdirectory_and_a_linked_worktree(brepo, tmp_path):
    (brepo / "sub").mkdir()
    before = git(brepo, "status", "--porcelain")
    assert brat_json(brepo / "sub", "inbox") == []
    assert brat(brepo / "sub", "inbox").out.strip() == "nothing waits for you"
    c = convoy(brepo)
    brat(brepo, "task", "update", task(brepo, c), "--status", "blocked", "-m", "help")
    git(brepo, "worktree", "add", "-q", str(tmp_path / "wt"), "-b", "side")
    here = brat_json(brepo / "sub", "inbox")
    assert len(here) == 1 and brat_json(tmp_path / "wt", "inbox") == here
    assert git(brepo, "status", "--porcelain") == before
