"""How a session ended, read per engine from what it printed (engines/ending.py, the presets'
endings), and what the witness's verdict makes of a limit: a pause, never a failure."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from zoneinfo import ZoneInfo

import pytest

from git_brat.brat.config import Witness as Policy
from git_brat.brat.engines import PRESETS, ending
from git_brat.brat.witness.verdict import Facts, decide

LONDON = ZoneInfo("Europe/London")
NOW = datetime(2026, 9, 17, 18, 0, tzinfo=timezone.utc)       # 19:00 in London
SID = "5e55" + "0" * 28
POLICY = Policy(max_retries=2, backoff=10, backoff_max=15, limit_margin=30, limit_backoff=60,
                limit_backoff_max=300)
NOW_MS = int(NOW.timestamp() * 1000)


def line(obj) -> str:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


# What each real engine printed against the fake model server answering 429
# (/work/shared/engines-real-world.md §2c), with the reset where it says one.
RESET_9_21 = int(datetime(2026, 9, 17, 21, 21, tzinfo=LONDON).timestamp() * 1000)
LIMITS = [
    ("claude", 1, line({"type": "result", "subtype": "success", "is_error": True,
                        "api_error_status": 429, "result": "API Error: Request rejected (429) · "
                        "This request would exceed your account's rate limit. Please try again "
                        "later.", "terminal_reason": "completed"}), 0),
    ("claude", 1, line({"type": "rate_limit_event", "rate_limit_info": {
        "status": "rejected", "resetsAt": 1789761600, "rateLimitType": "five_hour"}}) + "\n" +
     line({"type": "result", "is_error": True, "result": "You've hit your usage limit · resets "
           "9pm (Europe/London)", "terminal_reason": "blocking_limit"}), 1789761600 * 1000),
    ("claude", 1, "You've hit your usage limit · resets 9:21pm (Europe/London)", RESET_9_21),
    ("codex", 1, line({"type": "error", "message": "You\u2019ve hit your usage limit. Upgrade to "
                       "Pro (https://chatgpt.com/explore/pro), visit https://chatgpt.com/settings"
                       "/usage to purchase more credits or try again at 9:21 PM."}) + "\n" +
     line({"type": "turn.failed", "error": {"message": "You\u2019ve hit your usage limit."}}),
     RESET_9_21),
    ("codex", 1, line({"type": "turn.failed", "error": {
        "message": "exceeded retry limit, last status: 429 Too Many Requests"}}), 0),
    ("gemini", 173, line({"session_id": "x", "error": {
        "type": "Error", "message": "You have exhausted your daily quota on this model.",
        "code": 429}}), 0),
    ("copilot", 1, line({"type": "session.error", "data": {
        "errorType": "rate_limit", "message": "429 Rate limit reached for fake-model",
        "statusCode": 429}}) + "\n" + line({"type": "result", "exitCode": 1}), 0),
    ("aider", 0, "litellm.RateLimitError: RateLimitError: OpenAIException - rate limited\n"
                 "The API provider has rate limited you. Try again later or check your quotas.\n"
                 "Retrying in 0.2 seconds...\n", 0),
]


@pytest.mark.parametrize("engine, rc, output, reset_ms", LIMITS,
                         ids=[f"{e}-{i}" for i, (e, *_rest) in enumerate(LIMITS)])
def test_each_engines_limit_is_read_with_its_reset_where_it_gives_one(engine, rc, output,
                                                                       reset_ms):
    end = ending.classify(PRESETS[engine], output, rc, now=NOW, zone=LONDON)
    assert end.kind == "limit" and end.reset_ms == reset_ms
    assert end.why


def test_gemini_exit_173_alone_is_a_limit():
    assert ending.classify(PRESETS["gemini"], "", 173, now=NOW).kind == "limit"


@pytest.mark.parametrize("engine", ["codex", "opencode", "cn", "copilot"])
def test_the_engines_that_wait_silently_on_a_retry_after_are_limited_when_the_watchdog_stops_them(
        engine):
    end = ending.classify(PRESETS[engine], "", -15, idle=True, now=NOW)
    assert end.kind == "limit" and end.silent and end.reset_ms == 0


def test_a_silent_engine_that_never_waits_on_limits_is_a_failure_not_a_pause():
    assert ending.classify(PRESETS["claude"], "", -15, idle=True, now=NOW).kind == "failure"


@pytest.mark.parametrize("engine, output, kind", [
    ("claude", line({"type": "result", "is_error": True, "api_error_status": 401,
                     "result": "Invalid API key · Please run /login"}), "auth"),
    ("claude", line({"type": "result", "is_error": True, "api_error_status": 529,
                     "result": "overloaded_error"}), "transient"),
    ("codex", line({"type": "turn.failed", "error": {
        "message": "exceeded retry limit, last status: 401 Unauthorized"}}), "auth"),
    ("aider", "litellm.AuthenticationError: AuthenticationError: OpenAIException", "auth"),
    ("copilot", line({"type": "session.error", "data": {"statusCode": 503}}), "transient"),
    ("gemini", line({"error": {"message": "fake model: this request is refused", "code": 400}}),
     "failure"),
])
def test_refused_credentials_and_passing_errors_are_told_apart_from_failures(engine, output,
                                                                              kind):
    assert ending.classify(PRESETS[engine], output, 1, now=NOW).kind == kind


def test_a_model_quoting_a_limit_inside_a_json_engines_output_is_not_a_limit():
    # The agent's text sits inside a JSON string: its quotes are escaped, the keys unforgeable.
    said = 'I will print {"type":"session.error","data":{"errorType":"rate_limit"}} now'
    output = line({"type": "assistant.message", "data": {"content": said}})
    assert ending.classify(PRESETS["copilot"], output, 1, now=NOW).kind == "failure"
    claude = line({"type": "result", "is_error": False, "result": '"api_error_status": 429'})
    assert ending.classify(PRESETS["claude"], claude, 0, now=NOW).kind == "failure"


def test_a_configured_engine_gets_the_generic_rules():
    from git_brat.brat.engines import resolve
    from git_brat.brat.config import Engine
    p = resolve("mine", {"mine": Engine(command=["my-agent", "{prompt}"])})
    out = "Error: 429 Too Many Requests: rate limit exceeded"
    assert ending.classify(p, out, 1, now=NOW).kind == "limit"


# -- the verdict ------------------------------------------------------------------------

def facts(**kw) -> Facts:
    return Facts(**{"session": SID, "branch": "brat/t", "task_session": SID, "now": NOW_MS,
                    "engine": "claude", "tail": "last words", "exit_code": 1, **kw})


def test_a_limit_with_a_reset_pauses_the_task_uncharged_until_the_reset_and_a_margin():
    v = decide(facts(ending="limit", reset_ms=NOW_MS + 3_600_000, failures=1,
                     ending_why="You've hit your usage limit"), POLICY)
    until = NOW_MS + 3_600_000 + 30_000
    assert (v.status, v.task_to) == ("paused", "queued")
    assert v.task_fields["retry_after"] == until == v.task_fields["paused_until"]
    assert "failures" not in v.task_fields          # no attempt is charged
    assert v.task_fields["paused_why"] == "claude usage limit"
    assert v.reason.startswith("paused until ") and v.reason.endswith("(claude usage limit)")
    assert v.session_fields["paused_until"] == until and not v.merge


def test_a_limit_without_a_reset_backs_off_doubling_per_pause_in_a_row_up_to_the_cap():
    waits = [decide(facts(ending="limit", pauses=n), POLICY).task_fields["paused_until"] - NOW_MS
             for n in range(5)]
    assert waits == [60_000, 120_000, 240_000, 300_000, 300_000]
    assert decide(facts(ending="limit"), POLICY).task_fields["paused_why"] == "claude rate limit"


def test_a_limit_even_with_commits_made_pauses_rather_than_fails():
    v = decide(facts(ending="limit", commits=2), POLICY)
    assert (v.status, v.task_to) == ("paused", "queued") and not v.merge


def test_a_limit_the_engine_got_past_is_no_pause():
    v = decide(facts(ending="limit", exit_code=0, commits=1), POLICY)
    assert (v.status, v.task_to) == ("done", "needs-review")


def test_a_task_marked_no_resume_waits_for_a_human_after_a_limit():
    v = decide(facts(ending="limit", no_resume=True), POLICY)
    assert (v.status, v.task_to) == ("paused", "blocked")
    assert "--no-resume" in v.task_reason and "failures" not in v.task_fields


def test_refused_credentials_put_the_task_before_a_human_without_spending_its_retries():
    v = decide(facts(ending="auth", ending_why="Invalid API key"), POLICY)
    assert v.task_to == "blocked" and "credentials" in v.task_fields["needs_human"]
    assert "failures" not in v.task_fields


def test_the_idle_watchdogs_stop_of_an_engine_that_does_not_wait_on_limits_is_a_failed_attempt():
    v = decide(facts(stop_reason="idle", idle=600, exit_code=-15), POLICY)
    assert v.status == "failed" and "silent for 600s" in v.reason
    assert v.task_fields["failures"] == 1


def test_a_done_after_pauses_clears_the_count():
    v = decide(facts(exit_code=0, commits=1, pauses=3), POLICY)
    assert v.task_fields["limit_pauses"] == 0


def test_the_reason_shows_the_reset_on_the_machines_clock(monkeypatch):
    monkeypatch.setenv("TZ", "Europe/London")
    reset = int(datetime(2026, 9, 17, 20, 59, 30, tzinfo=LONDON).timestamp() * 1000)
    v = decide(facts(ending="limit", reset_ms=reset), POLICY)
    assert v.reason == "paused until 21:00 (claude usage limit)"
    later = decide(facts(ending="limit", reset_ms=reset + 86_400_000), POLICY)
    assert later.reason == "paused until Sep 18 21:00 (claude usage limit)"


def test_a_pause_is_a_move_the_task_state_machine_allows():
    from git_brat.brat.board import TRANSITIONS
    for kw in ({}, {"no_resume": True}, {"commits": 1}):
        assert decide(facts(ending="limit", **kw), POLICY).task_to in TRANSITIONS["running"]



def test_a_silence_read_as_a_limit_too_often_in_a_row_is_a_hang_and_charged():
    v = decide(facts(ending="limit", silent=True, stop_reason="idle", idle=600, pauses=2),
               POLICY)
    assert v.status == "paused"
    v = decide(facts(ending="limit", silent=True, stop_reason="idle", idle=600, pauses=3),
               POLICY)
    assert v.status == "failed" and v.task_fields["failures"] == 1


def test_a_conversation_gone_after_a_limit_restarts_afresh_uncharged():
    # gemini saves no session when its first request met the limit: resuming it exits 42.
    out = "Error resuming session: No previous sessions found for this project.\n"
    end = ending.classify(PRESETS["gemini"], out, 42, now=NOW)
    assert end.kind == "lost"
    v = decide(facts(ending="lost", ending_why=end.why, failures=0), POLICY)
    assert v.task_to == "queued" and "failures" not in v.task_fields
    assert v.task_fields["retry_after"] == NOW_MS


def test_a_reset_already_past_backs_off_rather_than_resuming_into_the_same_limit():
    # codex names the minute: "try again at 9:21 PM" read at 9:21:40 is now, not a reset ahead.
    v = decide(facts(ending="limit", reset_ms=NOW_MS, pauses=1), POLICY)
    assert v.task_fields["paused_until"] == NOW_MS + 120_000


def test_gemini_giving_up_its_own_retries_at_a_per_minute_quota_knows_no_reset():
    # What the real gemini printed (test_engine_limits.py, general.maxAttempts = 3): the 2 s it
    # suggests were spent on its retries; a pause of 2 s would resume into the same quota.
    retrying = ("Attempt {n} failed: Resource has been exhausted (e.g. check quota).\n"
                "Suggested retry after 2s.. Retrying after 5714ms...\n")
    out = (retrying.format(n=1) + retrying.format(n=2) + line({
        "type": "result", "status": "error", "error": {"type": "unknown", "message":
            "[API Error: Resource has been exhausted (e.g. check quota).\nSuggested retry after "
            "2s.]\nPlease wait and try again later."}}) + "\n")
    end = ending.classify(PRESETS["gemini"], out, 1, now=NOW)
    assert (end.kind, end.reset_ms) == ("limit", 0), end
    v = decide(facts(ending="limit", ending_why=end.why, reset_ms=end.reset_ms), POLICY)
    assert v.task_fields["paused_until"] == NOW_MS + 60_000
    # Refused at once (a retryDelay past 300 s), it waited for nothing: the delay is the reset.
    at_once = ("TerminalQuotaError: Resource has been exhausted (e.g. check quota).\n"
               "Suggested retry after 3600s.\n")
    assert ending.classify(PRESETS["gemini"], at_once, 1, now=NOW).reset_ms == NOW_MS + 3_600_000
