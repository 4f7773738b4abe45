"""When a usage limit resets, read from whatever an engine printed: an epoch, a delay, or a
wall-clock time ("resets 3pm (Europe/London)", "try again at 9:21 PM", "try again at Sep 18th,
2026 12:04 AM").

Pure: the caller gives the time now and the zone the engine wrote its clock in (the engine's
own machine, so this one's unless the text names one). Wall-clock text is the trap: a time
without a date is the next such time (tomorrow once today's has passed, a few minutes' grace
aside: the reset that just passed), a time in a DST gap moves forward by the gap, an ambiguous
one (the hour that repeats) takes its later reading (waiting a little longer is cheaper than
waking into the same limit), and a reset further off than MAX_AHEAD is not believed.
"""

from __future__ import annotations

import os
import re
from datetime import datetime, timedelta, timezone, tzinfo
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

MAX_AHEAD = timedelta(days=8)      # a weekly limit is the longest any engine reports
JUST_PASSED = timedelta(minutes=5)  # "try again at 9:21 PM" read at 9:23 PM: it has reset

MONTHS = {m: n for n, m in enumerate(
    ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"), 1)}

# An epoch in seconds or ms, where the engine's JSON or text gives one.
_EPOCH = re.compile(r'(?:"resetsAt"|"resets_at"|"reset_at"|usage limit reached)\W{1,4}'
                    r'(\d{9,13})\b', re.I)
# A delay: resets_in_seconds, "retry after 2s", "retry-after: 3600", "try again in 20 minutes".
_DELAY = re.compile(r'(?:"resets_in_seconds"\W{1,4}|retry[- ]after[:\s]+|try again in\s+)'
                    r'(\d+(?:\.\d+)?)\s*(ms|s|sec|secs|seconds?|m|mins?|minutes?|h|hours?)?\b',
                    re.I)
_MONTH = r"(?P<mon>jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.?\s+" \
         r"(?P<day>\d{1,2})(?:st|nd|rd|th)?,?(?:\s+(?P<year>\d{4}))?,?\s+(?:at\s+)?"
_CLOCK = r"(?P<hour>\d{1,2})(?::(?P<min>\d{2}))?\s*(?P<ampm>[ap]\.?m\.?)?"
# A wall-clock time after the words that announce one, with a date and a zone where given.
_WALL = re.compile(r"(?:resets?(?:\s+at)?|try again (?:at|after)|available (?:again )?at)\s+"
                   r"(?:" + _MONTH + r")?" + _CLOCK +
                   r"(?:\s*\((?P<zone>[A-Za-z_]+(?:/[A-Za-z0-9_+-]+){0,2})\))?", re.I)

_UNITS = {"ms": 0.001, "s": 1, "sec": 1, "secs": 1, "m": 60, "min": 60, "mins": 60, "h": 3600}


def local_zone() -> tzinfo:
    """This machine's zone as rules (DST included), not today's fixed offset."""
    name = os.environ.get("TZ", "").lstrip(":")
    if not name:
        try:
            link = os.readlink("/etc/localtime")
            name = link.split("zoneinfo/", 1)[1] if "zoneinfo/" in link else ""
        except OSError:
            name = ""
    if name:
        try:
            return ZoneInfo(name)
        except (ZoneInfoNotFoundError, ValueError):
            pass
    return datetime.now().astimezone().tzinfo or timezone.utc


def reset_at(text: str, now: datetime, zone: tzinfo | None = None) -> datetime | None:
    """When the limit the text speaks of resets (aware, UTC), or None when it does not say
    (or says something not to be believed)."""
    found = _epoch(text) or _delay(text, now) or _wall(text, now, zone or local_zone())
    if found is None or found > now + MAX_AHEAD:
        return None
    return max(found, now).astimezone(timezone.utc)


def _epoch(text: str) -> datetime | None:
    m = _EPOCH.search(text)
    if not m:
        return None
    value = int(m.group(1))
    return datetime.fromtimestamp(value / 1000 if value > 10**11 else value, timezone.utc)


def _delay(text: str, now: datetime) -> datetime | None:
    m = _DELAY.search(text)
    if not m:
        return None
    unit = (m.group(2) or "s").lower()
    scale = _UNITS.get(unit) or _UNITS.get(unit[0], 1)
    return now + timedelta(seconds=float(m.group(1)) * scale)


def _wall(text: str, now: datetime, zone: tzinfo) -> datetime | None:
    for m in _WALL.finditer(text):
        if m.group("min") is None and m.group("ampm") is None:
            continue   # a bare number ("resets 3") is no time
        try:
            return _resolve(m, now, _zone(m.group("zone"), zone))
        except ValueError:   # 25:00, Feb 30th
            continue
    return None


def _zone(name: str | None, default: tzinfo) -> tzinfo:
    if not name:
        return default
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return default


def _resolve(m: re.Match, now: datetime, zone: tzinfo) -> datetime:
    hour, minute = int(m.group("hour")), int(m.group("min") or 0)
    ampm = (m.group("ampm") or "").lower().replace(".", "")
    if ampm:
        if not 1 <= hour <= 12:
            raise ValueError("not a 12-hour clock")
        hour = hour % 12 + (12 if ampm == "pm" else 0)
    here = now.astimezone(zone)
    if m.group("mon"):
        year = int(m.group("year") or here.year)
        day = wall(year, MONTHS[m.group("mon")[:3].lower()], int(m.group("day")), hour, minute,
                   zone)
        if not m.group("year") and day < now - timedelta(days=1):
            day = wall(year + 1, day.month, day.day, hour, minute, zone)   # "Jan 2" in December
        return day
    day = wall(here.year, here.month, here.day, hour, minute, zone)
    if day < now - JUST_PASSED:
        tomorrow = here.date() + timedelta(days=1)
        day = wall(tomorrow.year, tomorrow.month, tomorrow.day, hour, minute, zone)
    return day


def wall(year: int, month: int, day: int, hour: int, minute: int, zone: tzinfo) -> datetime:
    """A wall-clock time in `zone` as an instant: in a DST gap, moved forward by the gap; in
    the repeated hour, its later reading."""
    naive = datetime(year, month, day, hour, minute)
    late = naive.replace(tzinfo=zone, fold=1)
    back = late.astimezone(timezone.utc).astimezone(zone).replace(tzinfo=None)
    if back != naive:   # no such time here: the gap's far side, as the clock jumps
        return naive.replace(tzinfo=zone, fold=0).astimezone(timezone.utc).astimezone(zone)
    return late


def clock(at_ms: int, now_ms: int, zone: tzinfo | None = None) -> str:
    """A time as this machine's clock shows it: 21:00 today, Sep 18 00:04 on another day."""
    zone = zone or local_zone()
    at, now = (datetime.fromtimestamp(t / 1000, zone) for t in (at_ms, now_ms))
    return at.strftime("%H:%M" if at.date() == now.date() else "%b %d %H:%M")


__all__ = ["reset_at", "local_zone", "wall", "clock", "MAX_AHEAD"]
