"""The options every `hansa` command spells the same way, and how an old spelling stays accepted.

Why one module: the same concept must have one name across `hansa site`, `hansa gateway` and
`hansa query` (an admin who learnt `--gateway` on `publish` must not meet `--gateway-url`
elsewhere); tests/cli/test_option_conventions.py walks the command tree and holds them to it.
"""
from __future__ import annotations

import functools
import json
from typing import Any, Callable, TypeVar

import click

from hansa.core import logs

F = TypeVar("F", bound=Callable[..., Any])

ALIAS_PREFIX = "_deprecated_"


def json_option(help: str = "Print the result as JSON on stdout (nothing else goes to stdout).") -> Callable[[F], F]:
    return click.option("--json", "as_json", is_flag=True, help=help)


def gateway_option(help: str = "Gateway base URL (default: [site] gateway_url).") -> Callable[[F], F]:
    return click.option("--gateway", "gateway_url", default=None, metavar="URL", help=help)


def print_json(obj: Any) -> None:
    click.echo(json.dumps(obj, indent=2, ensure_ascii=False, default=str))


def deprecated_alias(old: str, dest: str, new: str, *, flag: bool = False, type: Any = None) -> Callable[[F], F]:
    """Accept `old` (hidden from --help) as a deprecated spelling of the option stored in `dest`
    (spelled `new` now): its value moves to `dest` with a note on stderr; giving both is an error.

    Written here rather than with click's own `deprecated=`: that marks an option, not a second
    spelling of one (two options sharing a dest would race for the value)."""

    def decorate(fn: F) -> F:
        hidden = ALIAS_PREFIX + dest

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            value = kwargs.pop(hidden, None)
            if value not in (None, False):
                if kwargs.get(dest) not in (None, False, value):
                    raise click.UsageError(f"{old} is the old spelling of {new}: give only {new}")
                logs.notice(f"note: {old} is deprecated; use {new}", "option.deprecated", "warning")
                kwargs[dest] = value
            return fn(*args, **kwargs)

        if flag:
            option = click.option(old, hidden, is_flag=True, default=False, hidden=True)
        else:
            option = click.option(old, hidden, default=None, type=type, hidden=True, metavar="VALUE")
        return option(wrapper)  # type: ignore[return-value]

    return decorate
