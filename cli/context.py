"""The configuration the root `hansa` command loaded, for every subcommand.

Why the root keeps a load error instead of exiting: `hansa site doctor` must report a broken
configuration as one of its checks; every command that reads the configuration refuses to run with
the same message (`demo` and `eval` build their own and do not read it).
"""
from __future__ import annotations

import functools
from pathlib import Path
from typing import Any, Callable, TypeVar

import click

from hansa.core.config import Config, load_config
from hansa.core.errors import HansaError


def root_config(ctx: click.Context | None = None, *, required: bool = True) -> Config | None:
    """The root's Config (loaded from the environment when a subcommand runs alone). A load error
    is a ClickException unless `required` is False (then None; `config_error` says why)."""
    root = (ctx or click.get_current_context()).find_root()
    obj: Any = root.obj
    if not isinstance(obj, dict) or ("config" not in obj and "config_error" not in obj):
        try:
            obj = {"config": load_config()}
        except HansaError as exc:
            obj = {"config": None, "config_error": str(exc)}
        root.obj = obj
    if obj.get("config") is None and required:
        raise click.ClickException(obj.get("config_error") or "no configuration loaded")
    return obj.get("config")


F = TypeVar("F", bound=Callable[..., Any])


def friendly(fn: F) -> F:
    """A HansaError is a message for the operator, not a traceback."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except HansaError as exc:
            raise click.ClickException(str(exc)) from exc

    return wrapper  # type: ignore[return-value]


def gateway_home(cfg: Config) -> Path:
    """Where a gateway keeps its state (registry, keys, learned records): `<home>/gateway`."""
    return cfg.home / "gateway"


def config_error(ctx: click.Context | None = None) -> str | None:
    root_config(ctx, required=False)
    return (ctx or click.get_current_context()).find_root().obj.get("config_error")
