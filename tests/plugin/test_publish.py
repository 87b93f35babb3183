"""Publishing on a real small site: the envelope verifies under the site's key with hansa.sync,
versions go up only when content changes, the sequence only on delivery, and delivery to a real
HTTP endpoint follows no redirects and maps refusals to actionable errors."""
from __future__ import annotations

import json
import threading
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np
import pytest
from werkzeug.serving import make_server
from werkzeug.wrappers import Request, Response

from hansa.core.errors import BackendError, ConfigError, ConflictError, NotFoundError, VerificationError
from hansa.plugin.install import load_identity
from hansa.plugin.outbox import Outbox, RetryPolicy
from hansa.plugin.publish import PublishResult, publish_summaries, read_state, state_file
from hansa.plugin.site import SUMMARIES, SiteContext
from hansa.sync.publication import Publication, open_publication
from hansa.sync.vectors import decode_vector
from hansa.sync.wire import EmbeddingSpace

NOW = datetime(2026, 11, 21, 12, 0, tzinfo=timezone.utc)
FAST = RetryPolicy(attempts=2, base_delay_s=0.01, max_delay_s=0.05)


@pytest.fixture(autouse=True)
def empty_outbox(built_site: SiteContext) -> Iterator[None]:
    """Each test starts with nothing pending (tests/plugin/test_outbox.py covers what is left)."""
    yield
    for entry in Outbox(built_site.cfg.home).pending():
        Outbox(built_site.cfg.home).remove(entry)


def _space(ctx: SiteContext) -> EmbeddingSpace:
    return EmbeddingSpace.of(ctx.embedder)


def _open(ctx: SiteContext, path: Path) -> Publication:
    """Verify as the gateway does: the site's enrolled public key, the claimed site id, the space."""
    return open_publication(path.read_bytes(), "acme", [load_identity(ctx).public_key], _space(ctx), now=NOW)


def _publish_to_file(ctx: SiteContext, tmp_path: Path, name: str) -> tuple[PublishResult, Publication]:
    out = tmp_path / name
    result = publish_summaries(ctx, out=out, now=NOW)
    assert result.destination == str(out) and result.bytes == out.stat().st_size
    return result, _open(ctx, out)


@pytest.fixture
def publish_text(built_site: SiteContext) -> Iterator[Callable[[bool], None]]:
    """Switch the site's text policy for one test, restoring it afterwards."""
    before = built_site.cfg.site.publish_text

    def set_policy(value: bool) -> None:
        built_site.cfg.site.publish_text = value

    yield set_policy
    built_site.cfg.site.publish_text = before


def test_publication_verifies_and_carries_every_community(built_site: SiteContext, tmp_path: Path) -> None:
    result, payload = _publish_to_file(built_site, tmp_path, "pub.json")
    communities = built_site.graph.communities()
    assert payload.site_id == "acme" and payload.sequence == result.sequence
    assert payload.embedding == _space(built_site)
    assert result.summaries == len(payload.summaries) == len(communities) > 0
    assert set(payload.manifest) == {c.id for c in communities}
    assert payload.expires == "2026-11-28T12:00:00Z"  # issued + publication_ttl_hours (168)
    stored = built_site.vectors.get(SUMMARIES, [c.id for c in communities])
    by_id = {c.id: c for c in communities}
    for record in payload.summaries:
        community = by_id[record.summary_id]
        assert record.text is None  # default policy: embeddings only
        assert (record.richness.entities, record.richness.chunks, record.richness.documents) == (
            len(community.entity_ids), len(community.chunk_ids), len(community.doc_ids)
        )
        assert record.level == community.level
        np.testing.assert_array_equal(decode_vector(record.vector_b64, 384), stored[record.summary_id])


def test_another_key_does_not_verify(built_site: SiteContext, tmp_path: Path) -> None:
    from hansa.sync.keys import SiteIdentity

    out = tmp_path / "pub.json"
    publish_summaries(built_site, out=out, now=NOW)
    with pytest.raises(VerificationError):
        open_publication(out.read_bytes(), "acme", [SiteIdentity.generate().public_key], _space(built_site), now=NOW)


def test_sequence_increases_and_versions_bump_only_on_change(
    built_site: SiteContext, tmp_path: Path, publish_text: Callable[[bool], None]
) -> None:
    publish_text(False)
    first, p1 = _publish_to_file(built_site, tmp_path, "1.json")
    second, p2 = _publish_to_file(built_site, tmp_path, "2.json")
    assert second.sequence == first.sequence + 1 == p2.sequence
    assert second.changed == 0 and second.retired == 0
    assert p2.manifest == p1.manifest  # same content, same versions and hashes

    publish_text(True)  # the text now travels: every record's content changes
    third, p3 = _publish_to_file(built_site, tmp_path, "3.json")
    assert third.sequence == second.sequence + 1
    assert third.changed == len(p3.summaries)
    summaries = {c.id: c.summary for c in built_site.graph.communities()}
    for record in p3.summaries:
        assert record.version == p2.manifest[record.summary_id][0] + 1
        assert record.text == summaries[record.summary_id]

    fourth, p4 = _publish_to_file(built_site, tmp_path, "4.json")
    assert fourth.changed == 0
    assert {k: v[0] for k, v in p4.manifest.items()} == {k: v[0] for k, v in p3.manifest.items()}

    state = json.loads(state_file(built_site).read_text())
    assert state["sequence"] == fourth.sequence
    assert sorted(state["current"]) == sorted(p4.manifest)


class _Gateway:
    """A real HTTP endpoint that records what it got and answers with a programmed status."""

    def __init__(self) -> None:
        self.status = 202
        self.headers: dict[str, str] = {}
        self.answer: dict[str, Any] = {"accepted": True}
        self.requests: list[tuple[str, str, bytes, str]] = []
        self.server = make_server("127.0.0.1", 0, self._app)
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @Request.application
    def _app(self, request: Request) -> Response:
        self.requests.append((request.method, request.path, request.get_data(), request.mimetype))
        return Response(json.dumps(self.answer), status=self.status, headers=self.headers, mimetype="application/json")

    def close(self) -> None:
        self.server.shutdown()
        self.thread.join(timeout=5)


@pytest.fixture
def gateway() -> Iterator[_Gateway]:
    gw = _Gateway()
    yield gw
    gw.close()


def test_delivery_posts_the_envelope_and_saves_state_on_acceptance(built_site: SiteContext, gateway: _Gateway) -> None:
    before = read_state(built_site).sequence
    result = publish_summaries(built_site, gateway_url=gateway.url + "/", now=NOW)
    method, path, body, mimetype = gateway.requests[-1]
    assert (method, path, mimetype) == ("POST", "/v1/sites/acme/publications", "application/json")
    assert result.destination == gateway.url + "/v1/sites/acme/publications"
    assert result.gateway_response == {"accepted": True}
    assert result.sequence == before + 1 == read_state(built_site).sequence
    assert result.bytes == len(body)
    payload = open_publication(body, "acme", [load_identity(built_site).public_key], _space(built_site), now=NOW)
    assert payload.sequence == result.sequence


@pytest.mark.parametrize(
    ("status", "error", "message"),
    [
        (409, ConflictError, "sequence 3 is not above 7"),
        (403, VerificationError, "no enrolled key verifies"),
        (404, NotFoundError, "unknown site"),
        (500, BackendError, "index unavailable"),
    ],
)
def test_a_refusal_raises_and_leaves_the_state_alone(
    built_site: SiteContext, gateway: _Gateway, status: int, error: type[Exception], message: str
) -> None:
    before = state_file(built_site).read_bytes() if state_file(built_site).exists() else None
    gateway.status, gateway.answer = status, {"error": message}
    with pytest.raises(error, match=message):
        publish_summaries(built_site, gateway_url=gateway.url, now=NOW, retry=FAST)
    after = state_file(built_site).read_bytes() if state_file(built_site).exists() else None
    assert after == before
    # a refusal drops the publication; a gateway error (5xx) keeps it in the outbox for a resend
    assert len(Outbox(built_site.cfg.home).pending()) == (1 if status >= 500 else 0)


def test_redirects_are_not_followed(built_site: SiteContext, gateway: _Gateway) -> None:
    gateway.status, gateway.headers = 307, {"Location": "http://169.254.169.254/latest"}
    before = read_state(built_site).sequence
    with pytest.raises(BackendError, match="redirect"):
        publish_summaries(built_site, gateway_url=gateway.url, now=NOW)
    assert len(gateway.requests) == 1 and read_state(built_site).sequence == before


def test_an_unreachable_gateway_is_a_backend_error(built_site: SiteContext, gateway: _Gateway) -> None:
    url = gateway.url
    gateway.close()  # nothing listens on that port any more
    before = read_state(built_site).sequence
    with pytest.raises(BackendError, match="could not reach"):
        publish_summaries(built_site, gateway_url=url, now=NOW, retry=FAST)
    assert read_state(built_site).sequence == before


def test_nowhere_to_publish_and_bad_urls_are_config_errors(built_site: SiteContext) -> None:
    assert built_site.cfg.site.gateway_url == ""
    with pytest.raises(ConfigError, match="--gateway"):
        publish_summaries(built_site, now=NOW)
    with pytest.raises(ConfigError, match="http"):
        publish_summaries(built_site, gateway_url="file:///etc/passwd", now=NOW)


def test_a_site_without_communities_has_nothing_to_publish(empty_site: SiteContext, tmp_path: Path) -> None:
    with pytest.raises(NotFoundError, match="hansa site communities"):
        publish_summaries(empty_site, out=tmp_path / "pub.json", now=NOW)
    assert not (tmp_path / "pub.json").exists()
    assert not state_file(empty_site).exists()


def test_expiry_follows_the_configured_ttl(built_site: SiteContext, tmp_path: Path) -> None:
    before = built_site.cfg.site.publication_ttl_hours
    built_site.cfg.site.publication_ttl_hours = 2.0
    try:
        _, payload = _publish_to_file(built_site, tmp_path, "short.json")
    finally:
        built_site.cfg.site.publication_ttl_hours = before
    assert payload.expires == (NOW + timedelta(hours=2)).strftime("%Y-%m-%dT%H:%M:%SZ")


def test_term_statistics_are_published_without_words_of_a_single_document(built_site: SiteContext,
                                                                          tmp_path: Path) -> None:
    from hansa.plugin.vocabulary import TERMS_FILENAME, build_terms
    from hansa.sync.terms import term_keys

    site = built_site.cfg.site
    before = (site.publish_terms, site.terms_min_documents)
    try:
        _, pub = _publish_to_file(built_site, tmp_path, "terms.json")
        assert pub.terms is not None and pub.terms.min_documents == 2
        assert pub.terms.documents == built_site.graph.stats().documents
        # "Brightwater" is named by one document only: never published at the default threshold
        assert pub.terms.lookup(term_keys("Brightwater Lighthouse")).tolist() == [0, 0]
        site.terms_min_documents = 1
        with pytest.raises(ConfigError, match="terms_min_documents"):  # the stored sketch used another threshold
            publish_summaries(built_site, out=tmp_path / "stale.json", now=NOW)
        build_terms(built_site)
        _, pub = _publish_to_file(built_site, tmp_path, "terms1.json")
        assert pub.terms.lookup(term_keys("Brightwater")).tolist() == [1]
        site.publish_terms = False
        build_terms(built_site)
        assert not (built_site.cfg.home / TERMS_FILENAME).exists()
        _, pub = _publish_to_file(built_site, tmp_path, "none.json")
        assert pub.terms is None
    finally:
        site.publish_terms, site.terms_min_documents = before
        build_terms(built_site)


class _RebuildBeforeVectorRead:
    """The site's vector store, seen by a reader while `hansa site communities` runs elsewhere: the
    reader has read the graph's communities; before its read of their summary vectors, the rebuild
    commits (new vectors, the graph, stale vectors deleted). A stand-in for hansa's own VectorStore
    port around the real store; the rebuild is the real one."""

    def __init__(self, ctx: SiteContext, rebuild: Callable[[], object]) -> None:
        self._real, self._rebuild, self.rebuilt = ctx.vectors, rebuild, False

    def get(self, collection: str, ids: Any) -> Any:
        if collection == SUMMARIES and not self.rebuilt:
            self.rebuilt = True
            self._rebuild()
        return self._real.get(collection, ids)

    def __getattr__(self, name: str) -> object:
        return getattr(self._real, name)


def test_publishing_while_communities_are_rebuilt_elsewhere_reads_one_consistent_set(
    tmp_path: Path, make_config: Callable[..., Any]
) -> None:
    """Issue 34: the background re-publisher logged "N communities have no summary vector" while
    every current community had its vector: it had read the graph before a rebuild committed and
    the vectors after the rebuild deleted the stale ones."""
    import dataclasses

    from hansa.plugin.communities import build_communities
    from hansa.plugin.deletion import delete_documents
    from hansa.plugin.ingest import ingest_paths
    from hansa.plugin.install import install_site

    from tests.plugin.conftest import write_corpus

    docs = write_corpus(tmp_path / "docs")
    with SiteContext.open(make_config(tmp_path / "home")) as real:
        install_site(real)
        ingest_paths(real, [docs])
        build_communities(real)
        before = {c.id for c in real.graph.communities()}
        delete_documents(real, ["docs/volcano.md"])  # the rebuild below drops the volcano's communities
        reader = dataclasses.replace(real, vectors=_RebuildBeforeVectorRead(real, lambda: build_communities(real)))
        result, publication = _publish_to_file(reader, tmp_path, "during-rebuild.json")
        after = {c.id for c in real.graph.communities()}
        assert reader.vectors.rebuilt and before - after, "the premise: the rebuild removed communities"
        assert {s.summary_id for s in publication.summaries} == after


def test_a_community_whose_vector_is_gone_is_still_refused(tmp_path: Path, make_config: Callable[..., Any],
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    from hansa.plugin import publish
    from hansa.plugin.communities import build_communities
    from hansa.plugin.ingest import ingest_paths
    from hansa.plugin.install import install_site

    from tests.plugin.conftest import write_corpus

    monkeypatch.setattr(publish, "SET_REREAD_PAUSE_S", 0.0)
    docs = write_corpus(tmp_path / "docs")
    with SiteContext.open(make_config(tmp_path / "home")) as ctx:
        install_site(ctx)
        ingest_paths(ctx, [docs])
        build_communities(ctx)
        lost = ctx.graph.communities()[0].id
        ctx.vectors.delete(SUMMARIES, ids=[lost])
        with pytest.raises(ConflictError, match=f"1 communities have no summary vector \\(first: '{lost}'\\)"):
            publish.publish_summaries(ctx, out=tmp_path / "p.json")
