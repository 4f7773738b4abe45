"""When a usage limit resets, read from an engine's words: epochs, delays, wall clocks in any
zone, across DST changes and past midnight (engines/resets.py)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest

from git_brat.brat.engines.resets import MAX_AHEAD, reset_at, wall

UTC = timezone.utc
LONDON = ZoneInfo("Europe/London")
NEW_YORK = ZoneInfo("America/New_York")
TOKYO = ZoneInfo("Asia/Tokyo")


def at(zone, *parts) -> datetime:
    return datetime(*parts, tzinfo=zone)


def test_an_epoch_in_seconds_or_milliseconds_is_the_reset():
    now = at(UTC, 2026, 9, 17, 12, 0)
    reset = int((now + timedelta(hours=2)).timestamp())
    assert reset_at(f"Claude AI usage limit reached|{reset}", now) == now + timedelta(hours=2)
    assert reset_at(f'{{"resetsAt": {reset * 1000}}}', now) == now + timedelta(hours=2)


@pytest.mark.parametrize("text, seconds", [
    ('{"error":{"type":"usage_limit_reached","resets_in_seconds":5400}}', 5400),
    ("Resource has been exhausted. Suggested retry after 2s.", 2),
    ("retry-after: 3600", 3600),
    ("You can try again in 20 minutes.", 1200),
])
def test_a_delay_counts_from_now(text, seconds):
    now = at(UTC, 2026, 9, 17, 12, 0)
    assert reset_at(text, now) == now + timedelta(seconds=seconds)


def test_a_time_in_a_named_zone_is_read_in_that_zone_whatever_the_machines():
    now = at(UTC, 2026, 7, 1, 10, 0)            # 11:00 in London (BST)
    found = reset_at("You've hit your usage limit · resets 3pm (Europe/London)", now, TOKYO)
    assert found == at(LONDON, 2026, 7, 1, 15, 0)


def test_a_time_without_a_zone_is_the_machines_own_clock():
    now = at(NEW_YORK, 2026, 1, 10, 20, 0)
    found = reset_at("You've hit your usage limit. ... or try again at 9:21 PM.", now, NEW_YORK)
    assert found == at(NEW_YORK, 2026, 1, 10, 21, 21)


def test_a_time_already_past_today_is_tomorrows_rollover_past_midnight():
    now = at(LONDON, 2026, 3, 3, 23, 50)
    found = reset_at("You've hit your session limit · resets 1am", now, LONDON)
    assert found == at(LONDON, 2026, 3, 4, 1, 0)
    later = reset_at("try again at 11:10 PM", now, LONDON)
    assert later == at(LONDON, 2026, 3, 4, 23, 10)


def test_a_reset_that_just_passed_means_now_not_tomorrow():
    now = at(LONDON, 2026, 3, 3, 21, 23)
    assert reset_at("try again at 9:21 PM", now, LONDON) == now


def test_a_date_with_a_year_and_an_ordinal_day():
    now = at(UTC, 2026, 9, 15, 8, 0)
    found = reset_at("try again at Sep 18th, 2026 12:04 AM.", now, LONDON)
    assert found == at(LONDON, 2026, 9, 18, 0, 4)


def test_a_date_without_a_year_in_december_is_next_januarys():
    now = at(UTC, 2026, 12, 30, 8, 0)
    found = reset_at("resets Jan 2 at 3pm (Europe/London)", now, TOKYO)
    assert found == at(LONDON, 2027, 1, 2, 15, 0)


def test_a_time_in_the_spring_forward_gap_is_moved_forward_by_the_gap():
    # 2026-03-08 02:00 -> 03:00 in New York: 02:30 never happens.
    found = wall(2026, 3, 8, 2, 30, NEW_YORK)
    assert found.astimezone(UTC) == datetime(2026, 3, 8, 7, 30, tzinfo=UTC)   # 03:30 EDT
    now = at(NEW_YORK, 2026, 3, 7, 23, 0)
    assert reset_at("resets 2:30am", now, NEW_YORK) == found


def test_the_repeated_hour_of_autumn_takes_its_later_reading():
    # 2026-11-01 02:00 EDT -> 01:00 EST: 01:30 happens twice; waiting longer is the safe side.
    found = wall(2026, 11, 1, 1, 30, NEW_YORK)
    assert found.astimezone(UTC) == datetime(2026, 11, 1, 6, 30, tzinfo=UTC)   # 01:30 EST


def test_rollover_into_a_dst_change_keeps_the_wall_clock():
    # The evening before London's clocks go back: "resets 9am" is 9am GMT the next day.
    now = at(LONDON, 2026, 10, 24, 22, 0)
    assert reset_at("resets 9am", now, LONDON) == at(LONDON, 2026, 10, 25, 9, 0)
    assert reset_at("resets 9am", now, LONDON).astimezone(UTC).hour == 9


@pytest.mark.parametrize("text", [
    "try again at Sep 18th, 2031 12:04 AM",            # absurdly far
    f"Claude AI usage limit reached|{int(datetime(2030, 1, 1).timestamp())}",
    "resets 3",                                        # no clock
    "try again at 25:00",                              # no such time
    "try again later",
    "Retrying in 0.2 seconds...",                      # aider's own backoff, not a reset
])
def test_what_is_not_a_believable_reset_is_none(text):
    now = at(UTC, 2026, 9, 17, 12, 0)
    assert reset_at(text, now, LONDON) is None


def test_a_reset_is_never_more_than_the_longest_limit_ahead():
    now = at(UTC, 2026, 9, 17, 12, 0)
    assert reset_at(f"retry after {int(MAX_AHEAD.total_seconds()) - 60}s", now) is not None
    assert reset_at(f"retry after {int(MAX_AHEAD.total_seconds()) + 60}s", now) is None


def test_an_unknown_zone_name_falls_back_to_the_machines():
    now = at(UTC, 2026, 7, 1, 10, 0)
    found = reset_at("resets 3pm (Mars/Olympus)", now, TOKYO)
    assert found == at(TOKYO, 2026, 7, 2, 15, 0)
