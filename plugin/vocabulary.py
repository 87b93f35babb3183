"""The site's term statistics (sync.terms): computed when its communities are built, published
with its summaries.

Why then: both describe the same corpus state, and `hansa site communities` is the step an admin
already runs after ingesting or deleting; reading every chunk's text once more there costs ~1 s per
10,000 chunks, while doing it at each publish would repeat it on every background re-publication.
The sketch is kept in `<home>/terms.json` (replaced atomically): a crash leaves the previous one
whole, and the next `communities` run rewrites it. Only words at least `[site]
terms_min_documents` documents use are kept (sync.terms says what the sketch reveals).
"""
from __future__ import annotations

import json
from typing import Iterator

from hansa.core.errors import ConfigError, InputError
from hansa.core.files import write_json_atomic
from hansa.core.logs import get_logger
from hansa.plugin.site import SiteContext
from hansa.sync.terms import TermSketch, read_sketch

log = get_logger(__name__)

TERMS_FILENAME = "terms.json"
PAGE = 2000


def _corpus(ctx: SiteContext) -> Iterator[tuple[str, str]]:
    """(doc_id, chunk text) of every stored chunk, read a page at a time."""
    after = None
    while True:
        page = ctx.graph.chunk_texts(after=after, limit=PAGE)
        for _, doc_id, text in page:
            yield doc_id, text
        if len(page) < PAGE:
            return
        after = page[-1][0]


def build_terms(ctx: SiteContext) -> TermSketch | None:
    """Compute and store the site's sketch (None, and no file, when `publish_terms` is off)."""
    path = ctx.cfg.home / TERMS_FILENAME
    if not ctx.cfg.site.publish_terms:
        path.unlink(missing_ok=True)
        return None
    sketch = TermSketch.from_documents(_corpus(ctx), ctx.cfg.site.terms_min_documents)
    write_json_atomic(path, sketch.record().to_json())
    log.info("terms.built", terms=len(sketch), documents=sketch.documents, bytes=sketch.stored_bytes(),
             min_documents=sketch.min_documents)
    return sketch


def read_terms(ctx: SiteContext) -> TermSketch | None:
    """The stored sketch to publish, or None: `publish_terms` off, or built by an older hansa (the
    next `hansa site communities` writes one; the gateway then routes this site by its vectors)."""
    if not ctx.cfg.site.publish_terms:
        return None
    path = ctx.cfg.home / TERMS_FILENAME
    if not path.is_file():
        log.info("terms.missing", hint="run `hansa site communities` to publish term statistics")
        return None
    try:
        sketch = read_sketch(json.loads(path.read_text(encoding="utf-8")), str(path))
    except (ValueError, InputError) as exc:
        raise ConfigError(f"{path} is damaged ({exc}): run `hansa site communities` to rebuild it") from exc
    if sketch.min_documents != ctx.cfg.site.terms_min_documents:
        raise ConfigError(
            f"{path} keeps words used by >= {sketch.min_documents} documents but [site] terms_min_documents is "
            f"{ctx.cfg.site.terms_min_documents}: run `hansa site communities` to apply the new threshold"
        )
    return sketch
