"""Helpers for driving the seven real coding-agent CLIs offline against tests/fakemodel.py.

The engines come from `scripts/install-engines` (a cache outside the work tree; a missing one
makes its tests skip with the reason). Each run starts the engine and a fake model server
together through pair.py in a network namespace holding only loopback, so nothing can leave the
machine: `unshare -n` as root, bwrap's own (`--unshare-net`, in a user namespace, uid kept) as a
plain user. Where neither works, the engine tests skip unless BRAT_ENGINES_ALLOW_NET=1
(BRAT_ENGINES_NO_NETNS=1 turns the namespace off). Every engine gets its offline config
written into the test's own HOME (see `configure`).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
PAIR = HERE / "pair.py"
ENGINES_DIR = Path(os.environ.get("BRAT_ENGINES_DIR")
                   or Path.home() / ".cache" / "git-brat-engines")
ENGINES_BIN = ENGINES_DIR / "bin"
NETNS_PORT = 18080            # in a namespace of its own every port is free

ENGINES = ("claude", "codex", "opencode", "gemini", "cn", "copilot", "aider")
MODELS = {"codex": "fake-model", "opencode": "fake/fake-model", "cn": "",
          "copilot": "fake-model", "aider": "openai/fake-model", "claude": "",
          "gemini": "gemini-2.5-flash"}


def _works(argv: list[str]) -> bool:
    try:
        return subprocess.run(argv, capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


# A plain user may not `unshare -n`; bwrap may, in a user namespace of its own that maps the
# user to itself (the engines and the witness inside still run as that user, without
# privilege), and it brings the namespace's loopback up itself. The whole filesystem is the
# host's, as with unshare.
BWRAP_NETNS = ["bwrap", "--die-with-parent", "--unshare-net", "--dev-bind", "/", "/", "--"]


def _netns_kind() -> str | None:
    """What makes a loopback-only network namespace here: "unshare", "bwrap" or None."""
    if os.environ.get("BRAT_ENGINES_NO_NETNS"):
        return None
    if shutil.which("unshare") and shutil.which("ip") and \
            _works(["unshare", "-n", "ip", "link", "set", "lo", "up"]):
        return "unshare"
    if shutil.which("bwrap") and _works([*BWRAP_NETNS, "true"]):
        return "bwrap"
    return None


NETNS_KIND = _netns_kind()
NETNS = NETNS_KIND is not None
# Without a namespace the engines would see the machine's network, and some make lookups of
# their own hosts: they run only when asked to (read here: the suite's fixtures drop BRAT_*).
ALLOW_NET = bool(os.environ.get("BRAT_ENGINES_ALLOW_NET"))


def require_isolation() -> None:
    if not NETNS and not ALLOW_NET:
        pytest.skip("no loopback-only network namespace here (`unshare -n` needs root and "
                    "`ip`, bwrap a user namespace); set BRAT_ENGINES_ALLOW_NET=1 to run the "
                    "engines without one")


def engine_missing(name: str) -> str | None:
    """Why engine `name` cannot run here, or None."""
    if not (ENGINES_BIN / name).exists():
        why = ""
        failed = ENGINES_DIR / f"failed-{name}"
        if failed.exists():
            why = ": " + failed.read_text(errors="replace").strip().splitlines()[-1][:200]
        return f"engine {name} not installed in {ENGINES_BIN} (run scripts/install-engines){why}"
    return None


def require_engine(name: str) -> None:
    require_isolation()
    why = engine_missing(name)
    if why:
        pytest.skip(why)


def processes_under(root: Path) -> list[tuple[int, str]]:
    """Live processes working in `root` (their cwd inside it) or whose HOME is there (every
    engine gets its sandbox's HOME): what an engine left behind."""
    out = []
    prefix = str(root) + os.sep
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cwd = os.readlink(f"/proc/{entry}/cwd")
            with open(f"/proc/{entry}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                    continue
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
            with open(f"/proc/{entry}/environ", "rb") as f:
                home = next((v[5:].decode(errors="replace") for v in f.read().split(b"\0")
                             if v.startswith(b"HOME=")), "")
        except OSError:
            continue
        if (cwd + os.sep).startswith(prefix) or (home + os.sep).startswith(prefix):
            out.append((int(entry), cmd[:200]))
    return out


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Run:
    rc: int
    out: str            # the engine's stdout and stderr together, as the witness reads them
    err: str            # pair.py's own complaints
    requests: list[dict]
    argv: list[str] = field(default_factory=list)
    prompt: str = ""
    seconds: float = 0.0

    def model_requests(self) -> list[dict]:
        return [r for r in self.requests if r.get("kind") not in (None, "other")]

    def show(self) -> str:
        paths = [f"{r['method']} {r['path']}" for r in self.requests]
        return (f"exit {self.rc} after {self.seconds:.1f}s\n--- output\n{self.out[-6000:]}\n--- pair.py\n{self.err[-2000:]}"
                f"\n--- requests\n" + "\n".join(paths[-40:]))


@dataclass
class Sandbox:
    """One engine's world: a HOME, its offline config, the fake server's URL, a port."""
    name: str
    root: Path
    port: int
    env: dict[str, str] = field(default_factory=dict)
    extra_args: list[str] = field(default_factory=list)
    model: str = ""
    runs: int = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def home(self) -> Path:
        return self.root / "home"

    def run(self, argv: list[str], cwd: Path, env: dict | None = None,
            stdin: str | None = None, timeout: float = 120, hang_marker: str = "",
            reply: str = "", limit: dict | None = None) -> Run:
        """Start the fake server and `argv` together (in a loopback-only netns where we can)."""
        self.runs += 1
        n = self.runs
        log = self.root / f"requests-{n}.jsonl"
        out = self.root / f"output-{n}"
        log.write_text("")
        cmd = [sys.executable, str(PAIR), "--port", str(self.port), "--log", str(log),
               "--timeout", str(timeout), "--output", str(out),
               "--cwd", str(cwd)]
        if stdin:
            cmd += ["--stdin", stdin]
        if hang_marker:
            cmd += ["--hang-marker", hang_marker]
        if reply:
            reply_file = self.root / f"reply-{n}.txt"
            reply_file.write_text(reply)
            cmd += ["--reply-file", str(reply_file)]
        if limit is not None:   # the server answers 429 (fakemodel.limit_reply)
            limit_file = self.root / f"limit-{n}.json"
            limit_file.write_text(json.dumps(limit))
            cmd += ["--limit-file", str(limit_file)]
        if NETNS_KIND == "unshare":
            cmd = ["unshare", "-n", *cmd, "--lo-up"]
        elif NETNS_KIND == "bwrap":
            cmd = [*BWRAP_NETNS, *cmd]
        full = {k: v for k, v in os.environ.items()
                if k.lower() not in ("http_proxy", "https_proxy", "all_proxy")}
        full.update({**self.env, **(env or {}), "NO_PROXY": "127.0.0.1,localhost",
                     "no_proxy": "127.0.0.1,localhost"})
        full["PATH"] = f"{ENGINES_BIN}{os.pathsep}{full.get('PATH', '')}"
        started = time.monotonic()
        proc = subprocess.run([*cmd, "--", *argv], env=full, cwd=str(cwd),
                              stdin=subprocess.DEVNULL, timeout=timeout + 60,
                              capture_output=True)
        requests = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
        text = out.read_text(errors="replace")
        errtext = proc.stderr.decode(errors="replace")
        return Run(proc.returncode, text, errtext, requests, list(argv),
                   seconds=time.monotonic() - started)


def configure(name: str, root: Path) -> Sandbox:
    """Write engine `name`'s offline config under `root` and say how to start it."""
    port = NETNS_PORT if NETNS else _free_port()
    box = Sandbox(name, root, port)
    home = box.home
    (home / ".config").mkdir(parents=True, exist_ok=True)
    (home / ".gitconfig").write_text(
        "[user]\n\tname = Test User\n\temail = test@example.com\n"
        "[init]\n\tdefaultBranch = main\n")
    url = box.url
    env = {"HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config"),
           "XDG_DATA_HOME": str(home / ".local" / "share"),
           "XDG_STATE_HOME": str(home / ".local" / "state"),
           "XDG_CACHE_HOME": str(home / ".cache"),
           "NO_UPDATE_NOTIFIER": "1", "NO_COLOR": "1", "TERM": "dumb", "CI": "true"}
    # Identity for the engines' own `git commit` (the witness sets these too).
    env.update({"GIT_AUTHOR_NAME": f"{name} agent", "GIT_AUTHOR_EMAIL": f"{name}@agents.invalid",
                "GIT_COMMITTER_NAME": "Test User", "GIT_COMMITTER_EMAIL": "test@example.com"})
    box.model = MODELS[name]
    if name == "claude":
        env.update({"ANTHROPIC_BASE_URL": url, "ANTHROPIC_API_KEY": "sk-ant-fake-key",
                    "CLAUDE_CONFIG_DIR": str(home / ".claude")})
    elif name == "codex":
        codex_home = home / ".codex"
        codex_home.mkdir(parents=True)
        off = ("plugins", "remote_plugin", "plugin_sharing", "apps", "enable_request_compression",
               "daemon_auto_start", "in_app_updates", "unbounded_connection_retries",
               "api_key_model_discovery", "shell_snapshot", "computer_use", "browser_use",
               "image_generation", "skill_mcp_dependency_install")
        (codex_home / "config.toml").write_text(
            'model = "fake-model"\nmodel_provider = "fake"\n'
            'check_for_update_on_startup = false\n'
            "[model_providers.fake]\n"
            f'name = "fake"\nbase_url = "{url}/v1"\nenv_key = "FAKE_API_KEY"\n'
            'wire_api = "responses"\nrequest_max_retries = 0\nstream_max_retries = 0\n'
            "[analytics]\nenabled = false\n"
            "[features]\n" + "".join(f"{f} = false\n" for f in off))
        env.update({"CODEX_HOME": str(codex_home), "FAKE_API_KEY": "fake-key"})
    elif name == "opencode":
        cfg = {"provider": {"fake": {"npm": "@ai-sdk/openai-compatible", "name": "Fake",
                                     "options": {"baseURL": f"{url}/v1", "apiKey": "fake-key"},
                                     "models": {"fake-model": {"name": "Fake model",
                                                               "tool_call": True}}}},
               "model": "fake/fake-model", "small_model": "fake/fake-model",
               "permission": {"edit": "allow", "bash": "allow", "webfetch": "deny"},
               "autoupdate": False, "share": "disabled"}
        path = root / "opencode.json"
        path.write_text(json.dumps(cfg, indent=1))
        env.update({"OPENCODE_CONFIG": str(path), "OPENCODE_DISABLE_AUTOUPDATE": "true",
                    "OPENCODE_DISABLE_SHARE": "true", "OPENCODE_DISABLE_LSP_DOWNLOAD": "true",
                    "OPENCODE_DISABLE_MODELS_FETCH": "true",
                    "OPENCODE_DISABLE_DEFAULT_PLUGINS": "true"})
    elif name == "gemini":
        gdir = home / ".gemini"
        gdir.mkdir(parents=True)
        (gdir / "settings.json").write_text(json.dumps({
            "security": {"auth": {"selectedType": "gemini-api-key"}},
            "telemetry": {"enabled": False},
            "privacy": {"usageStatisticsEnabled": False},
            "general": {"disableAutoUpdate": True, "disableUpdateNag": True,
                        "enableAutoUpdate": False, "enableAutoUpdateNotification": False}}))
        env.update({"GEMINI_API_KEY": "fake-key", "GOOGLE_GEMINI_BASE_URL": url,
                    "GEMINI_CLI_TRUST_WORKSPACE": "true"})
    elif name == "cn":
        path = root / "cn-config.yaml"
        path.write_text(
            "name: fake\nversion: 1.0.0\nschema: v1\nmodels:\n"
            "  - name: fake\n    provider: openai\n    model: fake-model\n"
            f"    apiBase: {url}/v1\n    apiKey: fake-key\n"
            "    roles: [chat, edit, apply]\n    capabilities: [tool_use]\n")
        box.extra_args = ["--config", str(path)]
        env.update({"CONTINUE_GLOBAL_DIR": str(home / ".continue")})
    elif name == "copilot":
        env.update({"COPILOT_OFFLINE": "true", "COPILOT_PROVIDER_BASE_URL": f"{url}/v1",
                    "COPILOT_PROVIDER_API_KEY": "fake-key", "COPILOT_MODEL": "fake-model",
                    "COPILOT_HOME": str(home / ".copilot")})
    elif name == "aider":
        meta = root / "aider-models.json"
        meta.write_text(json.dumps({"openai/fake-model": {
            "max_tokens": 8192, "max_input_tokens": 128000, "max_output_tokens": 8192,
            "input_cost_per_token": 0, "output_cost_per_token": 0,
            "litellm_provider": "openai", "mode": "chat"}}))
        box.extra_args = ["--model-metadata-file", str(meta), "--edit-format", "diff"]
        env.update({"OPENAI_API_BASE": f"{url}/v1", "OPENAI_API_KEY": "fake-key",
                    "LITELLM_LOCAL_MODEL_COST_MAP": "True"})
    box.env = env
    return box

