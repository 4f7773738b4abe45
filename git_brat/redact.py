"""Secrets out of what syncs: credentials in engine and check output, comments, reasons and argv,
redacted.

The log is pushed to every clone and the hub; an engine that echoes its configuration on an auth
error, a check that dumps its environment, an agent that pastes a config file into a comment,
would publish the user's keys. Every text the log records passes through here (the log's writer
redacts what it appends); the full text stays in local files (0600).

The shapes follow detect-secrets' plugins (github.com/Yelp/detect-secrets, detect_secrets/plugins):
its keyword detector (a secret-looking name with any value, in `k = v`, `k: v`, `"k": "v"`,
`k := v`, `k => v` forms), basic-auth URLs, private keys, JWTs, and the token formats of AWS,
GitHub, GitLab, Slack, Stripe, npm, PyPI, SendGrid, Square, Twilio, Azure, Artifactory, Discord,
Telegram and Mailchimp; plus the providers its list lacks (Anthropic, OpenAI project keys,
Hugging Face, Google) and its high-entropy check, narrowed to the value of an assignment (a hash
or a UUID is left alone: commit ids are everywhere in what we record). detect-secrets itself is
not used: it takes ~0.1 s to import and milliseconds a line (seconds for one check's output),
too much for every comment and session record (measured for issue 34).

The patterns are compiled on first use (the CLI's import stays as it was), and each detector
runs only on a text holding the literal it needs: clean text pays a few substring searches.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from functools import cache

MARK = "[redacted]"

# Names whose value is a secret whatever it looks like (detect-secrets' keyword denylist, and
# the names tools use). The name ends with one: `DB_PASSWORD`, `"api_key"`, `client-secret`,
# `x-auth-token`; `KeyError` and `token_count` do not. Matched in lower case.
_SECRET_NAMES = (r"(?:api[_-]?key|apikey|auth[_-]?key|service[_-]?key|account[_-]?key|"
                 r"db[_-]?key|database[_-]?key|priv(?:ate)?[_-]?key|client[_-]?key|"
                 r"secret[_-]?key|access[_-]?key|signing[_-]?key|encryption[_-]?key|"
                 r"master[_-]?key|session[_-]?key|password|passwd|passphrase|pwd|pass|"
                 r"secret|token|credentials?|contrase(?:ñ|n)a|cookie)")
_ASSIGN_OP = r"[\"'`]?\]?[ \t]*(?::=|=>|::|=|:)[ \t]*"
_VALUE = r"(\"[^\"\n]*\"|'[^'\n]*'|`[^`\n]*`|[^\s\"'`,;}\]]+)"
# --api-key VALUE, --api-key=VALUE, --token VALUE (also in text, e.g. an echoed command line)
_OPTION_NAMES = r"(?:api[-_]?key|token|access[-_]?token|auth[-_]?token|secret|password|passwd)"
_OPTION_ARG = re.compile(r"(?i)--?" + _OPTION_NAMES)

# Shapes of credentials issued by the usual providers: (the literal it opens with, pattern).
# A text without the literal is not searched, nor the pattern compiled; the literal first makes
# the search run at the speed of a substring search (an alternation of them, or a `\b` in
# front, is a hundred times slower), so the token's left edge is checked afterwards.
_TOKENS = (
    ("sk-", r"sk-(?:ant-|proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{16,}"),  # Anthropic, OpenAI
    ("sk_", r"sk_(?:live|test)_[0-9A-Za-z]{10,}"),          # Stripe secret keys
    ("rk_", r"rk_(?:live|test)_[0-9A-Za-z]{10,}"),          # Stripe restricted keys
    ("gh", r"gh[pousr]_[A-Za-z0-9_]{16,}"),                 # GitHub tokens
    ("github_pat_", r"github_pat_[A-Za-z0-9_]{16,}"),       # GitHub fine-grained tokens
    ("xox", r"xox[abposre]-[A-Za-z0-9\-]{8,}"),             # Slack
    ("https://hooks.slack.com/",                            # Slack webhooks
     r"https://hooks\.slack\.com/services/[A-Za-z0-9_/]+"),
    ("A3T", r"A3T[A-Z0-9][0-9A-Z]{16}(?![A-Za-z0-9])"),     # AWS access key ids
    ("AKIA", r"AKIA[0-9A-Z]{16}(?![A-Za-z0-9])"),
    ("ASIA", r"ASIA[0-9A-Z]{16}(?![A-Za-z0-9])"),
    ("ABIA", r"ABIA[0-9A-Z]{16}(?![A-Za-z0-9])"),
    ("ACCA", r"ACCA[0-9A-Z]{16}(?![A-Za-z0-9])"),
    ("AIza", r"AIza[0-9A-Za-z_\-]{30,}"),                   # Google API keys
    ("gl", r"gl(?:pat|dt|ft|soat|rt|cbt|imt|ptt|agent|oas)-[A-Za-z0-9_\-]{16,}"),  # GitLab
    ("GR1348941", r"GR1348941[A-Za-z0-9_\-]{20,}"),         # GitLab runner registration
    ("hf_", r"hf_[A-Za-z0-9]{20,}"),                        # Hugging Face
    ("npm_", r"npm_[A-Za-z0-9]{20,}"),                      # npm
    ("pypi-AgE", r"pypi-AgE[A-Za-z0-9_\-]{50,}"),           # PyPI
    ("SG", r"SG\.[A-Za-z0-9_\-]{16,}\.[A-Za-z0-9_\-]{16,}"),  # SendGrid
    ("sq0", r"sq0(?:csp|atp)-[0-9A-Za-z_\-]{22,}"),         # Square
    ("AC", r"AC[0-9a-f]{32}(?![A-Za-z0-9])"),               # Twilio
    ("SK", r"SK[0-9a-f]{32}(?![A-Za-z0-9])"),
    ("AccountKey=", r"AccountKey=[A-Za-z0-9+/=]{40,}"),     # Azure storage
    ("AKC", r"AKC[A-Za-z0-9]{10,}(?![A-Za-z0-9])"),         # Artifactory
    ("eyJ", r"eyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{4,}\.[A-Za-z0-9_\-]*"),  # JWTs
)
# Tokens found by their middle: Telegram bot tokens (digits:AA…), Mailchimp keys (hex-usN),
# Discord bot tokens (three dotted parts): (literal, pattern, what the token's start looks like).
_TOKENS_BY_MIDDLE = (
    (":AA", r":AA[0-9A-Za-z_\-]{33}(?![A-Za-z0-9_\-])", r"\d{8,10}\Z"),
    ("-us", r"-us\d{1,2}(?![A-Za-z0-9])", r"(?<![A-Za-z0-9])[0-9a-f]{32}\Z"),
    (".", r"\.[A-Za-z0-9_\-]{6}\.[A-Za-z0-9_\-]{27,}",
     r"(?<![A-Za-z0-9_\-])[MNO][A-Za-z0-9_\-]{23,25}\Z"),
)

# The entropy check, on the value of any assignment (`KEY = value`, `"k": "v"`): long, of a
# key's alphabet, mixed case and digits, random-looking. A hex string (a commit id, a digest)
# and a UUID are never a key here; a path or a sentence is not of the alphabet.
_ENTROPY_MIN_LEN, _ENTROPY_MIN_BITS = 20, 4.0
_KEY_ALPHABET = re.compile(r"[A-Za-z0-9+/=_\-]+")
_HEX_OR_UUID = re.compile(r"[0-9a-fA-F\-]+")
_ASCII_LOWER = {c: c + 32 for c in range(ord("A"), ord("Z") + 1)}


_PATTERNS = {
    # a private key: the whole block, or to the end of a text cut after its start
    "pem": (r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----"
            r"(?:.*?-----END[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|.*\Z)", re.S),
    "pem_end": r"-----END[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----",
    "pem_body": r"[ \t]*(?:[A-Za-z0-9+/=]{16,}|Proc-Type:.*|DEK-Info:.*|)[ \t]*",
    # scheme://user:password@host: the password goes, the user and host stay
    "url": r"://[^\s:/@\"'<>]+:([^\s/@\"'<>]+)@",
    # these four in lower case:
    "named": _SECRET_NAMES + _ASSIGN_OP + _VALUE,
    "keyish": r"key" + _ASSIGN_OP + _VALUE,
    "option": r"--?" + _OPTION_NAMES + r"(?:=|\s+)(\"[^\"]*\"|'[^']*'|\S+)",
    "auth": r"(?:basic|bearer|token|digest|negotiate)\s+([a-z0-9._~+/=\-]{8,})",
    "any_assign": (r"[=:][ \t]*([\"'`]?)([A-Za-z0-9+/=_\-]{" + str(_ENTROPY_MIN_LEN)
                   + r",})\1(?![A-Za-z0-9+/=_.\-])"),
    "auth_value": r".*[0-9=]|(?=.*[a-z])(?=.*[A-Z]).{20}",   # not a word of prose
    "code": r"[A-Za-z_][\w.]*[(\[]",
}
# Words one of which a secret-looking name holds (in lower case).
_NAME_WORDS = ("key", "pass", "pwd", "secret", "token", "cred", "contrase", "cookie")
_AUTH_WORDS = ("basic", "bearer", "token", "digest", "negotiate")


@cache
def _rx(pattern: str, flags: int = 0) -> re.Pattern:
    """pattern compiled on first use (not at import: the CLI's start stays as it was; nor for a
    text that cannot hold what it finds: a comment's write compiles almost nothing)."""
    return re.compile(pattern, flags)


def _named_rx(name: str) -> re.Pattern:
    p = _PATTERNS[name]
    return _rx(*p) if isinstance(p, tuple) else _rx(p)


def _entropy(s: str) -> float:
    """Shannon entropy of s, in bits a character."""
    n = len(s)
    return -sum(c / n * math.log2(c / n) for c in Counter(s).values())


def looks_random(value: str, min_len: int = _ENTROPY_MIN_LEN,
                 bits: float = _ENTROPY_MIN_BITS) -> bool:
    """Whether value has the look of a generated key: long, of a key's alphabet, letters and
    digits mixed, high entropy; never a hex string (commit ids, digests) or a UUID."""
    if len(value) < min_len or not _KEY_ALPHABET.fullmatch(value) or \
            _HEX_OR_UUID.fullmatch(value):
        return False
    if not (any(c.isdigit() for c in value) and any(c.isalpha() for c in value)):
        return False
    return _entropy(value) >= (bits if len(value) < 32 else min(bits, 3.5))


def _is_code(value: str) -> bool:
    """A value that is code, not a secret: a call, a lookup, an empty literal, a placeholder
    (`token = get_token()`, `password = os.environ["PW"]`, `key: None`, `${TOKEN}`), or one
    redacted already (text redacted twice reads as once)."""
    v = value.strip("\"'`")
    return (v in ("", "None", "null", "nil", "true", "false", "True", "False", "undefined")
            or bool(_named_rx("code").match(value))
            or value.startswith(("$", "%", "{", "<", MARK[:-1])))


def _named_before(s: str, at: int) -> bool:
    """Whether a name ends just before position at (`NAME =`, `"name":`, `x[key] =`)."""
    while at > 0 and s[at - 1] in " \t":
        at -= 1
    if at and s[at - 1] in "\"'`]":
        at -= 1
    return at > 0 and (s[at - 1].isalnum() or s[at - 1] in "_.-")


def _left_edge(s: str, at: int) -> bool:
    """Whether a token may start at position at (not inside a word)."""
    return at == 0 or not (s[at - 1].isalnum() or s[at - 1] == "_")


def _spans(s: str) -> list[tuple[int, int]]:
    """Where s holds a credential: (start, end) of each, in any order, maybe overlapping. Each
    detector runs only when the text holds the literal it needs."""
    out: list[tuple[int, int]] = []
    if "PRIVATE KEY" in s:
        out += _private_keys(s)
    if "://" in s:
        out += [m.span(1) for m in _named_rx("url").finditer(s)]
    low = s.lower()
    if len(low) != len(s):   # (a few non-ASCII letters change length in lower case)
        low = s.translate(_ASCII_LOWER)
    if any(w in low for w in _NAME_WORDS):
        out += _names(s, low)
    if any(w in low for w in _AUTH_WORDS):
        for m in _named_rx("auth").finditer(low):
            if _named_rx("auth_value").match(s, m.start(1), m.end(1)):
                out.append(m.span(1))
    if "=" in s or ":" in s:
        for m in _named_rx("any_assign").finditer(s):
            v = m.group(2)
            if (any(c.isupper() for c in v) and any(c.islower() for c in v) and looks_random(v)
                    and _named_before(s, m.start())):
                out.append(m.span(2))
    for literal, pattern in _TOKENS:
        if literal in s:
            out += [m.span() for m in _rx(pattern).finditer(s) if _left_edge(s, m.start())]
    for middle, pattern, before in _TOKENS_BY_MIDDLE:
        if middle in s:
            for m in _rx(pattern).finditer(s):
                head = _rx(before).search(s, max(0, m.start() - 40), m.start())
                if head:
                    out.append((head.start(), m.end()))
    return out


def _private_keys(s: str) -> list[tuple[int, int]]:
    out = [m.span() for m in _named_rx("pem").finditer(s)]
    for m in _named_rx("pem_end").finditer(s):   # a key whose start was cut off: its lines
        start = m.start()
        while start > 0:
            line_start = s.rfind("\n", 0, start - 1) + 1
            if not _named_rx("pem_body").fullmatch(s, line_start, start - 1):
                break
            start = line_start
        out.append((start, m.end()))
    return out


def _names(s: str, low: str) -> list[tuple[int, int]]:
    """The values of secret-looking names (any value but code), of names ending in `key` (a
    key-like value), and after --token-like options."""
    out = []
    for m in _named_rx("named").finditer(low):
        if not _is_code(s[m.start(1):m.end(1)]):
            out.append(m.span(1))
    for m in _named_rx("keyish").finditer(low):
        v = s[m.start(1):m.end(1)].strip("\"'`")
        if looks_random(v, 12, 3.0) or (len(v) >= 32 and "-" not in v
                                         and _HEX_OR_UUID.fullmatch(v)):
            out.append(m.span(1))
    if "-" in s:
        out += [m.span(1) for m in _named_rx("option").finditer(low)]
    return out


def text(s: str) -> str:
    """s with every credential-shaped value replaced by [redacted]."""
    if not s or not isinstance(s, str):
        return s
    spans = _spans(s)
    if not spans:
        return s
    parts, at = [], 0
    for start, end in sorted(spans):
        if end <= at:
            continue
        if start >= at:
            parts += [s[at:start], MARK]
        at = end
    parts.append(s[at:])
    return "".join(parts)


def value(v, depth: int = 0):
    """v (a field's value: text, or lists and maps of them) with every text in it redacted;
    numbers, booleans and anything nested deeper than the log allows are left as they are."""
    if isinstance(v, str):
        return text(v)
    if depth > 32:
        return v
    if isinstance(v, list):
        return [value(x, depth + 1) for x in v]
    if isinstance(v, dict):
        return {k: value(x, depth + 1) for k, x in v.items()}
    return v


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


__all__ = ["text", "value", "argv", "tail", "looks_random", "MARK"]
