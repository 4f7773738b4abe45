"""The CLI edge shared by git-grite and git-brat: --json output, one-line errors, exit codes."""

from __future__ import annotations

import re
import sys
from datetime import datetime, timezone
from typing import Any, Callable

import click
import msgspec

from git_brat.errors import EXIT_USAGE, GriteError

# click >= 8.2 raises this when a group is run without a subcommand.
_NO_ARGS_IS_HELP = getattr(click.exceptions, "NoArgsIsHelpError", ())

json_option = click.option("--json", "as_json", is_flag=True, help="Print bare JSON on stdout.")


def emit_json(obj: Any) -> None:
    sys.stdout.buffer.write(msgspec.json.encode(obj))
    sys.stdout.buffer.write(b"\n")
    sys.stdout.flush()


# Control characters (but newline and tab) shown as U+FFFD: titles, names and messages come
# from any replica's log, and must not drive the terminal (escape sequences, carriage returns).
_UNPRINTABLE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


# Bidi overrides and zero-width characters make text read differently from what it is: shown
# as escapes (\u202e).
_DECEPTIVE = re.compile("[\u061c\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff]")


# Bytes that were not UTF-8 arrive as lone surrogates (surrogateescape): shown as the byte.
_RAW_BYTE = re.compile("[\udc80-\udcff]")
_RAW_BYTE_REPR = re.compile(r"\\udc([89a-f][0-9a-f])")


def printable(text: str) -> str:
    text = _UNPRINTABLE.sub("\ufffd", text)
    text = _RAW_BYTE.sub(lambda m: f"\\x{ord(m.group(0)) - 0xdc00:02x}", text)
    return _DECEPTIVE.sub(lambda m: f"\\u{ord(m.group(0)):04x}", text)


def error_text(message: str) -> str:
    """An error line as shown: a repr'd argument shows its undecodable bytes as \\xff."""
    return printable(_RAW_BYTE_REPR.sub(r"\\x\1", message))


def emit(as_json: bool, obj: Any, human: Callable[[], str | None]) -> None:
    """Print obj as JSON, or the human rendering."""
    if as_json:
        emit_json(obj)
    else:
        text = human()
        if text:
            click.echo(printable(text))


def warn(message: str) -> None:
    click.echo(printable(f"warning: {message}"), err=True)


def when(dt: datetime) -> str:
    """Short human time: local date and minute."""
    return dt.astimezone().strftime("%Y-%m-%d %H:%M")


def now_utc() -> datetime:
    return datetime.now(timezone.utc)


def columns(text: str) -> int:
    """Terminal columns text takes: wide (CJK) characters two, combining marks none."""
    if text.isascii():
        return len(text)
    import unicodedata
    # Characters printable() shows as escapes take the escape's width (\u202e, \xff).
    return sum(6 if _DECEPTIVE.match(ch) else 4 if "\udc80" <= ch <= "\udcff" else
               0 if unicodedata.combining(ch) else
               2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in text)


def cut(text: str, width: int) -> str:
    """text on one line, shortened with "…" to at most `width` terminal columns."""
    text = text.replace("\n", " ")
    if columns(text) <= width:
        return text
    out, used = [], 0
    for ch in text:
        w = columns(ch)
        if used + w > width - 1:
            break
        out.append(ch)
        used += w
    return "".join(out) + "…"


def pad(text: str, width: int) -> str:
    """ljust by terminal columns."""
    return text + " " * max(0, width - columns(text))


def table(rows: list[list[str]], widths: list[int | None], total: int = 80) -> str:
    """Fixed-width columns; the one column with width None takes what is left of `total`."""
    fixed = sum(w for w in widths if w) + 2 * (len(widths) - 1)
    flex = max(10, total - fixed)
    out = []
    for row in rows:
        cells = []
        for cell, w in zip(row, widths):
            w = w or flex
            cells.append(pad(cut(cell, w), w))
        out.append("  ".join(cells).rstrip())
    return "\n".join(out)


class LazyGroup(click.Group):
    """A group whose subcommands live in modules imported only when one of them is used."""

    def __init__(self, *args, lazy: dict[str, str], **kwargs):
        super().__init__(*args, **kwargs)
        self.lazy = lazy   # command name -> module with register(group)

    def list_commands(self, ctx) -> list[str]:
        return sorted(set(self.commands) | set(self.lazy))

    def get_command(self, ctx, name: str):
        if name not in self.commands and name in self.lazy:
            import importlib
            importlib.import_module(self.lazy[name]).register(self)
        return self.commands.get(name)

    def load_all(self) -> None:
        for name in self.lazy:
            self.get_command(None, name)


def run(group: click.Group, prog: str, argv: list[str] | None = None) -> int:
    """Invoke a click group; GriteError and usage errors become one stderr line + exit code."""
    try:
        group.main(args=argv, prog_name=prog, standalone_mode=False)
        return 0
    except GriteError as exc:
        click.echo(error_text(f"{prog}: error: {exc.message}"), err=True)
        return exc.exit_code
    except _NO_ARGS_IS_HELP:   # bare group: click printed the help
        return 0
    except click.UsageError as exc:
        hint = f" (see `{exc.ctx.command_path} --help`)" if exc.ctx else ""
        click.echo(error_text(f"{prog}: error: {exc.format_message()}{hint}"), err=True)
        return EXIT_USAGE
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except click.Abort:
        click.echo(f"{prog}: interrupted", err=True)
        return 130
    except click.ClickException as exc:
        click.echo(f"{prog}: error: {exc.format_message()}", err=True)
        return exc.exit_code
    except BrokenPipeError:   # `| head`: not an error worth a traceback
        sys.stderr.close()
        return 0
    except UnicodeError as exc:   # e.g. an argument that is not valid UTF-8
        click.echo(f"{prog}: error: text that is not valid UTF-8: {exc.reason}", err=True)
        return EXIT_USAGE
    except OSError as exc:   # a file we were asked to read or write
        where = f" {exc.filename}" if exc.filename else ""
        click.echo(f"{prog}: error: cannot use{where}: {exc.strerror or exc}", err=True)
        return 1


class ProgressLine:
    """`what: N events` redrawn in place on a terminal's stderr (at most 5 times a second),
    erased when done; nothing at all when stderr is not a terminal."""

    def __init__(self, what: str):
        self.what, self.shown, self.last = what, False, 0.0
        self.on = sys.stderr.isatty()

    def __call__(self, n: int) -> None:
        import time
        now = time.monotonic()
        if self.on and now - self.last >= 0.2:
            self.last = now
            sys.stderr.write(f"\r{self.what}: {n:,} events\x1b[K")
            sys.stderr.flush()
            self.shown = True

    def __enter__(self) -> "ProgressLine":
        return self

    def __exit__(self, *exc) -> None:
        if self.shown:
            sys.stderr.write("\r\x1b[K")
            sys.stderr.flush()
