"""Secrets out of what syncs: API-key and token shapes in engine and check output and argv, redacted.

The log is pushed to every clone and the hub; an engine that echoes its configuration on an auth
error, or a check that dumps its environment, would publish the user's keys. What the log
records of such text goes through here; the full text stays in local files (0600).
"""

from __future__ import annotations

import re

MARK = "[redacted]"

# Shapes of credentials issued by the usual providers (prefix kept: it says what was there).
_TOKENS = re.compile(
    r"\b(?:"
    r"sk-[A-Za-z0-9_\-]{8,}"                       # OpenAI, Anthropic (sk-ant-…), sk-proj-…
    r"|gh[pousr]_[A-Za-z0-9]{16,}"                 # GitHub tokens
    r"|github_pat_[A-Za-z0-9_]{16,}"               # GitHub fine-grained tokens
    r"|xox[abposr]-[A-Za-z0-9\-]{8,}"              # Slack
    r"|(?:AKIA|ASIA)[0-9A-Z]{16}"                  # AWS access key ids
    r"|AIza[0-9A-Za-z_\-]{30,}"                    # Google API keys
    r"|glpat-[A-Za-z0-9_\-]{16,}"                  # GitLab
    r")")
_BEARER = re.compile(r"(?i)\b(bearer\s+)[A-Za-z0-9._~+/=\-]{8,}")
# --api-key VALUE, --api-key=VALUE, --token VALUE (also in text, e.g. an echoed command line)
_OPTION_NAMES = r"(?:api[-_]?key|token|access[-_]?token|auth[-_]?token|secret|password|passwd)"
_OPTION = re.compile(r"(?i)(--?" + _OPTION_NAMES + r"(?:=|\s+))(\"[^\"]*\"|'[^']*'|\S+)")
# NAME_KEY=value, GITHUB_TOKEN=value, aws_secret_access_key = value, DB_PASSWORD="x y"
_ASSIGN = re.compile(r"(?i)\b([A-Za-z0-9_.\-]*(?:key|token|secret|password|passwd)"
                     r"[A-Za-z0-9_]*\s*=\s*)(\"[^\"]*\"|'[^']*'|[^\s\"']+)")
_OPTION_ARG = re.compile(r"(?i)--?" + _OPTION_NAMES)


def text(s: str) -> str:
    """s with every credential-shaped value replaced by [redacted]."""
    if not s:
        return s
    s = _ASSIGN.sub(lambda m: m.group(1) + MARK, s)
    s = _OPTION.sub(lambda m: m.group(1) + MARK, s)
    s = _BEARER.sub(lambda m: m.group(1) + MARK, s)
    return _TOKENS.sub(MARK, s)


def argv(args: list[str]) -> list[str]:
    """An argv as it may be recorded: the value after --api-key/--token (or in `--token=V`)
    and every credential shape inside an argument redacted."""
    out: list[str] = []
    secret_next = False
    for a in args:
        if secret_next:
            out.append(MARK)
            secret_next = False
            continue
        if _OPTION_ARG.fullmatch(a):
            secret_next = True
            out.append(a)
            continue
        out.append(text(a))
    return out


def tail(s: str, limit: int) -> str:
    """The redacted text cut to its last `limit` characters (redacted first: a cut could split a
    token so that its shape no longer shows)."""
    s = text(s)
    return s if len(s) <= limit else s[-limit:]


__all__ = ["text", "argv", "tail", "MARK"]
