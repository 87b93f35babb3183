"""`hansa eval`: quality and cost of a federation on MTRAG, several strategies side by side.

Every strategy runs in the same process, against the same sites, over real HTTP, in one run:
  hansa            the gateway as configured (summary routing, fusion)
  exhaustive       every site is asked (the cost ceiling)
  centralized      one site holding every passage (the quality a federation gives up)
  top1             DGRAG's m = k = 1: only the best-matching summary's site
  oracle           only the gold site(s) (the cost floor)
  full_information sites ranked by their single best passage — needs every passage embedding at
                   the gateway, so hansa may not ship it; it is the bar for summary-only routing.
Caveat printed with every table: each site holds only MTRAG gold passages (no same-domain
distractors), so absolute recall is optimistic; the comparison between strategies is the point.
"""
from __future__ import annotations

import hashlib
import json
import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Sequence

import click
import numpy as np

from hansa.cli.federation import LocalFederation
from hansa.cli.mtrag import Passage, Question, load_passages, load_questions, load_rewrites

STRATEGIES = ("hansa", "exhaustive", "centralized", "top1", "oracle", "full_information")
CAVEAT = ("Sites hold only MTRAG gold passages (no distractors from their own domain): absolute recall is "
          "optimistic; compare strategies with each other.")


def split_sites(passages: dict[str, list[Passage]], n_sites: int) -> dict[str, list[Passage]]:
    """4 sites: one per domain. 16: each domain split in 4 by a hash of the parent document id
    (a random sharding — the hardest case for routing — that keeps a document's passages together)."""
    domains = sorted(passages)
    if n_sites == len(domains):
        return {d: list(passages[d]) for d in domains}
    per = n_sites // len(domains)
    if per * len(domains) != n_sites:
        raise click.BadParameter(f"--sites must be a multiple of {len(domains)}")
    out: dict[str, list[Passage]] = {f"{d}-{i}": [] for d in domains for i in range(per)}
    for d in domains:
        for p in passages[d]:
            bucket = int(hashlib.sha256(p.parent_id.encode()).hexdigest(), 16) % per
            out[f"{d}-{bucket}"].append(p)
    return {k: v for k, v in out.items() if v}


def cap_passages(passages: dict[str, list[Passage]], questions: Sequence[Question], per_domain: int) -> dict[str, list[Passage]]:
    """At most `per_domain` passages per domain: the questions' gold passages first, then the rest
    in their stable order, so every question still has its evidence somewhere."""
    gold = {g for q in questions for g in q.gold}
    out = {}
    for domain, ps in passages.items():
        keep = [p for p in ps if p.id in gold]
        keep += [p for p in ps if p.id not in gold][: max(0, per_domain - len(keep))]
        out[domain] = sorted(keep, key=lambda p: p.id)
    return out


@dataclass
class Outcome:
    federation_sites: int
    strategy: str
    question_id: str
    gold_sites: list[str]
    asked_sites: list[str]
    ranked_docs: list[str]
    gold: list[str]
    bytes: int
    gateway_ms: float
    e2e_ms: float


def _percentile(values: Sequence[float], q: float) -> float:
    return float(np.percentile(np.asarray(values, dtype=float), q)) if values else 0.0


def summarize(outcomes: Sequence[Outcome]) -> dict[str, Any]:
    n = len(outcomes)
    gsr = [len(set(o.gold_sites) & set(o.asked_sites)) / len(o.gold_sites) for o in outcomes]
    rec = [len(set(o.gold) & set(o.ranked_docs[:10])) / len(set(o.gold)) for o in outcomes]
    mrr = []
    for o in outcomes:
        rank = next((i for i, d in enumerate(o.ranked_docs, 1) if d in set(o.gold)), None)
        mrr.append(1.0 / rank if rank else 0.0)
    first = outcomes[0]
    return {
        "federation_sites": first.federation_sites,
        "strategy": first.strategy,
        "questions": n,
        "gold_site_recall": round(statistics.fmean(gsr), 4),
        "evidence_recall_at_10": round(statistics.fmean(rec), 4),
        "mrr": round(statistics.fmean(mrr), 4),
        "sites_called_per_query": round(statistics.fmean(len(o.asked_sites) for o in outcomes), 3),
        "bytes_per_query": round(statistics.fmean(o.bytes for o in outcomes), 1),
        "gateway_ms_p50": round(_percentile([o.gateway_ms for o in outcomes], 50), 2),
        "gateway_ms_p95": round(_percentile([o.gateway_ms for o in outcomes], 95), 2),
        "latency_ms_p50": round(_percentile([o.e2e_ms for o in outcomes], 50), 2),
        "latency_ms_p95": round(_percentile([o.e2e_ms for o in outcomes], 95), 2),
    }


class FullInformationRouter:
    """The reference router hansa may not ship: every chunk embedding of every site, at the gateway.

    Chunk ids are deterministic (plugin.chunking), so the vectors are read back from each site's
    Milvus rather than recomputed: exactly what the sites index."""

    def __init__(self, fed: LocalFederation) -> None:
        from hansa.plugin.chunking import chunk_text
        from hansa.plugin.readers import read_path
        from hansa.plugin.site import CHUNKS

        vecs, owners = [], []
        for site_id, handle in fed.sites.items():
            site_cfg = handle.ctx.cfg.site
            docs = read_path(handle.ctx.cfg.home / "docs")  # what the site ingested, read as ingest reads it
            ids = [c.id for d in docs for c in chunk_text(d.id, d.text, site_cfg.chunk_size, site_cfg.chunk_overlap)]
            got = handle.ctx.vectors.get(CHUNKS, ids)
            if len(got) != len(ids):
                raise RuntimeError(f"site {site_id}: {len(ids) - len(got)} chunk vectors missing")
            vecs.extend(got.values())
            owners.extend([site_id] * len(got))
        self.matrix = np.vstack(vecs).astype(np.float32)
        self.owners = np.asarray(owners)

    def rank(self, qvec: np.ndarray) -> list[tuple[str, float]]:
        scores = self.matrix @ qvec
        best: dict[str, float] = {}
        for site, score in zip(self.owners, scores):
            if score > best.get(site, -2.0):
                best[site] = float(score)
        return sorted(best.items(), key=lambda kv: -kv[1])


def _recall_at(ranked: Sequence[str], gold_sites: Sequence[str], k: int) -> float:
    return len(set(ranked[:k]) & set(gold_sites)) / len(gold_sites)


class RoutingCurves:
    """Gold-site recall at k = 1..K for routers that only rank sites, without calling any site:
    hansa's summary routing (the gateway's own index and scorer), full-information routing, and a
    per-site centroid (one mean vector per site, the simplest summary)."""

    def __init__(self, fed: LocalFederation, full: "FullInformationRouter", max_k: int = 8) -> None:
        from hansa.gateway.router import score_sites

        self.score_sites = score_sites
        self.index = fed.gateway_service.index
        self.sites = sorted(fed.sites)
        self.max_k = min(max_k, len(self.sites))
        self.full = full
        centroids = []
        for site in self.sites:
            mean = full.matrix[full.owners == site].mean(axis=0)
            centroids.append(mean / np.linalg.norm(mean))
        self.centroids = np.vstack(centroids)
        self.sums: dict[str, np.ndarray] = {name: np.zeros(self.max_k) for name in ("summaries", "full_information", "centroid")}
        self.n = 0

    def add(self, qvec: np.ndarray, gold_sites: Sequence[str], top_m: int) -> None:
        hits = self.index.search(qvec, top_m)
        ranked_summary = [s.site_id for s in self.score_sites(hits, set(self.sites))]
        ranked_full = [s for s, _ in self.full.rank(qvec)]
        ranked_centroid = [self.sites[i] for i in np.argsort(-(self.centroids @ qvec))]
        for name, ranked in (("summaries", ranked_summary), ("full_information", ranked_full), ("centroid", ranked_centroid)):
            self.sums[name] += [_recall_at(ranked, gold_sites, k) for k in range(1, self.max_k + 1)]
        self.n += 1

    def result(self) -> dict[str, dict[str, float]]:
        return {name: {f"k={k + 1}": round(float(v[k]) / max(self.n, 1), 4) for k in range(self.max_k)}
                for name, v in self.sums.items()}


def _ask(fed: LocalFederation, body: dict[str, Any]) -> tuple[dict[str, Any], float]:
    t0 = time.perf_counter()
    resp = fed.query(body, timeout=120)
    e2e = (time.perf_counter() - t0) * 1000
    if resp.status_code != 200:
        raise click.ClickException(f"gateway answered {resp.status_code}: {resp.text[:300]}")
    return resp.json(), e2e


def _outcome(n_sites: int, strategy: str, q: Question, gold_sites: list[str], answer: dict[str, Any], e2e: float) -> Outcome:
    trace = answer["trace"]
    asked = [c["site_id"] for c in trace["per_site"]]
    docs: list[str] = []
    for c in answer["citations"]:
        if c["doc_id"] not in docs:
            docs.append(c["doc_id"])
    gateway_ms = float(trace.get("routing_ms", 0.0)) + float(trace.get("fusion_ms", 0.0))
    return Outcome(n_sites, strategy, q.id, gold_sites, asked, docs, list(q.gold),
                   int(trace.get("bytes_in", 0)) + int(trace.get("bytes_out", 0)), gateway_ms, e2e)


def evaluate_federation(
    workdir: Path, passages: dict[str, list[Passage]], questions: Sequence[Question], n_sites: int,
    strategies: Iterable[str], top_k_sites: int, progress, use_conversation: bool,
) -> tuple[list[Outcome], dict[str, Any]]:
    sites = split_sites(passages, n_sites)
    site_of = {p.id: s for s, ps in sites.items() for p in ps}
    docs = {s: [{"id": p.id, "title": p.title, "text": p.text} for p in ps] for s, ps in sites.items()}
    outcomes: list[Outcome] = []
    with LocalFederation(workdir / f"fed{n_sites}", docs, progress=progress,
                         gateway_env={"HANSA_GATEWAY_TOP_K_SITES": str(top_k_sites)} if top_k_sites else None) as fed:
        gw = fed.gateway_config.gateway
        full = FullInformationRouter(fed)
        curves = RoutingCurves(fed, full)
        top_m = fed.gateway_config.gateway.top_m_summaries
        embedder = next(iter(fed.sites.values())).ctx.embedder
        meta = {"sites": {s: len(ps) for s, ps in sites.items()}, "setup_seconds": round(fed.setup_seconds, 1),
                "published_summaries": sum((h.info.get("published_summaries") or 0) for h in fed.sites.values())}
        for i, q in enumerate(questions):
            text = " ".join(q.conversation) if use_conversation else q.text
            gold_sites = sorted({site_of[g] for g in q.gold if g in site_of})
            plans: dict[str, dict[str, Any]] = {
                "hansa": {"question": text},
                "exhaustive": {"question": text, "sites": sorted(fed.sites)},
                "top1": {"question": text, "top_k_sites": 1},
                "oracle": {"question": text, "sites": gold_sites},
            }
            qvec = embedder.embed_one(text)
            curves.add(qvec, gold_sites, top_m)
            ranked = full.rank(qvec)
            # the same selection rule as hansa's router (at most k, within the margin of the best)
            floor = ranked[0][1] - gw.site_margin
            plans["full_information"] = {"question": text,
                                         "sites": [s for s, score in ranked[:gw.top_k_sites] if score >= floor]}
            for strategy in strategies:
                if strategy in plans:
                    answer, e2e = _ask(fed, plans[strategy])
                    outcomes.append(_outcome(n_sites, strategy, q, gold_sites, answer, e2e))
            if (i + 1) % 25 == 0:
                progress(f"fed{n_sites}: {i + 1}/{len(questions)} questions")
        meta["routing_gold_site_recall_at_k"] = curves.result()
    return outcomes, meta


def evaluate_centralized(workdir: Path, passages: dict[str, list[Passage]], questions: Sequence[Question],
                         progress, use_conversation: bool) -> list[Outcome]:
    docs = {"central": [{"id": p.id, "title": p.title, "text": p.text} for ps in passages.values() for p in ps]}
    out = []
    with LocalFederation(workdir / "central", docs, progress=progress) as fed:
        for q in questions:
            text = " ".join(q.conversation) if use_conversation else q.text
            answer, e2e = _ask(fed, {"question": text, "sites": ["central"]})
            out.append(_outcome(1, "centralized", q, ["central"], answer, e2e))
    return out


def plot(records: Sequence[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    markers = {4: "o", 16: "s", 1: "*"}
    for r in records:
        n = r["federation_sites"]
        ax.scatter(r["sites_called_per_query"], r["evidence_recall_at_10"], marker=markers.get(n, "o"), s=60)
        ax.annotate(f"{r['strategy']} ({n})", (r["sites_called_per_query"], r["evidence_recall_at_10"]),
                    fontsize=8, xytext=(4, 3), textcoords="offset points")
    ax.set_xlabel("sites called per question")
    ax.set_ylabel("evidence recall@10")
    ax.set_title("MTRAG: evidence recall vs sites called (o = 4 sites, s = 16 sites)")
    ax.grid(alpha=0.3)
    fig.text(0.01, 0.01, CAVEAT, fontsize=6, wrap=True)
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    fig.savefig(path, dpi=120)


def _table(records: Sequence[dict[str, Any]]) -> str:
    cols = ["federation_sites", "strategy", "questions", "gold_site_recall", "evidence_recall_at_10", "mrr",
            "sites_called_per_query", "bytes_per_query", "gateway_ms_p50", "latency_ms_p50", "latency_ms_p95"]
    head = "| " + " | ".join(cols) + " |\n|" + "---|" * len(cols) + "\n"
    return head + "".join("| " + " | ".join(str(r[c]) for c in cols) + " |\n" for r in records)


@click.command("eval")
@click.option("--data", type=click.Path(file_okay=False, path_type=Path),
              default=Path(__file__).resolve().parents[1].parent / "shared" / "datasets" / "mtrag",
              show_default=True, help="MTRAG folder (mtragun-human/, mtrag-human/).")
@click.option("--sites", "federations", default="4,16", show_default=True, help="Federation sizes (multiples of 4).")
@click.option("--questions", "question_set", type=click.Choice(["un", "rewrite", "both"]), default="both",
              show_default=True, help="MTRAG-UN last turns (332), MTRAG standalone rewrites (179), or both.")
@click.option("--conversation", is_flag=True, help="Ask MTRAG-UN questions with the whole conversation, not the last turn.")
@click.option("--limit", type=int, default=0, help="Ask only the first N questions (0: all). CI uses a small N.")
@click.option("--max-passages", type=int, default=0,
              help="Keep at most N passages per domain (0: all), always including the asked questions' gold "
                   "passages: a seconds-long smoke run for CI.")
@click.option("--top-k-sites", type=int, default=0,
              help="At most this many sites for hansa and full-information routing (0: the gateway's default, [gateway] top_k_sites).")
@click.option("--strategies", default=",".join(STRATEGIES), show_default=True)
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), default=Path("benchmarks/eval.json"), show_default=True)
@click.option("--plot", "plot_path", type=click.Path(dir_okay=False, path_type=Path), default=Path("benchmarks/eval.png"), show_default=True)
@click.option("--workdir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Keep the federations' files here (default: a temporary directory).")
def evaluate(data: Path, federations: str, question_set: str, conversation: bool, limit: int, max_passages: int, top_k_sites: int,
             strategies: str, out: Path, plot_path: Path, workdir: Path | None) -> None:
    """Measure routing, evidence and cost on MTRAG, every strategy side by side in one run.

    Builds 4-site (one per domain) and 16-site (each domain split in 4 by parent document hash)
    federations of real sites and a real gateway on loopback, asks every question through each
    strategy, prints a table, writes one JSON record per (federation, strategy) to --out and a
    plot of evidence recall against sites called to --plot.
    """
    import tempfile

    chosen = [s.strip() for s in strategies.split(",") if s.strip()]
    unknown = set(chosen) - set(STRATEGIES)
    if unknown:
        raise click.BadParameter(f"unknown strategies {sorted(unknown)}; choose from {', '.join(STRATEGIES)}")
    if not data.is_dir():
        raise click.ClickException(f"{data} does not exist: point --data at the MTRAG folder")
    passages = load_passages(data)
    known = {p.id for ps in passages.values() for p in ps}
    questions: list[Question] = []
    if question_set in ("un", "both"):
        questions += load_questions(data, known)
    if question_set in ("rewrite", "both"):
        questions += load_rewrites(data, known)
    if limit:
        # an even spread over domains, deterministic
        questions = sorted(questions, key=lambda q: hashlib.sha256(q.id.encode()).hexdigest())[:limit]
    if max_passages:
        passages = cap_passages(passages, questions, max_passages)
    say = lambda m: click.echo(m, err=True)  # noqa: E731
    say(f"{sum(len(v) for v in passages.values())} passages, {len(questions)} questions, strategies {chosen}")
    sizes = [int(x) for x in federations.split(",") if x.strip()]
    records, meta = [], {}
    with tempfile.TemporaryDirectory(prefix="hansa-eval-") as tmp:
        root = workdir or Path(tmp)
        for n in sizes:
            outcomes, meta[f"fed{n}"] = evaluate_federation(root, passages, questions, n, chosen, top_k_sites, say, conversation)
            by_strategy: dict[str, list[Outcome]] = {}
            for o in outcomes:
                by_strategy.setdefault(o.strategy, []).append(o)
            records += [summarize(v) for v in by_strategy.values()]
        if "centralized" in chosen:
            records.append(summarize(evaluate_centralized(root, passages, questions, say, conversation)))
    raw_bytes = sum(len(p.text.encode()) for ps in passages.values() for p in ps)
    doc = {"caveat": CAVEAT, "question_set": question_set, "conversation": conversation, "top_k_sites": top_k_sites,
           "raw_corpus_bytes": raw_bytes, "federations": meta, "records": records}
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    plot(records, plot_path)
    click.echo(_table(records))
    click.echo(CAVEAT)
    click.echo(f"wrote {out} and {plot_path}")
