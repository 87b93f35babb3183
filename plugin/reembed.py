"""Re-embed a site in place with the configured embedder: chunks, answer sentences, community summaries.

Why in place: a federation that moves to another embedder (catalog.py) must not make each site
re-ingest its documents and rebuild its communities; the texts are all stored (chunks in the graph,
summaries on the communities), only the vectors change. Ids do not change, so every row is
overwritten by an upsert; a new dimension drops and recreates the collections first.

Order and crash safety: site.json keeps naming the old embedder until every vector is rewritten,
so while a re-embed runs (or after it crashed) every job that reads vectors refuses the site with
"re-embed the site" (install.check_site_file) instead of mixing two spaces; running the command
again starts over and finishes. The next publish then carries the new space: each summary's vector
changed, so its version goes up (publish.py). A gateway staging the new embedder ([gateway]
next_embedder) holds no set of the site in that space yet: it refuses the delta (409) and publish
sends the set again in full, as it does whenever the gateway holds another set.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
from tqdm import tqdm

from hansa.adapters.records import Chunk
from hansa.core.errors import ConfigError
from hansa.core.files import write_json_atomic
from hansa.core.logs import get_logger
from hansa.plugin import sentence_vectors
from hansa.plugin.install import read_site_file, recorded_space, site_file, space_record
from hansa.plugin.site import CHUNKS, SENTENCES, SUMMARIES, SiteContext, chunk_collection, sentence_collection, summary_collection
from hansa.sync.wire import EmbeddingSpace

log = get_logger(__name__)

PAGE = 256  # chunks read, embedded and written at a time: bounded memory on a large site


@dataclass(frozen=True)
class ReembedResult:
    before: EmbeddingSpace
    after: EmbeddingSpace
    chunks: int
    sentences: int
    summaries: int
    seconds: float

    def to_json(self) -> dict[str, object]:
        return {"before": self.before.to_json(), "after": self.after.to_json(), "chunks": self.chunks,
                "sentences": self.sentences, "summaries": self.summaries, "seconds": round(self.seconds, 3)}


def reembed(ctx: SiteContext, *, force: bool = False, progress: bool = False,
            on_page: Callable[[int], None] | None = None) -> ReembedResult:
    """Rewrite every vector of the site with `ctx.embedder`, then record its space in site.json.

    `force`: re-embed even when site.json already names the configured embedder (a repair).
    `on_page(chunks_done)`: called after each page (tests use it to interrupt a run)."""
    import time

    recorded = read_site_file(ctx)
    if recorded is None:
        raise ConfigError(f"site not installed: {site_file(ctx)} is missing; run `hansa site install` first")
    if recorded["site_id"] != ctx.site_id:
        raise ConfigError(f"this home was installed as site {recorded['site_id']!r}, not {ctx.site_id!r}")
    before, after = recorded_space(recorded), EmbeddingSpace.of(ctx.embedder)
    if before == after and not force:
        return ReembedResult(before, after, 0, 0, 0, 0.0)
    started = time.perf_counter()
    ctx.embedder.warm()
    dim = ctx.embedder.dim
    if dim != before.dim:  # another dimension: the collections themselves must be made anew
        for name in (CHUNKS, SENTENCES, SUMMARIES):
            ctx.vectors.drop(name)
    for spec in (chunk_collection(dim), sentence_collection(dim), summary_collection(dim)):
        ctx.vectors.ensure_collection(spec)

    total = ctx.graph.stats().chunks
    chunks = sentences = 0
    after_id: str | None = None
    with tqdm(total=total, unit="chunk", desc="re-embed chunks", disable=not progress) as bar:
        while True:
            page = ctx.graph.chunk_texts(after=after_id, limit=PAGE)
            if not page:
                break
            batch = [Chunk(id=cid, doc_id=doc, ordinal=0, text=text, start=0, end=len(text)) for cid, doc, text in page]
            ids, texts, fields = sentence_vectors.rows(batch)
            vectors = np.asarray(ctx.embedder.embed([c.text for c in batch] + texts), dtype=np.float32)
            ctx.vectors.upsert(CHUNKS, [c.id for c in batch], vectors[:len(batch)], [{"doc_id": c.doc_id} for c in batch])
            sentence_vectors.store(ctx, ids, vectors[len(batch):], fields)
            chunks += len(batch)
            sentences += len(ids)
            after_id = page[-1][0]
            bar.update(len(batch))
            if on_page is not None:
                on_page(chunks)

    from hansa.plugin.communities import summary_vectors  # blends summary text and chunk centroids

    communities = ctx.graph.communities()
    if communities:
        with tqdm(total=len(communities), unit="summary", desc="re-embed summaries", disable=not progress) as bar:
            vectors = summary_vectors(ctx, communities)
            ctx.vectors.upsert(SUMMARIES, [c.id for c in communities], vectors, [{"level": c.level} for c in communities])
            bar.update(len(communities))
    write_json_atomic(site_file(ctx), {**recorded, "embedding": space_record(ctx.embedder)})  # the commit point
    result = ReembedResult(before, after, chunks, sentences, len(communities), time.perf_counter() - started)
    log.info("site.reembedded", **{k: v for k, v in result.to_json().items() if k not in ("before", "after")},
             model=after.model_id, model_sha256=after.model_sha256)
    return result
