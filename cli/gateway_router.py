"""`hansa gateway router ...`: the learned router's model (gateway/query/learned/).

`train` fits a new model from the outcome log the gateway writes under `<home>/gateway/router/`
and replaces `model.json` atomically; a running gateway with `[gateway] router = "learned"` picks
it up at its next query. `show` prints the current model (or why routing falls back).
"""
from __future__ import annotations

from pathlib import Path

import click

from hansa.cli.options import json_option, print_json
from hansa.cli.context import friendly, gateway_home, root_config


def _show(summary: dict, as_json: bool) -> None:
    """A model summary as JSON (--json) or as `key: value` lines."""
    if as_json:
        print_json(summary)
        return
    for key, value in summary.items():
        click.echo(f"{key}: {value}")


@click.group("router")
def router() -> None:
    """Train and inspect the learned router (used when [gateway] router = "learned")."""


@router.command()
@click.option("--rows", "rows_path", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              help="Train on labelled fit-split rows instead of the outcome log: the `router` rows `hansa eval "
                   "--split fit --calibration-rows` writes (every ranked site, labelled by the gold sites).")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Where to write the model (default: the gateway's router/model.json, which a serving gateway "
                   "picks up at its next query).")
@click.option("--target-recall", type=float, default=None,
              help="Per-question recall of contributing sites the threshold must reach (default: [gateway] router_target_recall).")
@click.option("--l2", type=float, default=1.0, show_default=True, help="L2 penalty of the logistic regression.")
@click.option("--min-questions", type=int, default=20, show_default=True, help="Refuse to train on fewer logged questions.")
@json_option()
@click.pass_context
@friendly
def train(ctx: click.Context, rows_path: Path | None, out: Path | None, target_recall: float | None, l2: float,
          min_questions: int, as_json: bool) -> None:
    """Retrain from the gateway's outcome log (or from labelled rows, --rows); print the new
    model's version and data digest."""
    from hansa.gateway.query.learned.router import MODEL_FILE, router_dir
    from hansa.gateway.query.learned.train import summary, train_from_rows, train_router

    cfg = root_config(ctx)
    target = cfg.gateway.router_target_recall if target_recall is None else target_recall
    if not 0 < target <= 1 or l2 < 0:
        raise click.BadParameter("--target-recall must be in (0, 1] and --l2 >= 0")
    home = router_dir(gateway_home(cfg))
    if rows_path is not None:
        from hansa.gateway.query.calibrate import read_rows

        model = train_from_rows(read_rows(rows_path), target_recall=target, l2=l2, min_questions=min_questions)
        path = model.save(out or home / MODEL_FILE)
        _show(summary(model, path), as_json)
        return
    if out is not None:
        raise click.UsageError("--out goes with --rows: a model trained on the log replaces the gateway's own")
    try:
        model, path = train_router(home, target_recall=target, l2=l2,
                                   min_questions=min_questions, max_records=cfg.gateway.router_log_max_records)
    except ValueError as exc:
        raise click.ClickException(str(exc)) from exc
    _show(summary(model, path), as_json)


@router.command()
@json_option()
@click.pass_context
@friendly
def show(ctx: click.Context, as_json: bool) -> None:
    """Print the current model, or say why routing falls back to summary matching."""
    from hansa.gateway.query.learned.model import load_model
    from hansa.gateway.query.learned.router import MODEL_FILE, router_dir
    from hansa.gateway.query.learned.train import summary

    path = router_dir(gateway_home(root_config(ctx))) / MODEL_FILE
    model = load_model(path)
    if model is None:
        if as_json:
            print_json({"model": None, "path": str(path), "routing": "summary matching (no usable model)"})
        else:
            click.echo(f"no usable model at {path}: routing falls back to summary matching")
        return
    _show(summary(model, path), as_json)
