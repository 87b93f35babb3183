"""The `hansa` command tree keeps its conventions: every command that reports something has
`--json`; one concept has one option name everywhere (and one name means one concept); old
spellings the README once taught still work, hidden and announced as deprecated.

Walks the real click tree (lazy subcommands included), so a new command is held to it at once."""
from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Iterator

import click
import pytest
from click.testing import CliRunner

from hansa.cli import main
from hansa.cli.options import ALIAS_PREFIX

# Commands that report nothing a script could read: they run a server until stopped.
NO_REPORT = {"site serve", "gateway serve"}
# Old spellings kept as hidden aliases (the README used them): command -> {old: new}.
DEPRECATED = {
    "site join-request": {"--gateway-url": "--gateway"},
    "gateway federation init": {"--gateway-url": "--gateway"},
    "site uninstall": {"--keys": "--delete-keys"},
}
# Spellings that name a concept which already has its name (left: never visible; right: the name).
SYNONYMS = {"--gateway-url": "--gateway", "--output": "--out", "--format": "--json", "--num-workers": "--workers",
            "--config-file": "--config", "--site-url": "--url", "--site_id": "--site-id"}


def commands() -> Iterator[tuple[str, click.Command]]:
    ctx = click.Context(main)

    def walk(cmd: click.Command, path: tuple[str, ...]) -> Iterator[tuple[str, click.Command]]:
        yield " ".join(path), cmd
        if isinstance(cmd, click.Group):
            for name in cmd.list_commands(ctx):
                yield from walk(cmd.get_command(ctx, name), (*path, name))

    yield from walk(main, ())


def leaves() -> list[tuple[str, click.Command]]:
    return [(path, cmd) for path, cmd in commands() if not isinstance(cmd, click.Group)]


def options(cmd: click.Command) -> list[click.Option]:
    return [p for p in cmd.params if isinstance(p, click.Option)]


def test_the_walk_sees_the_whole_tree() -> None:
    paths = {path for path, _ in leaves()}
    assert {"query", "site doctor", "site ingest", "gateway sites", "gateway api-key list", "gateway router show",
            "gateway federation init", "demo", "eval"} <= paths
    assert len(paths) >= 34


@pytest.mark.parametrize("path,cmd", leaves(), ids=[p for p, _ in leaves()])
def test_every_reporting_command_has_json(path: str, cmd: click.Command) -> None:
    found = [o for o in options(cmd) if "--json" in o.opts]
    if path in NO_REPORT:
        assert not found, f"{path} is listed as reporting nothing but has --json"
        return
    assert found, f"`hansa {path}` reports something but has no --json"
    (json_opt,) = found
    assert json_opt.is_flag and json_opt.name == "as_json" and not json_opt.hidden


def test_one_concept_one_name_and_one_name_one_concept() -> None:
    spellings: dict[str, set[str]] = defaultdict(set)  # dest -> visible option names
    meanings: dict[str, set[str]] = defaultdict(set)  # option name -> dests
    where: dict[str, set[str]] = defaultdict(set)
    for path, cmd in commands():
        for opt in options(cmd):
            if opt.hidden:
                continue
            long_names = [o for o in opt.opts if o.startswith("--")]
            spellings[opt.name].add(" ".join(long_names))
            for name in (*opt.opts, *opt.secondary_opts):
                meanings[name].add(opt.name)
                where[name].add(path or "hansa")
    two_names = {dest: names for dest, names in spellings.items() if len(names) > 1}
    assert not two_names, f"one concept, several option names: {two_names}"
    two_meanings = {name: dests for name, dests in meanings.items() if len(dests) > 1}
    assert not two_meanings, f"one option name, several concepts: {two_meanings}"
    used_synonyms = {s: sorted(where[s]) for s in SYNONYMS if s in meanings}
    assert not used_synonyms, f"use the established names {SYNONYMS}: {used_synonyms}"


def test_hidden_options_are_exactly_the_deprecated_aliases() -> None:
    found: dict[str, dict[str, str]] = {}
    for path, cmd in leaves():
        for opt in options(cmd):
            if not opt.hidden:
                continue
            assert opt.name.startswith(ALIAS_PREFIX), f"{path}: hidden option {opt.opts} is not a deprecated alias"
            target = opt.name[len(ALIAS_PREFIX):]
            (new,) = [o for o in options(cmd) if o.name == target and not o.hidden]
            found.setdefault(path, {})[opt.opts[0]] = next(n for n in new.opts if n.startswith("--"))
    assert found == DEPRECATED


def test_an_old_spelling_still_works_and_says_so(tmp_path: Path) -> None:
    from hansa.core.config import Config
    from hansa.sync.keys import SiteIdentity

    home = tmp_path / "site"
    SiteIdentity.generate().save(Config(home=home).keys_dir)
    env = {"HANSA_SITE_SITE_ID": "site-a", "HANSA_CONFIG": None, "HANSA_SITE_GATEWAY_URL": None}
    out = tmp_path / "join.json"
    res = CliRunner().invoke(main, ["--home", str(home), "site", "join-request", "--gateway-url", "https://gw.example",
                                    "--out", str(out), "--json"], env=env)
    assert res.exit_code == 0, res.output
    assert "--gateway-url is deprecated; use --gateway" in res.stderr
    import json

    assert json.loads(res.stdout)["gateway_url"] == "https://gw.example"
    both = CliRunner().invoke(main, ["--home", str(home), "site", "join-request", "--gateway-url", "https://a.example",
                                     "--gateway", "https://b.example", "--out", str(tmp_path / "x.json")], env=env)
    assert both.exit_code == 2 and "give only --gateway" in both.output


def test_an_old_flag_spelling_still_works(tmp_path: Path) -> None:
    env = {"HANSA_SITE_SITE_ID": "site-a", "HANSA_CONFIG": None}
    home = tmp_path / "home"
    assert CliRunner().invoke(main, ["--home", str(home), "site", "install"], env=env).exit_code == 0
    res = CliRunner().invoke(main, ["--home", str(home), "site", "uninstall", "--yes", "--keys", "--json"], env=env)
    assert res.exit_code == 0, res.output
    assert "--keys is deprecated; use --delete-keys" in res.stderr
    import json

    assert json.loads(res.stdout)["site_id"] == "site-a"
    assert not (home / "keys" / "site-ed25519.pem").exists()


def test_the_site_id_is_an_option_too(tmp_path: Path) -> None:
    import json

    res = CliRunner().invoke(main, ["--home", str(tmp_path), "site", "--site-id", "from-option", "status", "--json"],
                             env={"HANSA_SITE_SITE_ID": "from-env", "HANSA_CONFIG": None})
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["site_id"] == "from-option"
