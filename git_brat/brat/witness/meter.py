"""What a running or ended session's engine reported spending, read from its log (or its
side channel) as the engine reports it (brat/engines/usage.py reads, prices and sums)."""

from __future__ import annotations

from git_brat.brat.engines import Preset, usage


def spent_so_far(live, preset: Preset, output: str | None = None,
                 engine_session: str = "") -> usage.Usage:
    """What the engine of a session (a witness/session.LiveSession: not imported, session.py
    calls this at a session's end) reported spending up to now, as it reported it (a
    cumulative engine: its conversation's totals): from `output` (its whole output, at its
    end), else what its log holds, read on from where the last look stopped; or from its side
    channel."""
    if preset.usage is None or live.phase != "engine":
        return usage.Usage()
    env = {**live.env, **(live.inv.env if live.inv else {})}

    def measure(text: str) -> usage.Usage:
        return usage.measure(preset, text, env=env, workdir=live.worktree,
                             engine_session=engine_session or live.session_uuid or
                             live.resume_id, since=live.started_wall)
    if output is not None or preset.usage.file:
        return measure(output or "")
    live.meter_offset = max(live.meter_offset, live.engine_offset)
    text, live.meter_offset = _new_lines(live.log, live.meter_offset)
    part = measure(text)
    if part.reported:
        each = preset.usage.each
        live.meter = live.meter.plus(part) if each and live.meter.reported else part
    return live.meter


def _new_lines(path: str, offset: int, limit: int = 4 << 20) -> tuple[str, int]:
    """The whole lines a log gained since byte `offset` (at most `limit` bytes of them), and
    the offset after them."""
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            data = f.read(limit)
    except OSError:
        return "", offset
    end = data.rfind(b"\n") + 1
    return data[:end].decode("utf-8", "replace"), offset + end


__all__ = ["spent_so_far"]
