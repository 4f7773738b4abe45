"""What the hostile agents share (they import it from their own directory, which Python puts
first on their path) and how the tests read their verdicts back from a session's log."""

import subprocess


def attempter(prefix: str):
    """attempt(name, fn): run fn, print `PREFIX name ok|refused detail` (a refusal is any
    exception: what the sandbox should make of every forbidden thing)."""
    def attempt(name, fn):
        try:
            out = fn()
            print(f"{prefix} {name} ok {str(out)[:200]!r}", flush=True)
        except Exception as exc:
            print(f"{prefix} {name} refused {type(exc).__name__}: {str(exc)[:200]!r}",
                  flush=True)
    return attempt


def git(*args):
    proc = subprocess.run(["git", *args], capture_output=True, text=True, timeout=60)
    if proc.returncode:
        raise RuntimeError(f"git {args[0]} exited {proc.returncode}: {proc.stderr.strip()}")
    return proc.stdout.strip()


def verdicts(log: str, prefix: str) -> dict[str, str]:
    """{attempt: "ok" | "refused"} from the agent's lines in a session's log."""
    said = {}
    for line in log.splitlines():
        if line.startswith(prefix + " "):
            _, name, verdict, *_ = line.split(" ", 3)
            said[name] = verdict
    return said
