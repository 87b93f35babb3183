"""Site ingest speed without an LLM, on both graph backends, with the stages timed apart; and PDF
text extraction speed, pypdfium2 against pypdf.

Targets from the guide (2 cores): site ingest >= 200 chunks/s, PDF text >= 100 pages/s.

Ingest: ~1000 real MTRAG passages (one JSONL file) into a fresh site, once per backend:
(a) the embedded graph store (SQLite + igraph) + Milvus Lite, (b) Neo4j + GDS + Milvus Lite.
- `end_to_end`: `hansa.plugin.ingest.ingest_paths` on a fresh `SiteContext`, as `hansa site ingest`
  runs it: chunks/s, entities/s, documents/s.
- `stages`: the same public building blocks called one stage at a time, in the same batches, on
  another fresh store: read (+ fingerprint), chunk, extract (NLP), embed, vector write, graph
  write. Their sum next to the end-to-end time shows what the pipeline adds; the largest share is
  the bottleneck.
- `leiden_on_ingested_graph`: the store's own `detect_communities` on the graph just built.
The embedding model is loaded before anything is timed (a site process loads it once).
Where the bench started Neo4j itself, the server's own CPU seconds during the graph write are
recorded too (`graph_write_server_cpu_seconds`): on a shared machine wall time mostly measures the
neighbours, the server's CPU is what the write costs.

`--graph-only` runs just the graph write (read, chunk and extract untimed beforehand; no
embedding, no vectors, no PDF), `--warmups` and then `--repeats` times per backend on a cleared
store, embedded and Neo4j side by side: the quick loop for work on the graph stores' write paths.
Where the bench started Neo4j, its first write is a fresh server's (a JVM that has compiled
nothing yet) and is reported as its own target: an organization's Neo4j runs for months and pays
that warm-up once, but the first site ingest into it pays it. `--corpus squad --passages 10000`
writes a realistic 10,000-passage site.

PDF: a generated PDF (fpdf2, MTRAG text, `--pdf-pages` pages), read by hansa's reader
(`hansa.plugin.readers.read_path`, pypdfium2), by pypdfium2 directly, and by pypdf.

    python scripts/bench_ingest.py [--smoke] [--out benchmarks/ingest.json] [--neo4j-uri bolt://...]
    python scripts/bench_ingest.py --graph-only [--repeats 3] [--out FILE]
"""
from __future__ import annotations

import json
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any, Callable, Sequence

sys.path.insert(0, str(Path(__file__).resolve().parent))
import benchlib  # noqa: E402  (scripts/ is not a package)
from benchlib import Stopwatch, progress, rate  # noqa: E402

TARGET_CHUNKS_PER_S = 200.0
TARGET_PDF_PAGES_PER_S = 100.0
TARGET_NEO4J_GRAPH_WRITE_CHUNKS_PER_S = 1000.0  # issue 10: the embedded store writes ~1,100 chunks/s
BATCH_DOCS = 64  # ingest_paths' default: one embedding call and one graph transaction per batch
PDF_CHARS_PER_PAGE = 2600


# -- corpus ---------------------------------------------------------------------------------------

def write_corpus(path: Path, n: int, corpus: str = "mtrag") -> int:
    """Passages as one JSONL file (id, title, text), the format `hansa site ingest` reads: MTRAG's
    four domains interleaved, or SQuAD's paragraphs in file order (a realistic single site, up to
    ~20k paragraphs; MTRAG holds ~3,000 passages)."""
    if corpus == "squad":
        documents = benchlib.squad_documents(n)
    else:
        documents = [p.as_document() for p in benchlib.mtrag_passages(n)]
    with path.open("w", encoding="utf-8") as fh:
        for d in documents:
            fh.write(json.dumps(d, ensure_ascii=False) + "\n")
    return len(documents)


def site_config(home: Path, backend: str, neo4j_uri: str | None) -> Any:
    from hansa.core.config import Config

    cfg = Config(home=home)
    cfg.site.site_id = "bench-site"
    cfg.graph.backend = backend
    cfg.milvus.uri = str(home / "milvus.db")
    if neo4j_uri:
        cfg.neo4j.uri = neo4j_uri
    return cfg


def open_site(home: Path, backend: str, neo4j_uri: str | None) -> Any:
    from hansa.plugin.site import SiteContext

    ctx = SiteContext.open(site_config(home, backend, neo4j_uri))
    try:
        ctx.graph.install()
        ctx.embedder.embed(["warm up"])  # model load is not ingest time
    except BaseException:
        ctx.close()
        raise
    return ctx


# -- ingest ---------------------------------------------------------------------------------------

def end_to_end(ctx: Any, corpus: Path) -> dict[str, Any]:
    from hansa.plugin.ingest import ingest_paths

    report = ingest_paths(ctx, [corpus], progress=False, batch_docs=BATCH_DOCS)
    return {
        "seconds": report.seconds,
        "documents": report.documents_new + report.documents_changed,
        "chunks": report.chunks,
        "entities": report.entities,
        "relations": report.relations,
        "chunks_per_s": rate(report.chunks, report.seconds),
        "entities_per_s": rate(report.entities, report.seconds),
        "documents_per_s": rate(report.documents_new + report.documents_changed, report.seconds),
    }


def document_graphs(ctx: Any, corpus: Path) -> tuple[dict[str, float], list[Any], list[Any]]:
    """Read, chunk and extract the corpus (each stage timed): what a graph write consumes."""
    from hansa.adapters.records import Document
    from hansa.plugin.chunking import chunk_text
    from hansa.plugin.extraction import document_graph
    from hansa.plugin.ingest import fingerprint
    from hansa.plugin.readers import read_paths

    site = ctx.cfg.site
    seconds: dict[str, float] = {}
    with Stopwatch() as sw:
        docs = read_paths([corpus])
        sha = {d.id: fingerprint(d, ctx) for d in docs}
    seconds["read"] = sw.seconds
    with Stopwatch() as sw:
        chunked = [chunk_text(d.id, d.text, site.chunk_size, site.chunk_overlap) for d in docs]
    seconds["chunk"] = sw.seconds
    with Stopwatch() as sw:
        graphs = [document_graph(Document(id=d.id, title=d.title, source=d.source, sha256=sha[d.id]), c)
                  for d, c in zip(docs, chunked)]
    seconds["extract"] = sw.seconds
    return seconds, docs, graphs


def graph_write(ctx: Any, batches: Sequence[Sequence[Any]], server_pid: int | None) -> tuple[float, float | None]:
    """Wall seconds of writing the batches, and the graph server's CPU seconds meanwhile (or None)."""
    cpu_before = benchlib.process_cpu_seconds(server_pid) if server_pid else None
    with Stopwatch() as sw:
        for b in batches:
            ctx.graph.write_documents(b)
    cpu_after = benchlib.process_cpu_seconds(server_pid) if server_pid else None
    cpu = None if cpu_before is None or cpu_after is None else round(cpu_after - cpu_before, 3)
    return sw.seconds, cpu


def stages(ctx: Any, corpus: Path, server_pid: int | None = None) -> dict[str, Any]:
    """The ingest pipeline's steps, each timed on its own over the whole corpus (same batches)."""
    from hansa.plugin.site import CHUNKS, chunk_collection

    seconds, docs, graphs = document_graphs(ctx, corpus)
    batches = [graphs[i:i + BATCH_DOCS] for i in range(0, len(graphs), BATCH_DOCS)]
    texts = [[c.text for g in b for c in g.chunks] for b in batches]
    with Stopwatch() as sw:
        vectors = [ctx.embedder.embed(t) for t in texts]
    seconds["embed"] = sw.seconds
    ctx.vectors.ensure_collection(chunk_collection(ctx.embedder.dim))
    with Stopwatch() as sw:
        for b, v in zip(batches, vectors):
            chunks = [c for g in b for c in g.chunks]
            ctx.vectors.upsert(CHUNKS, [c.id for c in chunks], v, [{"doc_id": c.doc_id} for c in chunks])
    seconds["vector_write"] = sw.seconds
    seconds["graph_write"], server_cpu = graph_write(ctx, batches, server_pid)
    total = sum(seconds.values())
    n_chunks = sum(len(g.chunks) for g in graphs)
    return {
        "seconds": {k: round(v, 4) for k, v in seconds.items()},
        "share": {k: round(v / total, 4) for k, v in seconds.items()},
        "sum_seconds": round(total, 4),
        "bottleneck": max(seconds, key=seconds.__getitem__),
        "chunks_per_s_by_stage": {k: rate(n_chunks, v) for k, v in seconds.items()},
        "chunks": n_chunks,
        "graph_write_server_cpu_seconds": server_cpu,
        "doc_ids": [d.id for d in docs],
    }


def leiden(ctx: Any) -> dict[str, Any]:
    from hansa.adapters.graph.base import LeidenParams
    from hansa.plugin.communities import final_partition

    stats = ctx.graph.stats()
    with Stopwatch() as sw:
        assignments = ctx.graph.detect_communities(LeidenParams())
    finest = {a.communities[0] for a in assignments if a.communities}
    # The final level is what a site publishes (plugin/communities.py); GDS's finest is its first pass.
    return {"seconds": round(sw.seconds, 4), "entities": stats.entities, "relations": stats.relations,
            "assigned": len(assignments), "communities_final_level": len(final_partition(assignments)),
            "communities_finest_level": len(finest)}


def run_backend(backend: str, corpus: Path, neo4j_uri: str | None, workdir: Path,
                server_pid: int | None = None) -> dict[str, Any]:
    """Fresh end-to-end ingest, then (on a cleared graph and a new Milvus) the staged run."""
    out: dict[str, Any] = {}
    progress(f"{backend}: end-to-end ingest")
    ctx = open_site(workdir / f"{backend}-e2e", backend, neo4j_uri)
    try:
        out["end_to_end"] = end_to_end(ctx, corpus)
        progress(f"{backend}: {out['end_to_end']['chunks_per_s']} chunks/s; Leiden on the ingested graph")
        out["leiden_on_ingested_graph"] = leiden(ctx)
        doc_ids = [json.loads(line)["id"] for line in corpus.read_text(encoding="utf-8").splitlines()]
        ctx.graph.delete_documents(doc_ids)  # a shared Neo4j must be left as found
    finally:
        ctx.close()
    progress(f"{backend}: staged ingest")
    ctx = open_site(workdir / f"{backend}-stages", backend, neo4j_uri)
    try:
        staged = stages(ctx, corpus, server_pid)
        ctx.graph.delete_documents(staged.pop("doc_ids"))
        out["stages"] = staged
    finally:
        ctx.close()
    out["stages"]["pipeline_overhead_ratio"] = benchlib.ratio(out["end_to_end"]["seconds"], out["stages"]["sum_seconds"])
    return out


def graph_only(backend: str, corpus: Path, neo4j_uri: str | None, workdir: Path, repeats: int,
               server_pid: int | None, warmups: int = 1) -> dict[str, Any]:
    """The graph write alone, `repeats` times on a cleared store (median reported), after
    `warmups` warm-up runs (reported apart: a fresh JVM compiles and plans for the first tens of
    seconds, which a long-running site server pays once)."""
    from hansa.plugin.site import SiteContext

    ctx = SiteContext.open(site_config(workdir / f"{backend}-graph", backend, neo4j_uri))
    try:
        ctx.graph.install()
        _, docs, graphs = document_graphs(ctx, corpus)
        batches = [graphs[i:i + BATCH_DOCS] for i in range(0, len(graphs), BATCH_DOCS)]
        doc_ids = [d.id for d in docs]
        runs = []
        for i in range(warmups + repeats):  # the first runs warm the JVM's JIT and the query plan cache
            wall, cpu = graph_write(ctx, batches, server_pid)
            runs.append((wall, cpu))
            label = f"warm-up {i + 1}/{warmups}" if i < warmups else f"{i - warmups + 1}/{repeats}"
            progress(f"{backend} graph write {label}: {wall:.2f} s wall, server CPU {cpu} s")
            ctx.graph.delete_documents(doc_ids)  # cleared for the next repeat, and a shared Neo4j left as found
    finally:
        ctx.close()
    warm, runs = runs[:warmups], runs[warmups:]
    n_chunks = sum(len(g.chunks) for g in graphs)
    wall = statistics.median(w for w, _ in runs)
    cpus = [c for _, c in runs if c is not None]
    cpu = statistics.median(cpus) if cpus else None
    return {
        "chunks": n_chunks,
        "entities": len({e.id for g in graphs for e in g.entities}),
        "relations": sum(g.co_mention_count() for g in graphs),
        "mentions": sum(len(g.mentions) for g in graphs),
        "seconds": round(wall, 4),
        "seconds_all": [round(w, 4) for w, _ in runs],
        "chunks_per_s": rate(n_chunks, wall),
        "server_cpu_seconds": None if cpu is None else round(cpu, 3),
        "server_cpu_seconds_all": cpus,
        "chunks_per_server_cpu_s": None if cpu is None else rate(n_chunks, cpu),
        "warmup_runs": [{"seconds": round(w, 4), "chunks_per_s": rate(n_chunks, w), "server_cpu_seconds": c}
                        for w, c in warm],
    }


# -- PDF ------------------------------------------------------------------------------------------

def make_pdf(path: Path, pages: int) -> None:
    """A text PDF with `pages` pages of MTRAG prose (core font: text folded to latin-1)."""
    from fpdf import FPDF

    text = "\n\n".join(p.text for p in benchlib.mtrag_passages(400)).encode("latin-1", "replace").decode("latin-1")
    pdf = FPDF(format="A4")
    pdf.set_auto_page_break(False)
    pdf.set_font("Helvetica", size=9)
    for page in range(pages):
        pdf.add_page()
        start = (page * PDF_CHARS_PER_PAGE) % max(1, len(text) - PDF_CHARS_PER_PAGE)
        pdf.multi_cell(0, 4, text[start:start + PDF_CHARS_PER_PAGE])
    pdf.output(str(path))


def pdf_readers(path: Path) -> dict[str, Callable[[], int]]:
    """Each returns the number of characters extracted (so an empty result is visible)."""
    import pypdf
    import pypdfium2 as pdfium

    from hansa.plugin.readers import read_path

    def hansa_reader() -> int:
        return sum(len(d.text) for d in read_path(path))

    def pdfium_direct() -> int:
        pdf = pdfium.PdfDocument(str(path))
        try:
            chars = 0
            for i in range(len(pdf)):
                page = pdf[i]
                textpage = page.get_textpage()
                chars += len(textpage.get_text_bounded())
                textpage.close()
                page.close()
            return chars
        finally:
            pdf.close()

    def pypdf_reader() -> int:
        return sum(len(page.extract_text() or "") for page in pypdf.PdfReader(str(path)).pages)

    return {"hansa_read_path_pypdfium2": hansa_reader, "pypdfium2": pdfium_direct, "pypdf": pypdf_reader}


def pdf_bench(workdir: Path, pages: int, repeats: int) -> dict[str, Any]:
    path = workdir / "bench.pdf"
    make_pdf(path, pages)
    results: dict[str, Any] = {"pages": pages, "bytes": path.stat().st_size, "repeats": repeats, "readers": {}}
    for name, read in pdf_readers(path).items():
        read()  # warm: imports, file cache
        times, chars = [], 0
        for _ in range(repeats):
            with Stopwatch() as sw:
                chars = read()
            times.append(sw.seconds)
        median = statistics.median(times)
        results["readers"][name] = {"seconds": round(median, 4), "seconds_all": [round(t, 4) for t in times],
                                    "pages_per_s": rate(pages, median), "chars": chars}
        progress(f"pdf {name}: {results['readers'][name]['pages_per_s']} pages/s")
    return results


def main(argv: Sequence[str] | None = None) -> int:
    p = benchlib.parser("ingest", __doc__.split("\n\n")[0])
    p.add_argument("--passages", type=int, default=None, help="corpus size (default 1000; smoke 40)")
    p.add_argument("--pdf-pages", type=int, default=None, help="pages of the generated PDF (default 100; smoke 10)")
    p.add_argument("--backends", default="embedded,neo4j", help="comma-separated: embedded, neo4j")
    p.add_argument("--neo4j-uri", default=None, help="use this running Neo4j + GDS instead of starting one")
    p.add_argument("--graph-only", action="store_true",
                   help="time only the graph write (no embedding, vectors or PDF), per backend side by side")
    p.add_argument("--repeats", type=int, default=None, help="graph writes per backend with --graph-only (default 3; smoke 1)")
    p.add_argument("--warmups", type=int, default=1,
                   help="untimed graph writes before those with --graph-only (default 1; each reported apart, "
                        "the first as a fresh server's figure): a fresh Neo4j JVM keeps compiling for ~20 "
                        "writes of 300 MTRAG passages (~13,000 chunks)")
    p.add_argument("--corpus", choices=("mtrag", "squad"), default="mtrag",
                   help="mtrag: its four domains interleaved (~3,000 passages at most); squad: SQuAD's "
                        "paragraphs in file order, e.g. a 10,000-passage site with --graph-only")
    args = benchlib.parse(p, list(argv) if argv is not None else None)
    backends = [b for b in args.backends.split(",") if b]
    if any(b not in ("embedded", "neo4j") for b in backends):
        p.error("--backends takes embedded and/or neo4j")
    n_passages = args.passages or (40 if args.smoke else 1000)
    pdf_pages = args.pdf_pages or (10 if args.smoke else 100)
    report = benchlib.Report("ingest", args.smoke, libraries=(
        "pymilvus", "milvus-lite", "neo4j", "graphdatascience", "igraph", "leidenalg", "sentence-transformers",
        "torch", "pypdfium2", "pypdf", "fpdf2"))
    report.params = {"corpus": args.corpus, "passages": n_passages, "batch_docs": BATCH_DOCS, "backends": backends,
                     "pdf_pages": pdf_pages, "llm": None}
    if args.graph_only:
        return graph_only_main(args, report, backends, n_passages)

    with tempfile.TemporaryDirectory(prefix="bench-ingest-") as tmp:
        workdir = Path(tmp)
        corpus = workdir / "corpus.jsonl"
        report.params["passages"] = write_corpus(corpus, n_passages, args.corpus)
        report.params["corpus_bytes"] = corpus.stat().st_size
        cfg = site_config(workdir, "embedded", None)
        report.params["chunking"] = {"chunk_size": cfg.site.chunk_size, "chunk_overlap": cfg.site.chunk_overlap}
        benchlib.embedder().embed(["load the model once, untimed"])
        server: dict[str, Any] = {}
        results: dict[str, Any] = {}
        if "embedded" in backends:
            results["embedded"] = run_backend("embedded", corpus, None, workdir)
        if "neo4j" in backends:
            with benchlib.neo4j(args.neo4j_uri, server) as uri:
                results["neo4j"] = run_backend("neo4j", corpus, uri, workdir, server.pop("pid", None))
            report.results["server"] = server
        report.results["ingest"] = results
        report.results["pdf"] = pdf_bench(workdir, pdf_pages, 1 if args.smoke else 3)

    if "embedded" in results and "neo4j" in results:
        report.ratios["neo4j_vs_embedded:chunks_per_s"] = benchlib.ratio(
            results["neo4j"]["end_to_end"]["chunks_per_s"], results["embedded"]["end_to_end"]["chunks_per_s"])
        report.ratios["neo4j_vs_embedded:graph_write_seconds"] = benchlib.ratio(
            results["neo4j"]["stages"]["seconds"]["graph_write"], results["embedded"]["stages"]["seconds"]["graph_write"])
    readers = report.results["pdf"]["readers"]
    report.ratios["pdf:pypdfium2_vs_pypdf:pages_per_s"] = benchlib.ratio(readers["pypdfium2"]["pages_per_s"], readers["pypdf"]["pages_per_s"])
    report.ratios["pdf:hansa_reader_vs_pypdfium2:pages_per_s"] = benchlib.ratio(
        readers["hansa_read_path_pypdfium2"]["pages_per_s"], readers["pypdfium2"]["pages_per_s"])
    for backend, res in results.items():
        observed = res["end_to_end"]["chunks_per_s"]
        report.target(f"ingest_{backend}", f">= {TARGET_CHUNKS_PER_S:.0f} chunks/s without an LLM", observed,
                      None if args.smoke else observed >= TARGET_CHUNKS_PER_S)
    if "neo4j" in results:
        graph_write_target(report, results["neo4j"]["stages"]["chunks_per_s_by_stage"]["graph_write"], args.smoke)
    observed = readers["hansa_read_path_pypdfium2"]["pages_per_s"]
    report.target("pdf_text", f">= {TARGET_PDF_PAGES_PER_S:.0f} pages/s", observed,
                  None if args.smoke else observed >= TARGET_PDF_PAGES_PER_S)
    if args.smoke:
        report.note("smoke run: sizes too small to judge the targets (met = null)")
    if args.neo4j_uri:
        report.note("Neo4j was given (--neo4j-uri): its store may have held other data while measuring")
    report.emit(args.out)
    return 0


def graph_write_target(report: benchlib.Report, observed: float, smoke: bool) -> None:
    report.target("graph_write_neo4j", f">= {TARGET_NEO4J_GRAPH_WRITE_CHUNKS_PER_S:.0f} chunks/s", observed,
                  None if smoke else observed >= TARGET_NEO4J_GRAPH_WRITE_CHUNKS_PER_S)


def graph_only_main(args: Any, report: benchlib.Report, backends: list[str], n_passages: int) -> int:
    repeats = args.repeats or (1 if args.smoke else 3)
    if args.warmups < 1:
        raise SystemExit("--warmups must be at least 1 (the first write compiles the statements)")
    report.params.update({"graph_only": True, "repeats": repeats, "warmups": args.warmups})
    del report.params["pdf_pages"]
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="bench-ingest-") as tmp:
        workdir = Path(tmp)
        corpus = workdir / "corpus.jsonl"
        report.params["passages"] = write_corpus(corpus, n_passages, args.corpus)
        if "embedded" in backends:
            results["embedded"] = graph_only("embedded", corpus, None, workdir, repeats, None, args.warmups)
        if "neo4j" in backends:
            server: dict[str, Any] = {}
            with benchlib.neo4j(args.neo4j_uri, server) as uri:
                results["neo4j"] = graph_only("neo4j", corpus, uri, workdir, repeats, server.pop("pid", None), args.warmups)
            report.results["server"] = server
    report.results["graph_write"] = results
    if "embedded" in results and "neo4j" in results:
        report.ratios["neo4j_vs_embedded:graph_write_chunks_per_s"] = benchlib.ratio(
            results["neo4j"]["chunks_per_s"], results["embedded"]["chunks_per_s"])
    if "neo4j" in results:
        graph_write_target(report, results["neo4j"]["chunks_per_s"], args.smoke)
    if "neo4j" in results and not args.neo4j_uri:  # a given server may have compiled everything already
        first = results["neo4j"]["warmup_runs"][0]["chunks_per_s"]
        report.target("graph_write_neo4j_first_write", f">= {TARGET_NEO4J_GRAPH_WRITE_CHUNKS_PER_S:.0f} chunks/s "
                      "on the server's first write (its JVM still compiling)", first,
                      None if args.smoke else first >= TARGET_NEO4J_GRAPH_WRITE_CHUNKS_PER_S)
    if args.smoke:
        report.note("smoke run: sizes too small to judge the targets (met = null)")
    if args.neo4j_uri:
        report.note("Neo4j was given (--neo4j-uri): no server CPU figures, and its store may hold other data")
    report.emit(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
