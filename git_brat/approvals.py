"""The local record of which committed settings this user approved (`.git/brat/trust.json`,
never synced): `git brat trust` writes it; brat reads it, and grite for `[locks] remote`."""

from __future__ import annotations

import hashlib
import json
import os
from typing import Any

RECORD = os.path.join("brat", "trust.json")   # under the repository's common directory


def fingerprint(values: dict[str, Any], files: dict[str, list[str]] | None = None) -> str:
    """Of the guarded values, and of the engine settings files approved with them (an approval
    recorded before files counted had none)."""
    whole: Any = {"values": values, "files": files} if files else values
    text = json.dumps(whole, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def approved_files(record: dict) -> dict[str, list[str]]:
    """path -> the object ids approved of each engine settings file in a record."""
    files = record.get("files")
    if not isinstance(files, dict):
        return {}
    return {k: [b for b in v if isinstance(b, str)] for k, v in files.items()
            if isinstance(k, str) and isinstance(v, list)}


def record(path: str) -> dict:
    """The record at path; {} when absent, unreadable, or not matching its own fingerprint."""
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError):
        return {}
    values = data.get("values") if isinstance(data, dict) else None
    if not isinstance(values, dict) or \
            fingerprint(values, approved_files(data)) != data.get("fingerprint"):
        return {}
    return data


def approved(common_dir: str, key: str, default: Any) -> Any:
    """The value of key this user approved in the repository at common_dir (else default:
    a clone that never approved anything takes the defaults, which run nothing)."""
    return record(os.path.join(common_dir, RECORD)).get("values", {}).get(key, default)
