"""Shell completion: the scripts load in real shells and complete commands and real ids."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest

from helpers import brat, brat_json, grite, run

GIT_COMPLETION = Path("/usr/share/bash-completion/completions/git")
BASH_COMPLETION = Path("/usr/share/bash-completion/bash_completion")

# Completes a command line the way bash does on <TAB>: through git's completion for `git …`
# (its __git_wrap__git_main), through ours for `git-brat …`; prints one candidate a line.
_COMPLETE = r"""
comp() {
    COMP_LINE="$1"; COMP_POINT=${#COMP_LINE}
    read -ra COMP_WORDS <<< "$COMP_LINE"
    [[ $COMP_LINE == *" " ]] && COMP_WORDS+=("")
    COMP_CWORD=$((${#COMP_WORDS[@]} - 1)); COMPREPLY=()
    local spec; spec=$(complete -p "${COMP_WORDS[0]}" 2>/dev/null) ||
        { _completion_loader "${COMP_WORDS[0]}"; spec=$(complete -p "${COMP_WORDS[0]}"); }
    local func=${spec#*-F }; func=${func%% *}
    "$func" "${COMP_WORDS[0]}" "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"
    printf '%s\n' "${COMPREPLY[@]}"
}
"""


def bash(cwd, script: str, git_completion: bool = False, prog: str = "brat") -> list[str]:
    pre = f"source {GIT_COMPLETION}\n" if git_completion else ""
    proc = run(["bash", "--norc", "--noprofile", "-c",
                f"{pre}source <(git {prog} completion bash)\n{_COMPLETE}\n{script}"], cwd, timeout=60)
    assert proc.err == "", proc.err
    return [line.strip() for line in proc.out.splitlines() if line.strip()]


def _subcommands(prog: str) -> set[str]:
    help_text = run(["git-" + prog, "-h"], ".", timeout=60).out
    body = help_text.split("Commands:", 1)[1]
    return {line.split()[0] for line in body.splitlines() if line.startswith("  ")}


@pytest.fixture
def board(repo):
    """A brat repository with one convoy and two tasks."""
    brat(repo, "init")
    convoy = brat(repo, "convoy", "create", "Release").out.strip()
    a = brat(repo, "task", "create", "--convoy", convoy, "Fix the parser").out.strip()
    b = brat(repo, "task", "create", "--convoy", convoy, "Write docs").out.strip()
    return repo, convoy, a, b


def test_bash_script_loads_and_lists_the_subcommands(repo):
    got = bash(repo, 'comp "git-brat "')
    assert set(got) == _subcommands("brat") and "task" in got and "completion" in got
    assert bash(repo, 'comp "git-brat task sh"') == ["show"]
    assert "--convoy" in bash(repo, 'comp "git-brat task create --c"')
    grite_got = bash(repo, 'comp "git-grite "', prog="grite")
    assert set(grite_got) == _subcommands("grite") and "issue" in grite_got


def test_task_and_convoy_ids_complete_from_the_board(board):
    repo, convoy, a, b = board
    assert brat_json(repo, "task", "list")[0]["id"] == a
    prefix = next(a[:n] for n in range(1, 33) if not b.startswith(a[:n]))
    assert bash(repo, f'comp "git-brat task show {prefix}"') == [a]
    assert set(bash(repo, 'comp "git-brat task update "')) == {a, b}
    assert set(bash(repo, f'comp "git-brat task dep add {a} --on "')) == {a, b}
    assert bash(repo, 'comp "git-brat convoy show "') == [convoy]
    assert bash(repo, 'comp "git-brat task list --convoy "') == [convoy]
    assert bash(repo, 'comp "git-brat refinery retry zz"') == []


def test_session_ids_complete(board):
    repo, _convoy, _a, _b = board
    brat(repo, "witness", "run", "--once", "--engine", "demo", "--max-sessions", "1", check=False,
         timeout=120)
    sessions = {s["id"] for s in brat_json(repo, "session", "list", "--all")}
    assert sessions
    assert set(bash(repo, 'comp "git-brat session show "')) == sessions
    assert set(bash(repo, 'comp "git-brat session log "')) == sessions


def test_issue_ids_complete_for_grite(grepo):
    a = grite(grepo, "issue", "create", "Parser chokes on tabs").out.strip()
    b = grite(grepo, "issue", "create", "Docs").out.strip()
    grite(grepo, "issue", "close", b)
    assert set(bash(grepo, 'comp "git-grite issue show "', prog="grite")) == {a, b}
    assert set(bash(grepo, f'comp "git-grite dep add {a} --on "', prog="grite")) == {a, b}


def test_id_completion_never_fails_outside_a_repository(tmp_path):
    outside = tmp_path / "nothing"
    outside.mkdir()
    env = {"GIT_CEILING_DIRECTORIES": str(tmp_path)}
    for words, prog in (("git-brat task show ", "brat"), ("git-grite issue show ", "grite")):
        proc = run([f"git-{prog}"], outside, env={
            **env, "COMP_WORDS": words, "COMP_CWORD": "3",
            f"_GIT_{prog.upper()}_COMPLETE": "bash_complete"}, timeout=60)
        assert proc.returncode == 0 and proc.out.strip() == "" and proc.err == ""


def test_id_completion_is_fast(board):
    repo, _convoy, a, _b = board
    start = time.monotonic()
    assert a in bash(repo, 'comp "git-brat task show "')
    assert time.monotonic() - start < 5


@pytest.mark.skipif(not GIT_COMPLETION.exists(), reason=f"git's bash completion is not installed "
                                                         f"({GIT_COMPLETION} is absent)")
def test_git_own_completion_dispatches_git_brat_to_ours(board):
    repo, convoy, a, b = board
    got = bash(repo, 'comp "git brat "', git_completion=True)
    assert set(got) == _subcommands("brat")
    assert bash(repo, 'comp "git brat task sh"', git_completion=True) == ["show"]
    assert set(bash(repo, 'comp "git brat task show "', git_completion=True)) == {a, b}
    elsewhere = repo.parent / "elsewhere"
    elsewhere.mkdir()
    assert bash(elsewhere, f'comp "git -C {repo} brat convoy show "', git_completion=True) == [convoy]
    assert "issue" in bash(repo, 'comp "git grite "', git_completion=True, prog="grite")
    assert "brat" in bash(repo, 'comp "git br"', git_completion=True)


@pytest.mark.skipif(not BASH_COMPLETION.exists() or not GIT_COMPLETION.exists(),
                    reason=f"bash-completion is not installed ({BASH_COMPLETION} is absent)")
def test_bash_completion_loads_the_script_on_first_use(board):
    repo, convoy, _a, _b = board
    data = repo.parent / "data"
    (data / "bash-completion" / "completions").mkdir(parents=True)
    (data / "bash-completion" / "completions" / "git-brat").write_text(
        run(["git", "brat", "completion", "bash"], repo, timeout=60).out)
    script = f"source {BASH_COMPLETION}\n{_COMPLETE}\n" + \
        'comp "git brat convoy sh"; comp "git brat convoy show "; comp "git-brat conv"'
    proc = run(["bash", "--norc", "--noprofile", "-c", script], repo,
               env={"XDG_DATA_HOME": str(data)}, timeout=60)
    assert proc.err == "" and proc.out.split() == ["show", convoy, "convoy"]


@pytest.mark.parametrize("shell", ["zsh", "fish"])
def test_zsh_and_fish_scripts(repo, shell):
    for prog in ("brat", "grite"):
        script = run(["git", prog, "completion", shell], repo, timeout=60).out
        assert f"_GIT_{prog.upper()}_COMPLETE={shell}_complete" in script
        assert f"git-{prog}" in script
        if shell == "zsh":
            assert f"_git-{prog}()" in script   # what zsh's git completion calls for `git brat`
        if shutil.which(shell) is None:
            continue
        path = repo.parent / f"git-{prog}.{shell}"
        path.write_text(script)
        run([shell, "-n", str(path)], repo, timeout=60)
    if shutil.which(shell) is None:
        pytest.skip(f"{shell} is not installed: the scripts were produced but not parsed")


@pytest.mark.skipif(shutil.which("fish") is None, reason="fish is not installed")
def test_fish_completes_git_brat_and_git_dash_brat(board):
    repo, convoy, a, b = board
    script = repo.parent / "git-brat.fish"
    script.write_text(run(["git", "brat", "completion", "fish"], repo, timeout=60).out)
    proc = run(["fish", "--no-config", "-c", f"source {script}; "
                "complete -C 'git-brat ta'; echo ==; complete -C 'git-brat task show '; echo ==; "
                "complete -C 'git brat task show '; echo ==; complete -C 'git brat con'"],
               repo, timeout=60)
    dash, show, git_show, git_con = proc.out.split("==\n")
    assert dash.splitlines() == ["task\tCreate, list, show and move tasks."]
    assert set(show.splitlines()) == {f"{a}\t[queued] Fix the parser", f"{b}\t[queued] Write docs"}
    assert set(git_show.splitlines()) == set(show.splitlines())
    assert [line.split("\t")[0] for line in git_con.splitlines()] == ["config", "convoy"]


# An interactive zsh on a pseudo-terminal completes $ZLINE<TAB>; compadd still adds the matches
# and also appends them to $ZOUT, so what zsh offered can be read back.
_ZSH_TAB = r"""
zmodload zsh/zpty
zpty z zsh -f -i
zpty -w z 'PROMPT="> "; autoload -U compinit; compinit -u -D; source <(git brat completion zsh)'
zpty -w z 'compadd() { local -a h; builtin compadd -A h "$@"; (( $#h )) && print -rl -- $h >> $ZOUT; builtin compadd "$@"; }'
zpty -w z 'bindkey "^I" complete-word; zstyle ":completion:*" menu no'
zpty -wn z "$ZLINE"$'\t'
for i in {1..100}; do [[ -s $ZOUT ]] && break; sleep 0.1; done
sleep 0.3
zpty -d z
"""


@pytest.mark.skipif(shutil.which("zsh") is None, reason="zsh is not installed")
def test_zsh_completes_git_brat_through_its_git_completion(board):
    repo, convoy, a, b = board
    script = repo.parent / "tab.zsh"
    script.write_text(_ZSH_TAB)

    def tab(line):
        out = repo.parent / "zout"
        out.unlink(missing_ok=True)
        run(["zsh", "-f", str(script)], repo, env={"ZLINE": line, "ZOUT": str(out)}, timeout=60)
        return set(out.read_text().split()) if out.exists() else set()
    assert tab("git-brat ta") == {"task"}
    assert tab("git brat ta") == {"task"}          # zsh's _git calls our _git-brat
    assert tab("git brat task show ") == {a, b}
    assert tab("git brat convoy show ") == {convoy}


@pytest.mark.skipif(shutil.which("zsh") is None, reason="zsh is not installed")
def test_zsh_registers_both_git_dash_brat_and_git_brat(repo):
    proc = run(["zsh", "-f", "-c", "autoload -U compinit; compinit -u -D; "
                "source <(git brat completion zsh); source <(git grite completion zsh); "
                "print -r -- $_comps[git-brat] ${+functions[_git-brat]} $_comps[git-grite] "
                "${+functions[_git-grite]}"], repo, timeout=60)
    assert proc.out.split() == ["_git_brat_completion", "1", "_git_grite_completion", "1"]


@pytest.mark.parametrize("shell", ["zsh", "fish"])
def test_zsh_and_fish_protocols_answer_with_ids(board, shell):
    repo, _convoy, a, b = board
    env = {"COMP_WORDS": "git-brat task show ", "COMP_CWORD": "3" if shell == "zsh" else "",
           "_GIT_BRAT_COMPLETE": f"{shell}_complete"}
    out = run(["git-brat"], repo, env=env, timeout=60).out
    assert a in out and "Fix the parser" in out
    if shell == "fish":   # one "type,value<TAB>help" line per candidate
        assert f"plain,{a}\t[queued] Fix the parser" in out.splitlines()


def test_unknown_shell_is_refused(repo):
    proc = brat(repo, "completion", "tcsh", check=False)
    assert proc.returncode == 2 and "tcsh" in proc.err
    script = brat(repo, "completion", "bash").out
    assert "complete -o nosort -F _git_brat_completion git-brat" in script and "_git_brat()" in script
