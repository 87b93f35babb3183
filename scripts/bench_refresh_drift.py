"""Incremental community refresh against a full rebuild, round after round (issue 34).

A site that syncs regularly refreshes its communities incrementally (`ingest --sync`, `delete`,
`communities --incremental`). This measures whether that stays as good as a full build, and what
it costs, on each graph store, the same site and the same edits, for each way of refreshing
(`--refresh`):

- `local` (what a site does): only the communities the changed documents touch are clustered
  again; the others keep their members, ids, summaries and vectors (plugin/communities.py).
- `local-v2` (a local refresh as of session 29: `[site] summary_text_cache = false`,
  `summary_keep_overlap = 0`): every community the edit touched is summarized and embedded again.
- `local-exact` (a local refresh as it was before: `[site] drift_reference_max_change = 0`): its
  drift check runs Leiden over the whole graph every time and compares against that, where `local`
  compares against the last unseeded run on record while few documents changed since
  (plugin/communities.py, `detect`); the report's `reference_changed` says which one it was.
- `seeded` (what a site did before, and still does without a record of its documents' hashes,
  e.g. one written by an older version or a mapped graph): Leiden over the whole graph, seeded from
  the stored communities. The bench takes that path by removing the document hashes from the
  stored set's record (plugin/community_state.py) before each refresh; its fingerprint stays, so
  unchanged rounds are kept as before.

- data: the first `--passages` SQuAD paragraphs in file order (CC BY-SA 4.0;
  `../shared/datasets/squad`) as one JSONL file, ingested with `ingest_paths` (untimed) and given a
  full community build (`build_communities`).
- rounds: `--rounds` rounds each delete `--change`/2 of the documents and edit as many (their text
  replaced by the next unused SQuAD paragraph), applied with `ingest_paths(sync=True)` (untimed),
  then `--unchanged-rounds` rounds with no change at all. After each round the communities are
  refreshed as `ingest --sync` does it (`refresh_communities`: an incremental build, timed as
  `refresh_seconds`).
- the full rebuild, for comparison, on the same data: the refreshed communities and their summary
  vectors are set aside, a full `build_communities` runs (timed: `full_build_seconds`), its figures
  are read, and the refreshed set is put back (untimed), so the next round goes on from the
  incremental chain exactly as a site would.
- figures (both sides alike): communities published, the largest one's entities, and the
  generalized modularity at the site's resolution (`leiden_gamma`) of the published partition on
  the entity graph (`GraphStore.modularity`; entities in no community count alone).
- routing (both sides alike): SQuAD's first question of each paragraph the site now holds,
  embedded as a query and scored against the published summary vectors; `routing_hit_at_k` is the
  share whose paragraph's document is among the chunks' documents of the k best communities (what
  a site's summaries are for: the gateway routes on them). Kept summaries must not make it worse.
- the full rebuild runs with the summary text cache set aside (a full build as sessions 28 and 29
  timed it: only vectors of unchanged summary texts over unchanged chunks reused); the cache is put
  back with the refreshed set.
- seconds: wall (`refresh_seconds`, `full_build_seconds`) and this process's CPU seconds
  (`*_cpu_seconds`: on the embedded store nearly all of the work, steadier on shared cores; on
  Neo4j they leave out the server's work).

Targets (issue 34): modularity >= 0.95 x the full rebuild's, largest community <= 2 x the full
rebuild's, refresh <= 30% of a full build's time, in every round.

    python scripts/bench_refresh_drift.py [--smoke] [--passages 300] [--rounds 10] [--stores embedded,neo4j]
        [--refresh local-v2,local,local-exact,seeded] [--out benchmarks/refresh_drift.json]
"""
from __future__ import annotations

import json
import random
import sys
import tempfile
from pathlib import Path
from typing import Any, Sequence

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import benchlib  # noqa: E402  (scripts/ is not a package)
from bench_ingest import site_config  # noqa: E402
from benchlib import Stopwatch, progress  # noqa: E402

MODULARITY_RATIO = 0.95  # the targets of issue 34
LARGEST_FACTOR = 2.0
REFRESH_SHARE = 0.30


def write_site_file(path: Path, documents: Sequence[dict[str, Any]]) -> None:
    with path.open("w", encoding="utf-8") as fh:
        for d in documents:
            fh.write(json.dumps(d, ensure_ascii=False) + "\n")


def change(documents: list[dict[str, Any]], pool: list[dict[str, Any]], share: float,
           rng: random.Random) -> tuple[list[dict[str, Any]], int, int]:
    """Delete share/2 of the documents and edit as many (text from the pool); (documents, deleted, edited)."""
    k = max(1, round(len(documents) * share / 2))
    picked = rng.sample(range(len(documents)), min(len(documents), 2 * k))
    deleted, edited = set(picked[:k]), picked[k:]
    out = [dict(d) for d in documents]
    for i in edited:
        fresh = pool.pop()
        out[i]["text"] = fresh["text"]
    return [d for i, d in enumerate(out) if i not in deleted], len(deleted), len(edited)


ROUTING_K = (1, 3)


class Questions:
    """SQuAD's first question per paragraph, embedded once, found by the text a document now holds."""

    def __init__(self, passages: Sequence[dict[str, Any]]) -> None:
        from hansa.evaluation.squad import load_questions

        self.by_text = {p["text"]: p["id"] for p in passages}
        first: dict[str, str] = {}
        for q in load_questions(benchlib.dataset_dir("squad")):
            for gold in q.gold:
                first.setdefault(gold, q.text)
        self.text = {pid: first[pid] for pid in self.by_text.values() if pid in first}
        self.vectors: dict[str, np.ndarray] = {}

    def of(self, ctx: Any, documents: Sequence[dict[str, Any]]) -> tuple[list[str], np.ndarray]:
        """(document ids, their questions' vectors) for the documents that have a question."""
        pairs = [(d["id"], self.by_text.get(d["text"])) for d in documents]
        pairs = [(doc, pid) for doc, pid in pairs if pid in self.text]
        todo = sorted({pid for _, pid in pairs} - set(self.vectors))
        if todo:
            self.vectors.update(zip(todo, ctx.embedder.embed_queries([self.text[pid] for pid in todo])))
        return [doc for doc, _ in pairs], np.asarray([self.vectors[pid] for _, pid in pairs])


def routing(ctx: Any, questions: Questions, documents: Sequence[dict[str, Any]]) -> dict[str, float]:
    from hansa.plugin.site import SUMMARIES

    communities = ctx.graph.communities()
    docs, queries = questions.of(ctx, documents)
    if not communities or not docs:
        return {}
    stored = ctx.vectors.get(SUMMARIES, [c.id for c in communities])
    matrix = np.asarray([stored[c.id] for c in communities])
    order = np.argsort(-(queries @ matrix.T), axis=1)
    holds = [set(c.doc_ids) for c in communities]
    return {f"routing_hit_at_{k}": round(float(np.mean([any(doc in holds[j] for j in row[:k])
                                                         for doc, row in zip(docs, order)])), 4)
            for k in ROUTING_K}


def figures(ctx: Any, questions: Questions | None = None, documents: Sequence[dict[str, Any]] = ()) -> dict[str, Any]:
    from hansa.plugin.communities import stored_partition

    partition = stored_partition(ctx)
    sizes = [len(c.entity_ids) for c in ctx.graph.communities()]
    found = {"communities": len(sizes), "largest_community": max(sizes, default=0),
             "modularity": round(ctx.graph.modularity(partition, ctx.cfg.site.leiden_gamma), 5)}
    return found | (routing(ctx, questions, documents) if questions is not None else {})


def full_rebuild_aside(ctx: Any, questions: Questions | None = None,
                       documents: Sequence[dict[str, Any]] = ()) -> tuple[dict[str, Any], float]:
    """A full build's figures and seconds on the current data, the stored (incremental) set put
    back after; the summary text cache is set aside for it and put back too."""
    from hansa.plugin import community_state
    from hansa.plugin.communities import SUMMARY_TEXT_CACHE, build_communities
    from hansa.plugin.site import SUMMARIES, summary_collection
    from hansa.plugin.vocabulary import build_terms

    kept = ctx.graph.communities()
    record = ctx.cfg.home / community_state.FILENAME  # what vouches for the kept set, put back with it
    vouched = record.read_bytes() if record.exists() else None
    vectors = ctx.vectors.get(SUMMARIES, [c.id for c in kept]) if kept else {}
    cache = ctx.cfg.home / SUMMARY_TEXT_CACHE
    aside = cache.with_name(cache.name + ".aside")
    if cache.exists():
        cache.replace(aside)
    with Stopwatch() as sw:
        built = build_communities(ctx, incremental=False)
    full = figures(ctx, questions, documents) | {"summaries_embedded": built.summaries_embedded}
    cache.unlink(missing_ok=True)
    if aside.exists():
        aside.replace(cache)
    ctx.graph.replace_communities(kept)
    community_state.forget(ctx)
    if vouched is not None:
        record.write_bytes(vouched)
    ctx.vectors.drop(SUMMARIES)
    ctx.vectors.ensure_collection(summary_collection(ctx.embedder.dim))
    if kept:
        ctx.vectors.upsert(SUMMARIES, [c.id for c in kept], np.asarray([vectors[c.id] for c in kept]),
                           [{"level": c.level} for c in kept])
    build_terms(ctx)
    return full | {"cpu_seconds": sw.cpu_seconds}, sw.seconds


def seeded_next(ctx: Any) -> None:
    """Make the next refresh seeded, as a site without its documents' hashes on record refreshes."""
    from hansa.plugin import community_state

    path = ctx.cfg.home / community_state.FILENAME
    if path.exists():
        stored = json.loads(path.read_text(encoding="utf-8"))
        stored.pop("documents", None)
        path.write_text(json.dumps(stored), encoding="utf-8")


def run_store(store: str, uri: str | None, workdir: Path, documents: list[dict[str, Any]],
              pool: list[dict[str, Any]], cfg: dict[str, Any], mode: str = "local") -> tuple[list[dict[str, Any]], dict[str, Any]]:
    from hansa.plugin.communities import build_communities
    from hansa.plugin.deletion import refresh_communities
    from hansa.plugin.ingest import ingest_paths
    from hansa.plugin.site import SiteContext

    folder = workdir / store / mode / "corpus"
    folder.mkdir(parents=True)
    site_file = folder / "squad.jsonl"
    write_site_file(site_file, documents)
    ctx = SiteContext.open(site_config(workdir / store / mode / "home", "neo4j" if store == "neo4j" else "embedded", uri))
    if mode == "local-exact":
        ctx.cfg.site.drift_reference_max_change = 0.0
    if mode == "local-v2":
        ctx.cfg.site.summary_text_cache = False
        ctx.cfg.site.summary_keep_overlap = 0.0
    questions = cfg.get("questions")
    rng = random.Random(cfg["seed"])
    pool = list(pool)
    records: list[dict[str, Any]] = []
    try:
        ctx.graph.install()
        progress(f"{store}: ingesting {len(documents)} passages")
        ingest_paths(ctx, [folder])
        with Stopwatch() as sw:
            first = build_communities(ctx, incremental=False)
        start = {"full_build_seconds": round(sw.seconds, 3), **figures(ctx), "stats": vars(ctx.graph.stats())}
        progress(f"{store}: full build {first.communities} communities in {sw.seconds:.1f} s")
        kinds = ["edit"] * cfg["rounds"] + ["unchanged"] * cfg["unchanged_rounds"]
        for number, kind in enumerate(kinds, start=1):
            deleted = edited = 0
            if kind == "edit":
                documents, deleted, edited = change(documents, pool, cfg["change"], rng)
                write_site_file(site_file, documents)
                ingest_paths(ctx, [folder], sync=True)
            before = {c.id for c in ctx.graph.communities()}
            if mode == "seeded":
                seeded_next(ctx)
            with Stopwatch() as sw:
                report = refresh_communities(ctx)
            refreshed = figures(ctx, questions, documents)
            after = {c.id for c in ctx.graph.communities()}
            full, full_seconds = full_rebuild_aside(ctx, questions, documents)
            record = {
                "store": store, "refresh": mode, "round": number, "kind": kind, "deleted": deleted, "edited": edited,
                "documents": len(documents),
                "communities": refreshed["communities"], "communities_full_rebuild": full["communities"],
                "modularity": refreshed["modularity"], "modularity_full_rebuild": full["modularity"],
                "largest_community": refreshed["largest_community"],
                "largest_community_full_rebuild": full["largest_community"],
                "refresh_seconds": round(sw.seconds, 3), "full_build_seconds": round(full_seconds, 3),
                # this process's CPU seconds (embedded: nearly all the work; Neo4j: not the server's)
                "refresh_cpu_seconds": round(sw.cpu_seconds, 3),
                "full_build_cpu_seconds": round(full["cpu_seconds"], 3),
                "fallback": getattr(report, "fallback", None) if report else None,
                # the unseeded run the drift check compared against: documents changed since it ran
                # (0.0: it ran in this refresh; None: no check ran)
                "reference_changed": getattr(report, "reference_changed", None) if report else None,
                # what the refresh re-did: communities whose id (their members) survived, and
                # summaries embedded anew (the rest kept their stored vectors)
                "communities_kept": len(before & after),
                "kept_unchanged": bool(getattr(report, "unchanged", False)) if report else None,
                "summaries_embedded": getattr(report, "summaries_embedded", None) if report else None,
                # the full rebuild also reuses the stored vector of every summary it makes unchanged
                "summaries_embedded_full_rebuild": full["summaries_embedded"],
                # a local refresh: communities kept as stored, and entities clustered again
                "local_kept": getattr(report, "kept", None) if report else None,
                "reclustered": getattr(report, "reclustered", None) if report else None,
                # texts the model embedded (the rest from the summary text cache), and touched
                # communities that kept a stored summary text (`[site] summary_keep_overlap`)
                "summary_texts_embedded": getattr(report, "summary_texts_embedded", None) if report else None,
                "summaries_kept": getattr(report, "summaries_kept", None) if report else None,
                **{k: v for k, v in refreshed.items() if k.startswith("routing_")},
                **{f"{k}_full_rebuild": v for k, v in full.items() if k.startswith("routing_")},
            }
            records.append(record)
            progress(f"{store}/{mode} round {number} ({kind}): {record['communities']} communities (full "
                     f"{record['communities_full_rebuild']}), largest {record['largest_community']} (full "
                     f"{record['largest_community_full_rebuild']}), modularity {record['modularity']} (full "
                     f"{record['modularity_full_rebuild']}), refresh {record['refresh_seconds']} s / full "
                     f"{record['full_build_seconds']} s, {record['summaries_embedded']} summaries embedded")
    finally:
        try:
            ctx.graph.uninstall()  # a Neo4j given with --neo4j-uri is left as it was found
        finally:
            ctx.close()
    return records, start


def judge(report: benchlib.Report, records: list[dict[str, Any]], store: str, mode: str) -> None:
    mine = [r for r in records if r["store"] == store and r["refresh"] == mode]
    if not mine:
        return
    store = store if mode == "local" else f"{store}/{mode}"
    q = min(benchlib.ratio(r["modularity"], r["modularity_full_rebuild"]) or 0.0 for r in mine)
    big = max(benchlib.ratio(r["largest_community"], r["largest_community_full_rebuild"]) or 0.0 for r in mine)
    share = max(benchlib.ratio(r["refresh_seconds"], r["full_build_seconds"]) or 0.0 for r in mine)
    report.ratios[f"{store}:worst_modularity_vs_full"] = q or None
    report.ratios[f"{store}:worst_largest_vs_full"] = big or None
    report.ratios[f"{store}:worst_refresh_vs_full_seconds"] = share or None
    edits = [r for r in mine if r["kind"] == "edit"]
    report.ratios[f"{store}:edit_rounds_refresh_vs_full_summed"] = benchlib.ratio(
        sum(r["refresh_seconds"] for r in edits), sum(r["full_build_seconds"] for r in edits)) if edits else None
    report.ratios[f"{store}:edit_rounds_refresh_vs_full_cpu_summed"] = benchlib.ratio(
        sum(r.get("refresh_cpu_seconds", 0.0) for r in edits), sum(r.get("full_build_cpu_seconds", 0.0) for r in edits)) \
        if edits else None
    for k in ROUTING_K:
        hits = [r[f"routing_hit_at_{k}"] for r in mine if f"routing_hit_at_{k}" in r]
        full = [r[f"routing_hit_at_{k}_full_rebuild"] for r in mine if f"routing_hit_at_{k}_full_rebuild" in r]
        if hits and full:
            report.ratios[f"{store}:mean_routing_hit_at_{k}"] = round(float(np.mean(hits)), 4)
            report.ratios[f"{store}:mean_routing_hit_at_{k}_full_rebuild"] = round(float(np.mean(full)), 4)
    report.target(f"{store}:modularity", f">= {MODULARITY_RATIO} x the full rebuild's, every round", q,
                  q >= MODULARITY_RATIO)
    report.target(f"{store}:largest_community", f"<= {LARGEST_FACTOR} x the full rebuild's, every round", big,
                  big <= LARGEST_FACTOR)
    report.target(f"{store}:refresh_seconds", f"<= {REFRESH_SHARE} x a full build's, every round", share,
                  share <= REFRESH_SHARE)


def main(argv: Sequence[str] | None = None) -> int:
    p = benchlib.parser("refresh_drift", __doc__.split("\n\n")[0])
    p.add_argument("--passages", type=int, default=None, help="SQuAD paragraphs in the site (default 300; smoke 40)")
    p.add_argument("--rounds", type=int, default=None, help="rounds of edits and deletes (default 10; smoke 2)")
    p.add_argument("--unchanged-rounds", type=int, default=None, help="then rounds with no change (default 2; smoke 1)")
    p.add_argument("--change", type=float, default=0.05, help="share of the documents a round deletes or edits")
    p.add_argument("--stores", default="embedded,neo4j", help="comma-separated: embedded, neo4j")
    p.add_argument("--refresh", default="local",
                   help="comma-separated ways to refresh, each on its own site: local, local-v2, local-exact, seeded")
    p.add_argument("--seed", type=int, default=7, help="seed of the edit draws")
    p.add_argument("--neo4j-uri", default=None, help="use this running Neo4j + GDS instead of starting one")
    args = benchlib.parse(p, list(argv) if argv is not None else None)
    stores = [s.strip() for s in args.stores.split(",") if s.strip()]
    unknown = sorted(set(stores) - {"embedded", "neo4j"})
    if unknown or not stores:
        p.error(f"--stores: unknown {unknown or 'none given'}; use embedded and/or neo4j")
    modes = [m.strip() for m in args.refresh.split(",") if m.strip()]
    if sorted(set(modes) - {"local", "local-v2", "local-exact", "seeded"}) or not modes:
        p.error("--refresh: use local, local-v2, local-exact and/or seeded")
    if not 0 < args.change <= 1:
        p.error("--change must be in (0, 1]")
    n = args.passages or (40 if args.smoke else 300)
    cfg = {"corpus": "squad", "passages": n, "change": args.change, "seed": args.seed, "stores": stores, "refresh": modes,
           "rounds": args.rounds if args.rounds is not None else (2 if args.smoke else 10),
           "unchanged_rounds": args.unchanged_rounds if args.unchanged_rounds is not None else (1 if args.smoke else 2)}
    squad = benchlib.squad_documents(n + n)  # the second half feeds the edits
    documents, pool = squad[:n], squad[n:][::-1]
    if len(documents) < n or len(pool) < cfg["rounds"] * max(1, round(n * args.change / 2)):
        p.error(f"the SQuAD data holds too few paragraphs for --passages {n} and --rounds {cfg['rounds']}")
    report = benchlib.Report("refresh_drift", args.smoke, libraries=("neo4j", "graphdatascience", "igraph", "leidenalg"))
    report.params = cfg
    cfg = cfg | {"questions": Questions(squad)}
    records: list[dict[str, Any]] = []
    starts: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="bench-refresh-drift-") as tmp:
        if "embedded" in stores:
            for mode in modes:
                rows, starts[f"embedded/{mode}"] = run_store("embedded", None, Path(tmp), documents, pool, cfg, mode)
                records += rows
        if "neo4j" in stores:
            server: dict[str, Any] = {}
            with benchlib.neo4j(args.neo4j_uri, server) as uri:
                for mode in modes:
                    rows, starts[f"neo4j/{mode}"] = run_store("neo4j", uri, Path(tmp), documents, pool, cfg, mode)
                    records += rows
            server.pop("pid", None)
            report.results["server"] = server
    report.results["initial_full_build"] = starts
    report.results["rounds"] = records
    for store in stores:
        for mode in modes:
            judge(report, records, store, mode)
    if args.smoke:
        report.note("smoke run: a site too small for the targets to mean anything")
    report.emit(args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
