"""`--help` texts must match the commands: an option's help that names another option (`--publish`,
`--gateway`) must name one the same command has. Issue 34: `hansa site doctor --help` described
`--gateway` as the gateway "for --publish", an option doctor never had."""
from __future__ import annotations

import re
from typing import Iterator

import click

from hansa.cli import SUBCOMMANDS, main

_OPTION = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")
# "hansa gateway calibrate --data" in a help text: options of that command, up to a `, ), ; or ". "
_REFERENCE = re.compile(r"hansa((?: [a-z][a-z-]*)+?)((?: [^`);]*?)?)(?=`|\)|;|\. |\.?$)")


def _commands(group: click.Group, ctx: click.Context, path: str) -> Iterator[tuple[str, click.Command]]:
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        assert command is not None, f"{path} {name}"
        yield f"{path} {name}", command
        if isinstance(command, click.Group):
            yield from _commands(command, click.Context(command, parent=ctx, info_name=name), f"{path} {name}")


def _options(command: click.Command) -> set[str]:
    return {opt for p in command.params for opt in [*getattr(p, "opts", []), *getattr(p, "secondary_opts", [])]}


def _mentions(text: str, path: str, commands: dict[str, click.Command]) -> Iterator[tuple[str, str]]:
    """(command path, option) for each option the text names: its own command's, or, after
    `hansa <command>`, that command's (the longest path that is a command)."""
    text = " ".join(text.split())
    rest = text
    for ref in _REFERENCE.finditer(text):
        words = ("hansa" + ref.group(1) + ref.group(2)).split()
        target = max((" ".join(words[:n]) for n in range(1, len(words) + 1) if " ".join(words[:n]) in commands), key=len)
        for named in _OPTION.findall(ref.group(0)):
            yield target, named
        rest = rest.replace(ref.group(0), " ")
    for named in _OPTION.findall(rest):
        yield path, named


def test_every_option_named_in_an_option_help_belongs_to_the_command_it_names() -> None:
    root = click.Context(main, info_name="hansa")
    commands = dict(_commands(main, root, "hansa"))
    commands["hansa"] = main
    assert len(commands) > len(SUBCOMMANDS) + 1  # the walk reached the subcommands' own commands
    wrong = []
    for path, command in commands.items():
        for param in command.params:
            for target, named in _mentions(getattr(param, "help", None) or "", path, commands):
                if named not in _options(commands[target]) | _options(main) | {"--help"}:
                    wrong.append(f"`{path}` {param.opts[0]}: its help names {named}, which `{target}` does not have")
    assert not wrong, "\n".join(wrong)
