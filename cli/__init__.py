"""The `hansa` command: `hansa site ...` for a database admin, `hansa gateway ...` for the
federation operator, `hansa demo` to see a whole federation run on this machine.

Subcommands load lazily: `hansa --help` must not pay for importing torch or a database driver.
"""
from __future__ import annotations

import importlib
from pathlib import Path

import click

from hansa.core import logs
from hansa.core.config import load_config
from hansa.core.errors import HansaError

# name -> "module:attribute" of a click command or group
SUBCOMMANDS = {
    "site": ("hansa.cli.site:site", "Run a site: install into Neo4j/Milvus, ingest, build communities, publish, serve."),
    "gateway": ("hansa.cli.gateway:gateway", "Run the federation gateway: enroll sites, verify publications, route queries."),
    "demo": ("hansa.cli.demo:demo", "Run a 3-site federation on this machine with no server and ask it questions."),
    "query": ("hansa.cli.query:query", "Ask the federation a question through its gateway (an API key's client)."),
    "embedder": ("hansa.cli.embedder:embedder", "List, fetch and verify the embedding models of the catalog."),
    "eval": ("hansa.cli.evaluate:evaluate", "Measure routing, evidence, answers, abstention and cost on MTRAG or SQuAD."),
}


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(SUBCOMMANDS)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in SUBCOMMANDS:
            return None
        target, _ = SUBCOMMANDS[name]
        module, attr = target.split(":")
        try:
            return getattr(importlib.import_module(module), attr)
        except ModuleNotFoundError as exc:  # pragma: no cover - packaging error, not user error
            raise click.ClickException(f"hansa {name} is not available in this install: {exc}") from exc

    def invoke(self, ctx: click.Context) -> object:
        """With --log-json, a command's refusal is a JSON event too (click would print "Error: ...")."""
        try:
            return super().invoke(ctx)
        except click.ClickException as exc:
            if not logs.json_mode():
                raise
            logs.get_logger("hansa.cli").error("command.failed", error=exc.format_message(), exit_code=exc.exit_code)
            ctx.exit(exc.exit_code)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        with formatter.section("Commands"):
            formatter.write_dl([(name, SUBCOMMANDS[name][1]) for name in self.list_commands(ctx)])


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--config", "config_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              envvar="HANSA_CONFIG", help="TOML config file (default: $HANSA_HOME/hansa.toml if present).")
@click.option("--home", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Local state directory: keys, embedded graph, Milvus Lite data (env HANSA_HOME, default ~/.hansa).")
@click.option("--log-level", default="info", show_default=True,
              type=click.Choice(["debug", "info", "warning", "error"]), help="Log verbosity (logs go to stderr).")
@click.option("--log-json", is_flag=True, help="Structured JSON log lines, for log shippers.")
@click.version_option(package_name="hansa")
@click.pass_context
def main(ctx: click.Context, config_path: Path | None, home: Path | None, log_level: str, log_json: bool) -> None:
    """hansa: a federated data plane for Graph-RAG.

    Each organization (a *site*) keeps its documents in its own Neo4j (or the embedded store) and
    Milvus, and publishes only signed community-summary embeddings. The *gateway* routes each
    question to the sites likely to answer it and fuses their cited partial answers.

    \b
    Try it on this machine, no server needed:
        hansa demo
    Run a site (in order):
        hansa site install && hansa site ingest ./docs && hansa site communities
        hansa site publish --gateway http://gateway:8700 && hansa site serve
    Check a site: hansa site doctor
    Ask the federation (a client with an API key):
        hansa query "..." --gateway http://gateway:8700 --api-key KEY
    Run the gateway:
        hansa gateway enroll --site-id acme --url http://acme:8701 --public-key @acme.pub
        hansa gateway serve

    Every setting comes from a TOML file with HANSA_<SECTION>_<KEY> environment overrides,
    e.g. HANSA_GRAPH_BACKEND=neo4j HANSA_NEO4J_URI=bolt://db:7687 HANSA_MILVUS_URI=http://milvus:19530.
    """
    logs.configure(log_level, as_json=log_json)
    import os

    env = dict(os.environ)
    if home is not None:
        env["HANSA_HOME"] = str(home)
    try:
        ctx.obj = {"config": load_config(config_path, env=env)}
    except HansaError as exc:  # each subcommand refuses with it (hansa.cli.context); `site doctor` reports it
        ctx.obj = {"config": None, "config_error": str(exc)}
