"""Tokens and cost of one engine run, read from what the engine reported (its preset's Meter).

Counts are whole tokens; money is whole micro-dollars (exact sums, and the log's integers).
A cost is None where it is unknown: no engine figure and no price, or a figure of 0 next to
tokens (an engine that prices an unknown model at nothing): never shown as $0.
"""

from __future__ import annotations

import functools
import glob
import os
import re
from typing import Any, Iterable, Mapping

import msgspec

from git_brat.brat.engines.presets import Meter, Preset

COUNTS = ("input", "output", "cache_read", "cache_write", "reasoning")
MICROS = 1_000_000
MAX_FILE = 16 << 20        # a side channel read at most (its tail)
MAX_COUNT = 1 << 50        # a count or cost kept (the log's numbers stay exact under 2^53)


class Usage(msgspec.Struct, kw_only=True):
    """What one run (or a sum of runs) spent. input counts every prompt token, cache hits and
    writes included; cache_read and cache_write say how many of them were cached."""
    input: int = 0
    output: int = 0
    cache_read: int = 0
    cache_write: int = 0
    reasoning: int = 0
    cost_micros: int | None = None     # None: unknown
    cost_source: str = ""              # engine | prices | "" (unknown)
    model: str = ""                    # the model it used (the first named), "" unknown
    reported: bool = False             # the engine reported anything at all

    @property
    def tokens(self) -> int:
        return self.input + self.output

    def plus(self, other: "Usage") -> "Usage":
        """The sum; its cost unknown when either part's is (with tokens spent)."""
        parts = (self, other)
        cost = None
        if not any(p.cost_micros is None and p.tokens for p in parts) and \
                any(p.cost_micros is not None for p in parts):
            cost = sum(p.cost_micros or 0 for p in parts)
        sources = {p.cost_source for p in parts if p.cost_source}
        source = "" if cost is None else (sources.pop() if len(sources) == 1 else "mixed")
        return Usage(**{k: getattr(self, k) + getattr(other, k) for k in COUNTS},
                     cost_micros=cost, cost_source=source,
                     model=self.model or other.model,
                     reported=self.reported or other.reported)

    def minus(self, earlier: "Usage") -> "Usage":
        """What was spent since `earlier` (a cumulative engine's totals); a total that went
        down is a conversation that started over: then all of it is new."""
        if any(getattr(self, k) < getattr(earlier, k) for k in COUNTS):
            return self
        cost = self.cost_micros
        if cost is not None and earlier.cost_micros is not None:
            cost = max(cost - earlier.cost_micros, 0)
        return msgspec.structs.replace(
            self, cost_micros=cost, **{k: getattr(self, k) - getattr(earlier, k) for k in COUNTS})


# -- reading an engine's output --------------------------------------------------------------

def _values(obj: Any, parts: list[str]) -> Iterable[Any]:
    if not parts:
        yield obj
        return
    head, rest = parts[0], parts[1:]
    if not isinstance(obj, dict):
        return
    if head == "*":
        for value in obj.values():
            yield from _values(value, rest)
    elif head in obj:
        yield from _values(obj[head], rest)


@functools.lru_cache(maxsize=256)
def _split(keys: tuple[str, ...]) -> tuple[tuple[str, ...], ...]:
    return tuple(tuple(k.split(".")) for k in keys)


def _at(obj: Any, parts: tuple[str, ...]) -> Iterable[Any]:
    """The values at a split key: a plain path walked in a loop (the common case), one with a
    "*" step through every entry of its map."""
    if "*" in parts:
        return _values(obj, list(parts))
    for part in parts:
        if type(obj) is not dict or part not in obj:
            return ()
        obj = obj[part]
    return (obj,)


def _number(obj: dict, keys: list[str]) -> float | None:
    """The sum of the numbers at `keys` (None: none found). A bool is not a number."""
    total, found = 0.0, False
    for parts in _split(tuple(keys)):
        for v in _at(obj, parts):
            if type(v) in (int, float) and v == v and 0 <= v < 1e15:
                total, found = total + v, True
    return total if found else None


def _matches(obj: dict, when: Mapping[str, Any]) -> bool:
    for key, want in when.items():
        got = next(iter(_at(obj, _split((key,))[0])), None)
        if got != want:
            return False
    return True


class _Tally:
    def __init__(self):
        self.counts = dict.fromkeys(COUNTS, 0.0)
        self.cost: float | None = None
        self.model = ""
        self.reports = 0

    def add(self, counts: dict[str, float | None], cost: float | None, model: str) -> None:
        for k, v in counts.items():
            if v is not None:
                self.counts[k] += v
        if cost is not None:
            self.cost = (self.cost or 0.0) + cost
        self.model = self.model or model
        self.reports += 1

    def usage(self) -> Usage:
        counts = {k: min(int(round(v)), MAX_COUNT) for k, v in self.counts.items()}
        tokens = counts["input"] + counts["output"]
        cost = self.cost
        if cost is not None and cost <= 0 and tokens:
            cost = None    # an unknown model priced at nothing
        return Usage(**counts, model=self.model, reported=self.reports > 0,
                     cost_micros=None if cost is None else min(int(round(cost * MICROS)),
                                                               MAX_COUNT),
                     cost_source="" if cost is None else "engine")


def _from_objects(m: Meter, objs: Iterable[dict]) -> Usage:
    tally = last = None
    fields = [(k, getattr(m, k)) for k in COUNTS if getattr(m, k)]
    for obj in objs:
        if not _matches(obj, m.when):
            continue
        counts = {k: _number(obj, keys) for k, keys in fields}
        if all(v is None for v in counts.values()):
            continue
        model = ""
        if m.models:
            found = next(iter(_values(obj, m.models.split("."))), None)
            if isinstance(found, dict):
                model = next((k for k in found if isinstance(k, str)), "")
        if tally is None or not m.each:
            tally = _Tally()
        tally.add(counts, _number(obj, m.cost) if m.cost else None, model)
        last = tally
    return last.usage() if last is not None else Usage()


def _literal_lead(pattern: str) -> str:
    """The fixed text a "^..." pattern starts with ("" when it has none)."""
    if not pattern.startswith("^"):
        return ""
    lead = re.match(r"[A-Za-z0-9 :,]*", pattern[1:]).group(0)
    return lead


def _reports(m: Meter, output: str) -> list[dict]:
    """The JSON objects of an output that may be reports: lines naming every `when` value are
    decoded, the rest (tool output, most of a long session) skipped unread."""
    from git_brat.brat.engines.invoke import json_objects
    marks = [msgspec.json.encode(v).decode() for v in m.when.values()
             if isinstance(v, (str, int)) and not isinstance(v, bool)]
    if not marks or output.lstrip().startswith("{\n"):
        return json_objects(output)
    out = []
    for line in output.splitlines():
        if all(mark in line for mark in marks):
            out.extend(json_objects(line))
    return out


def _tokens(text: str | None) -> float | None:
    if not text:
        return None
    value = float(text[:-1]) * 1000 if text.endswith("k") else float(text)
    return value if 0 <= value < 1e15 else None


def _from_lines(m: Meter, output: str) -> Usage:
    tally = None
    rx = re.compile(m.line)
    lead = _literal_lead(m.line)
    for text in output.splitlines():
        if lead and not text.startswith(lead):
            continue       # the line's fixed start, checked before the regex (long outputs)
        match = rx.match(text)
        if match is None:
            continue
        groups = match.groupdict()
        try:
            counts = {k: _tokens(groups.get(k)) for k in COUNTS}
            cost = float(groups["cost"]) if groups.get("cost") else None
            cost = cost if cost is None or 0 <= cost < 1e9 else None
        except ValueError:
            continue
        if tally is None or not m.each:
            tally = _Tally()
        tally.add(counts, cost, "")
    return tally.usage() if tally is not None else Usage()


def _side_file(m: Meter, env: Mapping[str, str], workdir: str, engine_session: str,
               since: float) -> tuple[str, str]:
    """(path, text) of the engine's side channel for this run, ("", "") if none is found."""
    from git_brat.brat.engines.sandbox import expand
    if "{engine_session}" in m.file and not re.fullmatch(r"[A-Za-z0-9_.-]{1,128}",
                                                          engine_session or ""):
        return "", ""     # an id from the log lands in a path: only a plain name
    pattern = expand(m.file.replace("{engine_session}", engine_session or ""), env)
    if pattern is None:
        return "", ""
    paths = glob.glob(pattern) if "*" in pattern else [pattern]
    found = []
    for path in paths:
        try:
            st = os.stat(path)
        except OSError:
            continue
        if "*" in pattern and st.st_mtime < since:
            continue     # written before this run: another run's
        found.append((st.st_mtime, path))
    for _mtime, path in sorted(found, reverse=True):
        text = _read(path)
        if not m.file_when:
            return path, text
        try:
            doc = msgspec.json.decode(text)
        except msgspec.DecodeError:
            continue
        if isinstance(doc, dict) and all(doc.get(k) == v.replace("{workdir}", workdir)
                                         for k, v in m.file_when.items()):
            return path, text
    return "", ""


def _read(path: str) -> str:
    """A side file's text (its last MAX_FILE bytes). The agent may write the engine's state
    directory: a symlink, a FIFO or a device there is never followed, waited on or read."""
    import stat
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return ""
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return ""
        os.lseek(fd, max(0, st.st_size - MAX_FILE), os.SEEK_SET)
        with os.fdopen(fd, "rb") as f:
            fd = -1
            return f.read(MAX_FILE).decode("utf-8", "replace")
    except OSError:
        return ""
    finally:
        if fd >= 0:
            os.close(fd)


def measure(p: Preset, output: str, *, env: Mapping[str, str] | None = None,
            workdir: str = "", engine_session: str = "", since: float = 0.0) -> Usage:
    """What a run of engine p reported spending: from its output, or from its side channel
    (env: the engine's environment, where its state lives; since: when the run started)."""
    m = p.usage
    if m is None:
        return Usage()
    if m.file:
        _path, output = _side_file(m, env or os.environ, workdir, engine_session, since)
        if not output:
            return Usage()
    if m.line:
        return _from_lines(m, output)
    return _from_objects(m, _reports(m, output))


# -- prices ----------------------------------------------------------------------------------

def price(u: Usage, prices: Mapping[str, list[float]], *names: str) -> Usage:
    """u with its cost from the price table (USD per million tokens: input, output, then
    optionally cache read and cache write, each the input price when left out) when an entry
    names its model or one of `names` (the configured model, the engine); else as it was."""
    entry = next((prices[n] for n in (u.model, *names) if n and n in prices), None)
    if entry is None or not u.reported:
        return u
    p_in, p_out = entry[0], entry[1]
    p_read = entry[2] if len(entry) > 2 else p_in
    p_write = entry[3] if len(entry) > 3 else p_in
    fresh = max(u.input - u.cache_read - u.cache_write, 0)
    dollars = (fresh * p_in + u.output * p_out + u.cache_read * p_read
               + u.cache_write * p_write) / 1_000_000
    return msgspec.structs.replace(u, cost_micros=min(int(round(dollars * MICROS)), MAX_COUNT),
                                   cost_source="prices")


# -- budgets -----------------------------------------------------------------------------------

class Budget(msgspec.Struct, frozen=True):
    """A limit: tokens, or micro-dollars."""
    amount: int
    unit: str                    # tokens | usd

    def show(self) -> str:
        return tokens_text(self.amount) + " tokens" if self.unit == "tokens" else \
            money(self.amount)

    def spent(self, u: Usage) -> int | None:
        """What counts against it (None: unknown, a cost no one knows)."""
        return u.tokens if self.unit == "tokens" else u.cost_micros

    def reached(self, u: Usage) -> bool:
        spent = self.spent(u)
        return spent is not None and spent >= self.amount


_BUDGET = re.compile(r"\s*(?:\$\s*(?P<usd>\d+(?:\.\d+)?)|(?P<n>\d+(?:\.\d+)?)\s*(?P<mult>[kKmM]?)"
                     r"\s*(?:tokens?)?)\s*")


def parse_budget(text: str) -> Budget | None:
    """"200k tokens", "1.5M tokens", "50000", "$2.00"; "" is no budget. ValueError if bad."""
    if not text.strip():
        return None
    m = _BUDGET.fullmatch(text)
    if m is None or (m["n"] and not m["mult"] and "token" not in text and "." in m["n"]):
        raise ValueError(f"{text!r} is not a budget: give tokens (\"200k tokens\", \"1.5M "
                         f"tokens\") or dollars (\"$2.00\")")
    if m["usd"]:
        return Budget(int(round(float(m["usd"]) * MICROS)), "usd")
    mult = {"": 1, "k": 1_000, "m": 1_000_000}[m["mult"].lower()]
    return Budget(int(round(float(m["n"]) * mult)), "tokens")


def spending_problem(budget_task: str, budget_convoy: str,
                     prices: Mapping[str, list[float]]) -> str | None:
    """What is wrong with the witness's budget and price keys, or None."""
    for key, value in (("budget_task", budget_task), ("budget_convoy", budget_convoy)):
        try:
            parse_budget(value)
        except ValueError as exc:
            return f"witness.{key}: {exc}"
    for name, entry in prices.items():
        if not 2 <= len(entry) <= 4:
            return (f"witness.prices.{name} = {list(entry)} is not allowed: expected [input, "
                    f"output] or [input, output, cache read, cache write], USD per million "
                    f"tokens")
    return None


# -- words -------------------------------------------------------------------------------------

def tokens_text(n: int) -> str:
    if n >= 1_000_000:
        return f"{n / 1_000_000:.1f}M".replace(".0M", "M")
    if n >= 10_000:
        return f"{n / 1000:.0f}k"
    if n >= 1000:
        return f"{n / 1000:.1f}k".replace(".0k", "k")
    return str(n)


def money(micros: int | None) -> str:
    if micros is None:
        return "unknown"
    dollars = micros / MICROS
    return f"${dollars:.2f}" if dollars >= 1 else f"${dollars:.4f}".rstrip("0").rstrip(".") \
        if micros else "$0"


def summary(u: Usage) -> str:
    """"1.2k tokens (1k in, 200 out), $0.0032" or "... cost unknown"; "" when nothing known."""
    if not u.reported and not u.tokens:
        return ""
    cost = money(u.cost_micros)
    return (f"{tokens_text(u.tokens)} tokens ({tokens_text(u.input)} in, "
            f"{tokens_text(u.output)} out), {'cost ' if u.cost_micros is None else ''}{cost}")


def to_fields(u: Usage, reported: Usage | None = None) -> dict[str, Any]:
    """A session's usage as its event's field (reported: a cumulative engine's totals so far)."""
    out: dict[str, Any] = {k: getattr(u, k) for k in COUNTS}
    out.update(cost_micros=u.cost_micros, cost_source=u.cost_source, model=u.model)
    if reported is not None:
        out["reported"] = {k: getattr(reported, k) for k in COUNTS} | {
            "cost_micros": reported.cost_micros}
    return out


def from_fields(value: Any) -> Usage:
    """A usage field read back (typed by the schema at replay; anything else reads as none)."""
    if not isinstance(value, dict):
        return Usage()
    counts = {k: v for k in COUNTS if type(v := value.get(k)) is int and v >= 0}
    cost = value.get("cost_micros")
    return Usage(**counts, cost_micros=cost if type(cost) is int and cost >= 0 else None,
                 cost_source=str(value.get("cost_source") or ""),
                 model=str(value.get("model") or ""), reported=True)


def reported_of(value: Any) -> Usage | None:
    """A cumulative engine's totals as a session recorded them, or None."""
    if isinstance(value, dict) and isinstance(value.get("reported"), dict):
        return from_fields(value["reported"])
    return None


__all__ = ["Usage", "Budget", "measure", "price", "parse_budget", "summary", "money",
           "tokens_text", "to_fields", "from_fields", "reported_of", "COUNTS"]
