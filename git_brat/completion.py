"""Shell completion for git-brat and git-grite: bash, zsh and fish scripts, and id completers."""

from __future__ import annotations

import contextlib
import io
from typing import Callable, Iterable

import click
from click.shell_completion import (BashComplete, CompletionItem, FishComplete, ZshComplete,
                                    add_completion_class)

SHELLS = ("bash", "zsh", "fish")

# `git brat <TAB>`: git's bash completion calls _git_brat with its own `words` and `cword` (and
# `__git_cmd_idx`, where the subcommand is, and `__git_C_args` for `git -C DIR`).
_BASH_GIT = r"""
# `git %(sub)s <TAB>`: git's own completion calls this function.
_git_%(func)s() {
    local IFS=$'\n' response completion type value
    local i=${__git_cmd_idx:-1}
    response=$(COMP_WORDS="${words[*]:i}" COMP_CWORD=$((cword - i)) \
        %(complete_var)s=bash_complete git ${__git_C_args:+"${__git_C_args[@]}"} %(sub)s 2>/dev/null)
    for completion in $response; do
        IFS=',' read -r type value <<< "$completion"
        case $type in
            dir) COMPREPLY=(); compopt -o dirnames 2>/dev/null ;;
            file) COMPREPLY=(); compopt -o default 2>/dev/null ;;
            plain) COMPREPLY+=("$value ") ;;
        esac
    done
    return 0
}
"""

# zsh's own git completion calls _git-brat for `git brat <TAB>`; its words start at `brat`.
_ZSH_GIT = r"""
# `git %(sub)s <TAB>`: zsh's git completion calls _%(prog)s.
(( $+functions[_%(prog)s] )) || _%(prog)s() { %(complete_func)s "$@"; }
"""

# Our own fish script and protocol (one "type,value<TAB>help" line per candidate): click's own
# fish output differs between click versions.
_FISH = r"""function %(complete_func)s
    set -l response (env %(complete_var)s=fish_complete COMP_WORDS=(commandline -cp) \
COMP_CWORD=(commandline -t) %(prog_name)s 2>/dev/null)
    for completion in $response
        set -l metadata (string split -m 1 ',' -- $completion)
        switch $metadata[1]
            case dir
                __fish_complete_directories $metadata[2]
            case file
                __fish_complete_path $metadata[2]
            case plain
                echo $metadata[2]
        end
    end
end

complete --no-files --command %(prog_name)s --arguments "(%(complete_func)s)"

# `git SUBCOMMAND <TAB>` (%(prog_name)s without the "git-"): the first word after git's own
# options names it; what follows goes to %(prog_name)s's completion.
function %(complete_func)s_git_args
    set -l words (commandline -opc)
    set -e words[1]
    while set -q words[1]
        switch $words[1]
            case -C -c --git-dir --work-tree --namespace --exec-path
                set -e words[1..2]
            case '-*'
                set -e words[1]
            case '*'
                test "git-$words[1]" = %(prog_name)s; or return 1
                set -e words[1]
                string join ' ' -- (string escape -- $words)
                return 0
        end
    end
    return 1
end

function %(complete_func)s_git
    set -l args (%(complete_func)s_git_args)
    complete -C "%(prog_name)s $args "(commandline -ct)
end

complete --no-files --command git --condition %(complete_func)s_git_args \
    --arguments "(%(complete_func)s_git)"
"""


class _Ids:
    """Attach the id completers when completing, so commands registered later get them too."""

    def get_completions(self, args, incomplete):
        attach(self.cli, IDS.get(self.prog_name, {}))
        return super().get_completions(args, incomplete)


class _Bash(_Ids, BashComplete):
    pass


class _Zsh(_Ids, ZshComplete):
    pass


class _Fish(_Ids, FishComplete):
    source_template = _FISH

    def format_completion(self, item: CompletionItem) -> str:
        value = item.value.replace("\n", " ")
        help_ = (item.help or "").replace("\n", " ").replace("\t", " ")
        return f"{item.type},{value}\t{help_}" if help_ else f"{item.type},{value}"


def script(group: click.Group, prog: str, shell: str) -> str:
    """The completion script of `prog` ("git-brat") for `shell`."""
    from click.shell_completion import get_completion_class
    var = f"_{prog.replace('-', '_').upper()}_COMPLETE"
    comp = get_completion_class(shell)(group, {}, prog, var)
    fill = {"prog": prog, "sub": prog.split("-", 1)[1], "func": prog.split("-", 1)[1],
            "complete_var": var, "complete_func": comp.func_name}
    extra = {"bash": _BASH_GIT, "zsh": _ZSH_GIT}.get(shell, "")
    return comp.source().rstrip("\n") + "\n" + (extra % fill if extra else "")


def _quietly(items):
    """Run items() with stderr swallowed; any failure completes nothing."""
    try:
        with contextlib.redirect_stderr(io.StringIO()):
            return list(items())
    except Exception:   # completion must never fail, whatever state the repository is in
        return []


def _completer(source):
    def complete(ctx, param, incomplete):
        prefix = incomplete.lstrip("#").lower()
        return [CompletionItem(i, help=h) for i, h in _quietly(source) if i.startswith(prefix)]
    return complete


# Which parameters complete which ids, by program, then parameter name or metavar. Each CLI
# fills its own (its `completion` module): ids come from the layers above this one.
IDS: dict[str, dict[str, Callable[[], Iterable[tuple[str, str]]]]] = {}


def register_ids(prog: str, sources: dict[str, Callable[[], Iterable[tuple[str, str]]]]) -> None:
    """Complete the parameters named in sources (by name or metavar) of `prog` with those ids."""
    IDS.setdefault(prog, {}).update(sources)


def attach(group: click.Group, ids: dict) -> None:
    """Give every parameter named in ids (by name or metavar) an id completer, unless it has one."""
    seen = set()

    def walk(cmd):
        if id(cmd) in seen:
            return
        seen.add(id(cmd))
        getattr(cmd, "load_all", lambda: None)()   # a lazy group: its commands are modules
        for param in cmd.params:
            source = ids.get(param.name) or ids.get(getattr(param, "metavar", None) or "")
            if source and getattr(param, "_custom_shell_complete", None) is None:
                param._custom_shell_complete = _completer(source)
        for sub in getattr(cmd, "commands", {}).values():
            walk(sub)
    walk(group)


def command(prog: str) -> click.Command:
    """The `completion SHELL` command of `prog`."""
    sub = prog.split("-", 1)[1]

    @click.command("completion")
    @click.argument("shell", type=click.Choice(SHELLS))
    @click.pass_context
    def completion(ctx, shell):
        click.echo(script(ctx.find_root().command, prog, shell), nl=False)
    completion.help = (f"Print the {sub} completion script for bash, zsh or fish.\n\n"
                       f"bash: `source <(git {sub} completion bash)` in ~/.bashrc (`git {sub} "
                       f"<TAB>` completes too, through git's completion); zsh: `source <(git {sub} "
                       f"completion zsh)` after compinit; fish: `git {sub} completion fish | "
                       f"source` in config.fish.")
    return completion


for _cls in (_Bash, _Zsh, _Fish):
    add_completion_class(_cls, _cls.name)
