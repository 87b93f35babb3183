"""Reference routers that rank sites without calling them, and gold-site recall curves over k.

full information: every chunk embedding of every site at the gateway, sites ranked by their best
chunk. hansa may not ship it (it is exactly what must not leave a site); it is the bar summary-only
routing is measured against. centroid: one mean chunk vector per site, the simplest summary.
summaries: the gateway's own index and router over what sites publish: the signed community
summaries and their term statistics (both scored in gateway.query.route), at the gateway's
`lexical_weight`. summary_vectors and terms: each of the two alone, to show what each buys.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from hansa.evaluation.metrics import recall_at_k_curve

ROUTERS = ("summaries", "summary_vectors", "terms", "full_information", "centroid")


class FullInformationRouter:
    """Chunk ids are deterministic (plugin.chunking), so the vectors are read back from each site's
    Milvus rather than recomputed: exactly what the sites index."""

    def __init__(self, fed: Any) -> None:
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
        self.sites = sorted(set(owners))
        self._columns = {s: np.flatnonzero(self.owners == s) for s in self.sites}

    def rank_many(self, qvecs: np.ndarray) -> list[list[tuple[str, float]]]:
        """For each question vector, (site, best chunk score) best first."""
        names = list(self._columns)
        out = []
        for start in range(0, len(qvecs), 256):  # bounded memory: 256 x chunks scores at a time
            scores = qvecs[start:start + 256] @ self.matrix.T
            best = np.column_stack([scores[:, cols].max(axis=1) for cols in self._columns.values()])
            for row in best:
                order = np.argsort(-row, kind="stable")
                out.append([(names[i], float(row[i])) for i in order])
        return out

    def centroids(self) -> tuple[list[str], np.ndarray]:
        means = []
        for site in self.sites:
            mean = self.matrix[self._columns[site]].mean(axis=0)
            means.append(mean / np.linalg.norm(mean))
        return self.sites, np.vstack(means)


def summary_rankings(fed: Any, text: str, qvec: np.ndarray, top_m: int) -> dict[str, list[str]]:
    """Sites as the gateway's router ranks them from what sites publish (summaries), and from each
    of its two signals alone (summary_vectors, terms)."""
    from hansa.gateway.query.route import score_sites, site_term_scores

    index = fed.gateway_service.index
    routable = set(fed.sites)
    hits = index.search(qvec, top_m)
    lexical = site_term_scores(text, index, routable)
    weight = fed.gateway_config.gateway.lexical_weight

    def ids(scores: Sequence[Any]) -> list[str]:
        return [s.site_id for s in scores]

    return {"summaries": ids(score_sites(hits, routable, lexical=lexical, lexical_weight=weight)),
            "summary_vectors": ids(score_sites(hits, routable, lexical_weight=0.0)),
            "terms": sorted(lexical, key=lambda s: (-lexical[s], s))}


def routing_selection(fed: Any, texts: Sequence[str], qvecs: np.ndarray, gold_sites: Sequence[Sequence[str]],
                      top_m: int, top_k: int) -> dict[str, float]:
    """Gold-site recall and sites called of the gateway's summary router as configured: the ranking
    of `summary_rankings` ("summaries") cut by `[gateway] site_margin` and `top_k` (query.route.select_sites).
    Why beside the curves: a routing-only run (no site asked) then measures what a margin costs and
    buys, so the margin can be swept on the fit split (`--gateway-setting site_margin=...`)."""
    from hansa.gateway.query.route import score_sites, select_sites, site_term_scores

    gw = fed.gateway_config.gateway
    index, routable = fed.gateway_service.index, set(fed.sites)
    recall = called = 0.0
    n = 0
    for text, qvec, gold in zip(texts, qvecs, gold_sites):
        if not gold:
            continue
        ranked = score_sites(index.search(qvec, top_m), routable, lexical=site_term_scores(text, index, routable),
                             lexical_weight=gw.lexical_weight)
        chosen = {s.site_id for s in select_sites(ranked, top_k, gw.site_margin)}
        recall += len(chosen & set(gold)) / len(gold)
        called += len(chosen)
        n += 1
    return {"site_margin": gw.site_margin, "lexical_weight": gw.lexical_weight, "top_k_sites": top_k,
            "gold_site_recall": round(recall / max(n, 1), 4), "sites_called_per_query": round(called / max(n, 1), 3)}


def routing_curves(fed: Any, full: FullInformationRouter, texts: Sequence[str], qvecs: np.ndarray,
                   gold_sites: Sequence[Sequence[str]], full_ranked: Sequence[Sequence[tuple[str, float]]], top_m: int,
                   max_k: int = 8) -> dict[str, dict[str, float]]:
    """Mean gold-site recall at k = 1..max_k for each router, over questions that have gold sites."""
    names, cents = full.centroids()
    max_k = min(max_k, len(names))
    sums = {r: np.zeros(max_k) for r in ROUTERS}
    n = 0
    for text, qvec, gold, ranked_full in zip(texts, qvecs, gold_sites, full_ranked):
        if not gold:
            continue
        rankings = {
            **summary_rankings(fed, text, qvec, top_m),
            "full_information": [s for s, _ in ranked_full],
            "centroid": [names[i] for i in np.argsort(-(cents @ qvec), kind="stable")],
        }
        for r, ranked in rankings.items():
            sums[r] += recall_at_k_curve(ranked, gold, max_k)
        n += 1
    return {r: {f"k={k + 1}": round(float(v[k]) / max(n, 1), 4) for k in range(max_k)} for r, v in sums.items()}
