"""`hansa demo`: a three-site federation on this machine, no server to install.

Each site gets its own home (embedded graph store + Milvus Lite), is installed, ingests its share
of a bundled MTRAG sample, builds Leiden communities and summaries, and serves its API on
loopback; the gateway enrolls the sites' public keys, verifies their signed publications, and
answers questions by routing to the sites — all over real HTTP, so the trace shows real bytes.
"""
from __future__ import annotations

import json
import sys
import tempfile
import time
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Callable

import click

from hansa.cli.context import friendly
from hansa.core.errors import HansaError
from hansa.core.text import content_words
from hansa.federation.local import LocalFederation
from hansa.plugin.retrieval import answer_sentences


@dataclass
class DemoResult:
    workdir: Path
    setup_seconds: float
    sites: dict[str, dict[str, Any]]
    answers: list[dict[str, Any]] = field(default_factory=list)


def bundled_sample() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    data = resources.files("hansa.cli") / "data"
    passages = [json.loads(l) for l in (data / "demo_passages.jsonl").read_text(encoding="utf-8").splitlines()]
    questions = [json.loads(l) for l in (data / "demo_questions.jsonl").read_text(encoding="utf-8").splitlines()]
    return passages, questions


def run_demo(
    workdir: Path,
    passages: list[dict[str, Any]],
    questions: list[dict[str, Any]],
    progress: Callable[[str], None] = lambda msg: None,
    gateway_tap: Callable[[Any], Any] | None = None,
) -> DemoResult:
    """Build the federation under `workdir`, ask every question over HTTP, tear everything down.

    `gateway_tap` wraps the gateway's WSGI app (tests use it to record every byte the gateway
    receives, to prove that no chunk text crosses the boundary)."""
    texts = {p["id"]: p["text"] for p in passages}
    by_site: dict[str, list[dict[str, Any]]] = {}
    for p in passages:
        by_site.setdefault(p["site"], []).append(p)
    with LocalFederation(workdir, by_site, progress=progress, gateway_tap=gateway_tap) as fed:
        result = DemoResult(workdir, fed.setup_seconds, {s: h.info for s, h in fed.sites.items()})
        for q in questions:
            progress(f"ask: {q['question']}")
            started = time.perf_counter()
            resp = fed.query({"question": q["question"]}, timeout=60)
            elapsed_ms = (time.perf_counter() - started) * 1000
            body = resp.json()
            if resp.status_code != 200:
                raise HansaError(f"gateway answered {resp.status_code}: {body}")
            cited_sites = {c["site_id"] for c in body.get("citations", [])}
            cited_docs = {c["doc_id"] for c in body.get("citations", [])}
            result.answers.append({
                "question": q["question"],
                # a question the sample holds no answer to: the gateway should say so, not guess
                "answerable": q.get("answerable", True),
                "gold_site": q.get("site"),
                "gold_site_cited": q.get("site") in cited_sites,
                "gold_passages_cited": sorted(set(q.get("gold", [])) & cited_docs),
                "answer_check": answer_check(body.get("answer", ""), q["question"],
                                             [texts[g] for g in q.get("gold", []) if g in texts]),
                "client_latency_ms": round(elapsed_ms, 1),
                **body,
            })
    return result


def answer_check(answer: str, question: str, gold_texts: list[str]) -> dict[str, Any]:
    """Does the answer say what the gold passage says? Citing the right site is not enough (a
    cited site can still contribute off-topic sentences), so the answer itself is tested: the gold
    passages' answer sentence is the one sharing most content words with the question, and the
    answer must hold at least one of its content words that the question does not already hold.
    `ok` is None when there is no gold passage to check against."""
    asked = content_words(question)
    candidates = [s for text in gold_texts for _, s in answer_sentences(text)]
    if not candidates:
        return {"ok": None, "gold_sentence": None, "shared_words": []}
    gold = max(candidates, key=lambda s: len(content_words(s) & asked))
    shared = sorted((content_words(gold) - asked) & content_words(answer))
    return {"ok": bool(shared), "gold_sentence": gold, "shared_words": shared}


def _print_human(result: DemoResult) -> None:
    click.echo(f"\nFederation built in {result.setup_seconds:.1f} s under {result.workdir}")
    for site_id, info in result.sites.items():
        click.echo(f"  site {site_id:<8} {info['url']}  documents={info['documents']} chunks={info['chunks']} "
                   f"communities={info['communities']} published={info.get('published_summaries')}")
    for i, a in enumerate(result.answers, 1):
        click.echo(f"\n[{i}] Q: {a['question']}")
        click.echo(f"    A: {a.get('answer', '').strip()}")
        for c in a.get("citations", []):  # only those the answer uses, as a reader can follow them
            if not c.get("used", True):
                continue
            where = ", ".join(x for x in (c.get("source") or c["doc_id"], f"p. {c['page']}" if c.get("page") else "") if x)
            click.echo(f"       [{c.get('n', '?')}] {c['title']} — {c['site_id']}, {where}")
            if c.get("snippet"):
                click.echo(f"           \"{c['snippet']}\"")
        trace = a.get("trace", {})
        considered = ", ".join(f"{s['site_id']}={s['score']:.2f}" for s in trace.get("sites_considered", []))
        per_site = ", ".join(f"{s['site_id']} {s['status']} {s['latency_ms']:.0f}ms {s['bytes_in']}B"
                             for s in trace.get("per_site", []))
        click.echo(f"    routing: {considered}")
        click.echo(f"    called:  {per_site}")
        if not a.get("answerable", True):
            said = "yes" if a.get("abstained") else "NO"
            click.echo(f"    no site holds an answer to this; the federation said so: {said}; "
                       f"latency {a['client_latency_ms']:.0f} ms (gateway total {trace.get('total_ms', 0):.0f} ms)")
            continue
        check = a["answer_check"]
        verdict = {True: "yes", False: "NO", None: "n/a"}[check["ok"]]
        shared = f" (shares {', '.join(check['shared_words'][:5])})" if check["shared_words"] else ""
        click.echo(f"    answer matches the gold passage: {verdict}{shared}")
        sites = a.get("sites", {})
        if sites:
            click.echo(f"    sites: {sites['successful']}/{sites['total']} answered, {sites['failed']} failed, "
                       f"{sites['timed_out']} timed out{' (partial)' if sites['partial'] else ''}")
        click.echo(f"    gold site {a['gold_site']} cited: {'yes' if a['gold_site_cited'] else 'NO'}; "
                   f"latency {a['client_latency_ms']:.0f} ms (gateway total {trace.get('total_ms', 0):.0f} ms)")


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print the answers, citations and traces as JSON.")
@click.option("--workdir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Keep the federation's files here (default: a temporary directory, removed afterwards).")
@click.option("--question", "-q", "extra", multiple=True, help="Ask this question too (repeatable).")
@friendly
def demo(as_json: bool, workdir: Path | None, extra: tuple[str, ...]) -> None:
    """Run a 3-site federation on the embedded default and ask it questions.

    Sites clapnq (Wikipedia), fiqa (finance) and govt (US government pages) each hold 40 MTRAG
    passages (Apache-2.0, see hansa/cli/data/NOTICE). Nothing needs to be running: each site uses
    the embedded graph store and Milvus Lite; every hop between sites and gateway is real HTTP on
    127.0.0.1. Expect about half a minute on two cores, most of it embedding and the first model load.
    """
    passages, questions = bundled_sample()
    questions += [{"site": None, "question": q, "gold": []} for q in extra]
    say = (lambda m: click.echo(m, err=True))
    if workdir is not None:
        workdir.mkdir(parents=True, exist_ok=True)
        result = run_demo(workdir, passages, questions, progress=say)
    else:
        with tempfile.TemporaryDirectory(prefix="hansa-demo-") as tmp:
            result = run_demo(Path(tmp), passages, questions, progress=say)
    if as_json:
        json.dump({"setup_seconds": result.setup_seconds, "sites": result.sites, "answers": result.answers},
                  sys.stdout, indent=2, ensure_ascii=False, default=str)
        sys.stdout.write("\n")
    else:
        _print_human(result)
