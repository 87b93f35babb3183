"""`hansa eval`: what users get from a federation — routing, evidence, answers, abstention, cost —
every strategy side by side on the same sites in one run (the work is in hansa.evaluation)."""
from __future__ import annotations

import json
import os
from pathlib import Path

import click

from hansa.cli.context import friendly
from hansa.cli.options import json_option, print_json
from hansa.core.errors import HansaError
from hansa.evaluation.datasets import DATASETS, resolve_data_dir
from hansa.evaluation.runner import QUESTION_SOURCES, STRATEGIES, EvalSettings
from hansa.evaluation.split import SPLITS

# --smoke: seconds-long, for CI: a few questions over a few passages per domain, 4 sites + central.
SMOKE = {"federations": (4,), "limit": 6, "limit_unanswerable": 2, "max_passages": 12, "workers": 2}


def _sizes(text: str) -> tuple[int, ...]:
    try:
        sizes = tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise click.BadParameter(f"{text!r} is not a comma-separated list of site counts", param_hint="--sites") from None
    if not sizes or min(sizes) < 1:
        raise click.BadParameter("give at least one federation size >= 1", param_hint="--sites")
    return sizes


def _settings(section: str, items: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    """--site-setting / --gateway-setting KEY=VALUE pairs, each key checked against its section."""
    from hansa.evaluation.runner import setting_env

    pairs = []
    for item in items:
        key, eq, value = item.partition("=")
        if not eq or not key.strip():
            raise click.UsageError(f"--{section}-setting takes KEY=VALUE, not {item!r}")
        pairs.append((key.strip(), value.strip()))
    try:
        setting_env(section, pairs)
    except HansaError as exc:
        raise click.UsageError(str(exc)) from exc
    return tuple(pairs)


def _budgets(items: tuple[str, ...]) -> tuple[tuple[str, int], ...]:
    """--budget KEY=N,N,... as budget points, each checked as the gateway checks a request's budget."""
    from hansa.evaluation.runner import budget_strategies

    points = []
    for item in items:
        key, eq, values = item.partition("=")
        try:
            points += [(key.strip(), int(v)) for v in values.split(",") if v.strip()]
        except ValueError:
            raise click.BadParameter(f"{item!r}: values must be whole numbers", param_hint="--budget") from None
        if not eq or not values.strip():
            raise click.BadParameter(f"expected KEY=N,N,... such as sites=2,4, got {item!r}", param_hint="--budget")
    try:
        budget_strategies(points)
    except HansaError as exc:
        raise click.BadParameter(str(exc), param_hint="--budget") from exc
    return tuple(points)


@click.command("eval")
@click.option("--dataset", type=click.Choice(DATASETS), default="mtrag", show_default=True)
@click.option("--data", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="The dataset folder (else $HANSA_EVAL_DATA: that folder, or one holding mtrag/ and squad/).")
@click.option("--sites", "federations", default="", help="Federation sizes, e.g. 16,64 (default: mtrag 4,16; squad 16,64).")
@click.option("--split", type=click.Choice(SPLITS), default="report", show_default=True,
              help="Questions of the fixed hash split (hansa.evaluation.split): tune on fit, report on report.")
@click.option("--limit", type=int, default=0, help="At most N answerable questions, a stable hash sample (0: all).")
@click.option("--limit-unanswerable", type=int, default=0, help="At most N unanswerable questions (0: all, -1: none).")
@click.option("--out-of-scope", type=int, default=0,
              help="Also ask N questions of the other dataset (SQuAD's of an MTRAG federation, MTRAG's non-Wikipedia "
                   "ones of a SQuAD one), which no site holds: reported as abstain_out_of_scope only. The other "
                   "dataset is read beside --data.")
@click.option("--strategies", default=",".join(STRATEGIES), show_default=True)
@click.option("--top-k-sites", type=int, default=0,
              help="At most this many sites for hansa and full-information routing (0: [gateway] top_k_sites).")
@click.option("--conversation", is_flag=True,
              help="Ask MTRAG-UN questions as the last turn with the earlier turns as the conversation (the gateway "
                   "routes a standalone question); the JSON adds routing curves per way of asking a follow-up.")
@click.option("--routing-only", is_flag=True,
              help="Only the routing curves: no site is asked (cheap routing studies); with --calibration-rows, "
                   "only the tiers and router rows, which call no site.")
@click.option("--llm", "use_llm", is_flag=True,
              help="Synthesize answers with the configured [llm] endpoint (HANSA_LLM_BASE_URL) and score them beside "
                   "the extractive answers of the same queries.")
@click.option("--max-passages", type=int, default=0,
              help="At most N passages per domain (SQuAD: in all), the asked questions' gold passages kept (0: all).")
@click.option("--max-documents", type=int, default=0,
              help="Only N whole documents (a stable hash sample, all their passages) and the questions on them (0: all); "
                   "with --question-source dev|train, every document those questions were written on is kept first.")
@click.option("--question-source", type=click.Choice(QUESTION_SOURCES), default="all", show_default=True,
              help="SQuAD: only dev or only train questions (all-MiniLM-L6-v2 was trained on the train ones, "
                   "so report headline figures on dev); each record says which it holds.")
@click.option("--workers", type=int, default=4, show_default=True, help="Questions asked concurrently.")
@click.option("--site-timeout", type=float, default=60.0, show_default=True,
              help="Seconds the gateway waits for a site (shared machines are slow; failures are counted).")
@click.option("--cache", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Site and embedding cache: reuse built sites (default $HANSA_EVAL_CACHE or ~/.cache/hansa/eval).")
@click.option("--site-setting", "site_settings", multiple=True, metavar="KEY=VALUE",
              help="Build every site with this [site] setting (repeatable), e.g. chunks_per_summary=32: "
                   "a sweep; each value is its own cached build.")
@click.option("--gateway-setting", "gateway_settings", multiple=True, metavar="KEY=VALUE",
              help="Run the gateway with this [gateway] setting (repeatable), e.g. lexical_weight=2: a sweep of "
                   "how it routes; the sites are reused as built.")
@click.option("--embedder-setting", "embedder_settings", multiple=True, metavar="KEY=VALUE",
              help="Run every site and the gateway with this [embedder] setting (repeatable), e.g. "
                   "model=bge-small-en-v1.5-q: one federation, one embedder; the gateway's site_margin and "
                   "lexical_weight default to the model's (adapters/embedder/scales.toml).")
@click.option("--calibration", type=click.Path(dir_okay=False, exists=True, path_type=Path), default=None,
              help="The gate's and abstention's calibration for the gateway (from `hansa gateway calibrate --out`); "
                   "without it the gateway's safe defaults (always escalate, abstain by rule).")
@click.option("--calibration-rows", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="With --split fit: also write each federation's gate, abstain, escalate, tiers and router rows "
                   "to ROWS_fed<N>.jsonl, for `hansa gateway calibrate --data` (router rows: `hansa gateway router "
                   "train --rows`).")
@click.option("--calibration-kinds", default="", metavar="KIND,...",
              help="With --calibration-rows: only these kinds of question rows (gate, escalate, reader, abstain; "
                   "default all). Escalate rows ask up to 16 sites a question: `reader,abstain` fits abstention "
                   "alone at a fraction of the cost.")
@click.option("--share-site-calls", is_flag=True,
              help="Ask each (site, request) pair once per run and give its verified answer, after the time the "
                   "site took, to every strategy asking it again: the same figures in a fraction of the time "
                   "(sites are not re-asked what they already answered; latency under load is then optimistic).")
@click.option("--budget", "budgets", multiple=True, metavar="KEY=N,N,...",
              help="Also ask the refine strategy under each budget point (repeatable), KEY one of sites, time_ms, "
                   "bytes: e.g. --budget sites=2,3,4,6 adds refine[sites=2] ... beside refine; the JSON's "
                   "budget_curve and a _budget.png plot quality against what was spent.")
@click.option("--router-model", type=click.Path(dir_okay=False, exists=True, path_type=Path), default=None,
              help="The learned strategy's model (from `hansa gateway router train --rows` on this federation's fit "
                   "rows); without it the learned strategy has no model and routes by summary matching.")
@click.option("--no-cache", is_flag=True, help="Build every site afresh in the work directory.")
@click.option("--smoke", is_flag=True, help="Seconds-long run for CI: 6+2 questions, 12 passages per domain, 4 sites.")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="JSON report (default benchmarks/eval_<dataset>.json); PNGs are written beside it.")
@click.option("--workdir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Keep gateways (and uncached sites) here (default: a temporary directory).")
@json_option("Print the report written to --out on stdout instead of the table.")
@friendly
def evaluate(dataset: str, data: Path | None, federations: str, split: str, limit: int, limit_unanswerable: int,
             out_of_scope: int, strategies: str, top_k_sites: int, conversation: bool, routing_only: bool, use_llm: bool, max_passages: int,
             max_documents: int, question_source: str, workers: int, site_timeout: float, cache: Path | None, site_settings: tuple[str, ...],
             gateway_settings: tuple[str, ...], embedder_settings: tuple[str, ...], calibration: Path | None, calibration_rows: Path | None, calibration_kinds: str, share_site_calls: bool,
             budgets: tuple[str, ...], router_model: Path | None, no_cache: bool, smoke: bool, out: Path | None, workdir: Path | None, as_json: bool) -> None:
    """Measure a federation on MTRAG or SQuAD: every strategy side by side, one record per
    (dataset, federation, strategy, split) in the JSON, a table on stdout, and PNGs of evidence
    recall against sites called and of gold-site recall against k."""
    from hansa.evaluation import report, runner
    from hansa.evaluation.sitecache import default_cache_dir

    llm_cfg = click.get_current_context().find_root().obj["config"].llm if use_llm else None
    if llm_cfg is not None and not llm_cfg.base_url:
        raise click.UsageError("--llm needs an OpenAI-compatible endpoint: set [llm] base_url or HANSA_LLM_BASE_URL")

    try:
        root = resolve_data_dir(dataset, data)
    except HansaError as exc:
        raise click.UsageError(str(exc)) from exc
    chosen = tuple(s.strip() for s in strategies.split(",") if s.strip())
    pairs, gateway_pairs = _settings("site", site_settings), _settings("gateway", gateway_settings)
    embedder_pairs = _settings("embedder", embedder_settings)
    sizes = _sizes(federations) if federations else ((4, 16) if dataset == "mtrag" else (16, 64))
    settings = EvalSettings(dataset=dataset, data=root, federations=sizes, strategies=chosen, split=split, limit=limit,
                            limit_unanswerable=limit_unanswerable, out_of_scope=out_of_scope, max_passages=max_passages, max_documents=max_documents, top_k_sites=top_k_sites,
                            question_source=question_source,
                            conversation=conversation, routing_only=routing_only,
                            llm_base_url=llm_cfg.base_url if llm_cfg else "", llm_model=llm_cfg.model if llm_cfg else "",
                            llm_api_key=llm_cfg.api_key if llm_cfg else "",
                            workers=workers, site_timeout_s=site_timeout,
                            cache=None if no_cache else (cache or default_cache_dir(os.environ)), workdir=workdir,
                            site_settings=pairs, gateway_settings=gateway_pairs, embedder_settings=embedder_pairs, calibration=calibration, calibration_rows=calibration_rows,
                            calibration_kinds=tuple(k.strip() for k in calibration_kinds.split(",") if k.strip()),
                            share_site_calls=share_site_calls, budgets=_budgets(budgets),
                            router_model=router_model)
    if smoke:
        settings = EvalSettings(**{**vars(settings), **SMOKE, **({"federations": sizes} if federations else {})})
    out = out or Path("benchmarks") / f"eval_{dataset}.json"
    say = lambda m: click.echo(m, err=True)  # noqa: E731
    result = runner.run(settings, say)
    doc = report.document(result, settings)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    title = f"{dataset} ({split} split, {doc['questions']['total']} questions)"
    report.plot_tradeoff(doc["records"], title, doc["caveat"], out.with_suffix(".png"))
    report.plot_routing_curves(doc["federations"], dataset, out.with_name(out.stem + "_routing.png"))
    if doc.get("budget_curve"):
        report.plot_budget_curve(doc["budget_curve"], title, out.with_name(out.stem + "_budget.png"))
    if as_json:
        print_json(doc)
        return
    click.echo(report.table(doc["records"]))
    click.echo(doc["caveat"])
    click.echo(f"wrote {out}, {out.with_suffix('.png')} and {out.with_name(out.stem + '_routing.png')}")
