"""Where an ingest's memory goes (issue 34): two measurements that `bench_build.py`'s one peak
cannot separate.

`ingest`: `hansa.plugin.ingest.ingest_paths` on a fresh embedded site (SQLite graph + Milvus Lite
in this process) over the first `--passages` SQuAD paragraphs, with the embedder replaced by seeded
random unit vectors of the real model's dimension (`--model-free`), so the run shows what the rest
of the ingest holds as the corpus grows, at the full size, in minutes: resident memory every 10
batches, then the ingest report (stage seconds included) and the seconds closing the site took
(Milvus Lite's last flush and background work). `--edit-share` then edits that share of the
documents and ingests again (`reingest`: the replace path). Without `--model-free` the real model
runs (slow: embedding-bound).

`embed`: the real embedder alone on real text (the first 128 chunks of the first 300 SQuAD
paragraphs and their answer sentences, in calls of 130 texts as an ingest makes them), peak memory
and texts/s for one `--batch-tokens`; one setting per process, because the peak is the process's.

    python scripts/profile_ingest_memory.py ingest --passages 10000 --model-free
    python scripts/profile_ingest_memory.py embed --batch-tokens 4096
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Sequence

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import benchlib  # noqa: E402  (scripts/ is not a package)


def rss_mib() -> float:
    return benchlib.mib(benchlib.rss_bytes())


class RandomEmbedder:
    """Seeded random unit vectors in the real model's space size: memory and writes as with the model, no model time."""

    def __init__(self, real: object) -> None:
        self.dim, self.model_id, self.model_sha256 = real.dim, real.model_id, ""  # type: ignore[attr-defined]
        self._rng = np.random.default_rng(0)

    def warm(self) -> None:
        pass

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        v = self._rng.standard_normal((len(texts), self.dim)).astype(np.float32)
        return v / np.linalg.norm(v, axis=1, keepdims=True)


def edited(docs: list[dict], share: float) -> list[dict]:
    """Every round(1 / share)-th document with one more sentence at its end (its first chunks keep
    their ids, the last is new): an admin's edits, re-ingested."""
    if share <= 0:
        return docs
    step = max(1, round(1 / share))
    return [dict(d, text=d["text"] + " This paragraph was edited after its first ingest.") if i % step == 0 else d
            for i, d in enumerate(docs)]


@contextmanager
def cpu_per_stage(into: dict[str, float]) -> Iterator[None]:
    """Also add up the process's CPU seconds (every thread: Milvus Lite serves and merges in this
    process) during each of ingest's timed stages: on a machine loaded by others, wall seconds
    say more about the others than about the stage."""
    from hansa.plugin import ingest

    wall = ingest._timed

    @contextmanager
    def timed(stages: dict[str, float], name: str) -> Iterator[None]:
        started = time.process_time()
        try:
            with wall(stages, name):
                yield
        finally:
            into[name] = into.get(name, 0.0) + time.process_time() - started

    ingest._timed = timed  # type: ignore[assignment]
    try:
        yield
    finally:
        ingest._timed = wall  # type: ignore[assignment]


def profile_ingest(passages: int, model_free: bool, edit_share: float = 0.0) -> None:
    from hansa.core.config import load_config
    from hansa.plugin.ingest import ingest_paths
    from hansa.plugin.install import install_site
    from hansa.plugin.site import SiteContext

    tmp = Path(tempfile.mkdtemp(prefix="profile-ingest-"))
    corpus = tmp / "corpus.jsonl"
    docs = benchlib.squad_documents(passages)
    corpus.write_text("".join(json.dumps(d) + "\n" for d in docs), encoding="utf-8")
    home = tmp / "home"
    cfg = load_config(env={**os.environ, "HANSA_HOME": str(home), "HANSA_SITE_SITE_ID": "profile",
                           "HANSA_GRAPH_BACKEND": "embedded", "HANSA_MILVUS_URI": str(home / "milvus.db")})
    with SiteContext.open(cfg) as ctx:
        install_site(ctx)
        if model_free:
            ctx.embedder = RandomEmbedder(ctx.embedder)  # type: ignore[assignment]
        write, batches, chunks, t0 = ctx.graph.write_documents, [0], [0], time.perf_counter()

        def counted(graphs):  # type: ignore[no-untyped-def]
            write(graphs)
            batches[0] += 1
            chunks[0] += sum(len(g.chunks) for g in graphs)
            if batches[0] % 10 == 0:
                benchlib.progress(f"batch {batches[0]} chunks {chunks[0]} rss {rss_mib():.0f} MiB "
                                  f"peak {benchlib.mib(benchlib.peak_rss_bytes()):.0f} MiB {time.perf_counter() - t0:.0f} s")

        ctx.graph.write_documents = counted  # type: ignore[method-assign]
        cpu: dict[str, float] = {}
        cpu_again: dict[str, float] = {}
        with cpu_per_stage(cpu):
            report = ingest_paths(ctx, [corpus])
        again = None
        if edit_share > 0:
            corpus.write_text("".join(json.dumps(d) + "\n" for d in edited(docs, edit_share)), encoding="utf-8")
            with cpu_per_stage(cpu_again):
                again = ingest_paths(ctx, [corpus])
        closing = time.perf_counter()
    # Closing Milvus Lite flushes what is unsealed and waits for its background merges and index
    # builds: work an ingest leaves behind is counted here, not hidden.
    close_seconds = time.perf_counter() - closing
    def plain(r: object, cpu: dict[str, float]) -> dict[str, object]:
        return {**{k: v for k, v in vars(r).items() if not isinstance(v, tuple)},
                "stage_cpu_seconds": {k: round(v, 3) for k, v in cpu.items()}}

    print(json.dumps({"passages": passages, "model_free": model_free, "rss_end_mib": round(rss_mib(), 1),
                      **plain(report, cpu), "close_seconds": round(close_seconds, 3),
                      "peak_rss_mib_after_close": round(benchlib.mib(benchlib.peak_rss_bytes()), 1),
                      **({"edit_share": edit_share, "reingest": plain(again, cpu_again)} if again is not None else {})}))


def profile_embed(batch_size: int, batch_tokens: int) -> None:
    from hansa.adapters.embedder.onnx import OnnxEmbedder
    from hansa.plugin import sentence_vectors
    from hansa.plugin.chunking import chunk_text

    docs = benchlib.squad_documents(300)
    chunks = [c for d in docs for c in chunk_text(d["id"], d["text"], 900, 150)][:128]
    texts = [c.text for c in chunks] + sentence_vectors.rows(chunks)[1]
    embedder = OnnxEmbedder(batch_size=batch_size, batch_tokens=batch_tokens)
    embedder.embed(["warm"])
    before = benchlib.mib(benchlib.peak_rss_bytes())
    t0 = time.perf_counter()
    for start in range(0, len(texts), 130):
        embedder.embed(texts[start:start + 130])
    seconds = time.perf_counter() - t0
    print(json.dumps({"batch_size": batch_size, "batch_tokens": batch_tokens, "texts": len(texts),
                      "texts_per_s": round(len(texts) / seconds, 1), "peak_rss_mib_model_loaded": round(before, 1),
                      "peak_rss_mib": round(benchlib.mib(benchlib.peak_rss_bytes()), 1),
                      "load_average": os.getloadavg()}))


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="what", required=True)
    ingest = sub.add_parser("ingest", help="resident memory per batch of a SQuAD ingest")
    ingest.add_argument("--passages", type=int, default=2000)
    ingest.add_argument("--model-free", action="store_true", help="random unit vectors instead of the model")
    ingest.add_argument("--edit-share", type=float, default=0.0,
                        help="then edit this share of the documents and ingest again (the replace path)")
    embed = sub.add_parser("embed", help="the embedder's peak memory and speed for one batch setting")
    embed.add_argument("--batch-size", type=int, default=64)
    embed.add_argument("--batch-tokens", type=int, default=4096)
    args = p.parse_args(argv)
    if args.what == "ingest":
        profile_ingest(args.passages, args.model_free, args.edit_share)
    else:
        profile_embed(args.batch_size, args.batch_tokens)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
