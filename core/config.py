"""Configuration: a TOML file, overridden by `HANSA_<SECTION>_<KEY>` environment variables.

Why both: an admin keeps a reviewed file next to the site's other configuration, while containers
and CI inject secrets and ports through the environment. Sections mirror the ports (`[neo4j]`,
`[milvus]`, `[embedder]`, `[llm]`) plus the two roles (`[site]`, `[gateway]`) and `[graph]`.

Precedence, lowest to highest: built-in defaults < TOML file < environment.
"""
from __future__ import annotations

import os
import re
import sys
from dataclasses import asdict, dataclass, field, fields, is_dataclass
from pathlib import Path
from typing import Any, Mapping

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

from hansa.core.errors import ConfigError

ENV_PREFIX = "HANSA_"
CONFIG_FILENAME = "hansa.toml"


def default_home() -> Path:
    """Where local state (keys, Milvus Lite data, embedded graph, config) lives."""
    return Path(os.environ.get("HANSA_HOME", Path.home() / ".hansa")).expanduser()


@dataclass
class Neo4jConfig:
    uri: str = "bolt://127.0.0.1:7687"
    user: str = "neo4j"
    password: str = ""
    database: str = "neo4j"


@dataclass
class GraphConfig:
    backend: str = "embedded"  # "embedded" (SQLite + igraph/leidenalg) or "neo4j" (Neo4j + GDS)
    path: str = ""  # embedded store file; default <home>/graph.sqlite


@dataclass
class MilvusConfig:
    uri: str = ""  # a file path runs Milvus Lite embedded; http://host:19530 a server; default <home>/milvus.db
    token: str = ""
    collection_prefix: str = "hansa_"


EMBEDDER_BACKENDS = ("onnx", "sentence-transformers", "openai")


@dataclass
class EmbedderConfig:
    # "onnx" (ONNX Runtime, no torch: the default, chosen by benchmarks/embed.json), "sentence-transformers"
    # (the `export` extra: same vectors, same model_id, another file hash), or "openai" (an
    # OpenAI-compatible /v1/embeddings server: another space).
    backend: str = "onnx"
    # a catalog name (`hansa embedder list`), or a local sentence-transformers directory; for "openai",
    # the served model's name. Why this default: benchmarks/README.md, "Embedders side by side".
    model: str = "all-MiniLM-L6-v2"
    device: str = "cpu"  # sentence-transformers only
    batch_size: int = 64
    precision: str = "auto"  # sentence-transformers: "fp32", "bf16" (CPU autocast; same space), "auto": bf16 where the CPU has it
    # "onnx": where catalog models (default ~/.cache/hansa/models) and a local model's export (default
    # ~/.cache/hansa/onnx) are kept; shared safely: files are checked by hash, exports keyed by digest
    cache_dir: str = ""
    threads: int = 0  # "onnx": intra-op threads; 0 lets ONNX Runtime choose (one per core)
    # "onnx": padded tokens per model call at most (texts x their longest): bounds the memory ONNX
    # Runtime keeps for activations (adapters/embedder/onnx.py, DEFAULT_BATCH_TOKENS)
    batch_tokens: int = 4096
    base_url: str = ""  # "openai": e.g. http://127.0.0.1:8080/v1
    api_key: str = ""  # "openai": better HANSA_EMBEDDER_API_KEY
    timeout_s: float = 30.0  # "openai": per request
    dim: int = 0  # "openai": expected dimension; 0 takes the server's first answer


@dataclass
class LLMConfig:
    base_url: str = ""  # empty: no LLM, every stage uses its extractive/NLP path
    api_key: str = ""
    model: str = ""
    timeout_s: float = 60.0


# A graph_map identifier (label, relationship type, property key) reaches Cypher backtick-quoted
# inside the statement text, where no parameter can stand: so only plain identifiers are accepted.
IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")


@dataclass
class GraphMapConfig:
    """`[site.graph_map]`: the organization's own graph, mapped to hansa's documents, entities and
    relations (plugin/graph_map.py; Neo4j only). Read-only: hansa never writes to these labels.
    Off while `document_label` is empty."""

    document_label: str = ""  # label of the organization's document nodes
    document_id: str = "id"  # property: the document's stable id (string or number)
    document_title: str = ""  # property: its title ("" : the id)
    document_text: str = "text"  # property: the text hansa chunks and embeds, as ingest does a file's
    entity_labels: list[str] = field(default_factory=list)  # labels of the entity nodes ([]: no mapped entities)
    entity_name: str = "name"  # property: an entity's name (entities are keyed by the normalized name)
    mention_type: str = ""  # relationship between a document and the entities it names (either direction)
    relation_types: list[str] = field(default_factory=list)  # relationships between entities used as relations
    extract: bool = False  # also spot entities in the text with hansa's rule-based extractor
    source: str = "graph"  # the mapped documents' source: their ids are "<source>/<document id>"
    batch_docs: int = 256  # documents read (one read transaction) and written per batch

    @property
    def enabled(self) -> bool:
        return bool(self.document_label)


def check_graph_map(m: GraphMapConfig, where: str = "site.graph_map") -> None:
    """Raise ConfigError naming the first unusable setting of an enabled mapping."""
    if not m.enabled:
        return
    for key in ("entity_labels", "relation_types"):
        if not isinstance(getattr(m, key), list):
            raise ConfigError(f"{where}.{key} must be a list of names, e.g. [\"Person\"], not {getattr(m, key)!r}")
    if not isinstance(m.extract, bool):
        raise ConfigError(f"{where}.extract must be true or false, not {m.extract!r}")
    required = {"document_label": m.document_label, "document_id": m.document_id, "document_text": m.document_text}
    if m.entity_labels:
        required["entity_name"] = m.entity_name
    for key, value in required.items():
        if not value:
            raise ConfigError(f"{where}.{key} is empty: the mapping needs it")
    names = [(k, getattr(m, k)) for k in ("document_label", "document_id", "document_title", "document_text",
                                           "entity_name", "mention_type")]
    names += [(f"entity_labels[{i}]", v) for i, v in enumerate(m.entity_labels)]
    names += [(f"relation_types[{i}]", v) for i, v in enumerate(m.relation_types)]
    for key, value in names:
        if not isinstance(value, str):
            raise ConfigError(f"{where}.{key} must be a string, not {value!r}")
        if value and not IDENTIFIER.fullmatch(value):
            raise ConfigError(
                f"{where}.{key} = {value!r} is not a plain identifier: use letters, digits and '_' "
                "(not starting with a digit, at most 128 characters); labels, types and property keys "
                "with other characters cannot be mapped"
            )
    if (m.mention_type or m.relation_types) and not m.entity_labels:
        raise ConfigError(f"{where}.entity_labels is empty, but mention_type/relation_types need entity labels to map")
    if m.entity_labels and not m.mention_type:
        raise ConfigError(f"{where}.mention_type is empty: name the relationship linking documents to the entities they mention")
    if not isinstance(m.source, str) or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}", m.source):
        raise ConfigError(f"{where}.source = {m.source!r}: use letters, digits, '.', '_' or '-' (at most 64)")
    if not isinstance(m.batch_docs, int) or not 1 <= m.batch_docs <= 10_000:
        raise ConfigError(f"{where}.batch_docs must be an integer in [1, 10000], not {m.batch_docs!r}")


@dataclass
class SiteConfig:
    site_id: str = ""
    host: str = "127.0.0.1"
    port: int = 8701
    gateway_url: str = ""
    chunk_size: int = 900  # characters: all-MiniLM-L6-v2 reads at most 256 word pieces (~1000 characters of English)
    chunk_overlap: int = 150
    min_community_size: int = 3
    # Leiden resolution. Higher gives more, smaller communities: better routing, less aggregation
    # per published vector. Measured on MTRAG, 16 random shards: gamma 1 -> 27 communities/site,
    # gold-site recall@4 0.876; gamma 8 -> 81/site, 0.941 (benchmarks/README.md).
    leiden_gamma: float = 8.0
    # The summary budget: at most one published summary per this many chunks (0: no budget). The
    # smallest communities are merged into their best-linked neighbours until the site is within it
    # (plugin/communities.py, summary_budget), so the gateway's storage stays a bounded share of the
    # corpus at any site size. SQuAD, 16 sites x ~1,640 chunks (fit split, benchmarks/README.md): 64
    # brings the gateway from ~33% to 4.5% of the raw corpus, at ~7 points of summary-routing recall@4.
    # Off by default: on small sites (MTRAG's ~90 passages) a per-chunk budget would leave 1-2 summaries.
    chunks_per_summary: int = 0
    # What a published summary vector is: "blend" (summary text embedding + mean of the community's
    # chunk embeddings, renormalized), "text" (summary text only) or "centroid" (chunks only).
    summary_vector: str = "blend"
    # Levels of communities a site builds and publishes (plugin/hierarchy.py): level 0 is Leiden's
    # partition above, each coarser level clusters the one below (communities as nodes, summed
    # relation weight as edges) until a level holds at most 4 communities or nothing merges.
    # 1: level 0 alone. Routing over the levels has not beaten level 0 alone (benchmarks/README.md,
    # "Community levels"), so levels are opt-in.
    community_levels: int = 1
    leiden_seed: int = 42
    # A local community refresh (plugin/communities.py, `detect`) checks its partition against the
    # last unseeded Leiden run on record, instead of running Leiden over the whole graph again, while
    # at most this share of the documents changed since that run; past it (or when the check fails)
    # the refresh runs one. 0: every refresh runs one (the exact check, as before issue 34's v2).
    drift_reference_max_change: float = 0.25
    # Summary text vectors kept by content in the site's home (plugin/communities.py,
    # SUMMARY_TEXT_CACHE): a build embeds only summary texts no stored summary has. Exact: the same
    # text gives the vector it gave before. Most of a refresh's time was embedding summaries.
    summary_text_cache: bool = True
    # A community an edit touched keeps the summary text of the stored community it shares the most
    # members with when their Jaccard overlap is at least this and none of that community's documents
    # changed (its text quotes only documents the site still holds as they were); its vector is then
    # the stored text's (from the cache above) blended with its current chunks. 0: always summarize
    # a touched community again (benchmarks/README.md, "Incremental refresh vs a full rebuild").
    summary_keep_overlap: float = 0.8
    publish_text: bool = False  # policy: send summary text with the embedding (default: none)
    # Term statistics published beside the summaries (sync.terms): hashed words with the number of
    # documents using each, for the gateway's CORI routing. A word fewer than terms_min_documents
    # documents use is never published; publish_terms = false publishes none (routing then uses the
    # summary vectors alone: SQuAD 16 sites, recall@4 0.71 instead of 0.82, benchmarks/README.md).
    publish_terms: bool = True
    terms_min_documents: int = 2
    publication_ttl_hours: float = 168.0
    # `hansa site serve` re-publishes when less than this share of the TTL remains before the
    # gateway's copy expires, or when the summaries changed; it checks every republish_check_s.
    republish_remaining_share: float = 0.5
    republish_check_s: float = 60.0
    # What an answer may reveal (plugin/answer_policy.py): at most answer_max_sentences sentences and
    # answer_max_citations cited documents, whatever a client's top_k asks; documents none of the
    # sentences come from are listed only with answer_unused_documents; titles leave unless
    # answer_titles = false; a file's citation carries its file name ("name"; its id stays the
    # site-relative <source>/<path>), its source and path ("relative") or neither, under a short
    # opaque id ("hidden") (answer_sources).
    answer_max_sentences: int = 3
    # Distributed reading (plugin/retrieval.py): "packaged" ranks this site's candidate sentences
    # with the reader the gateway uses (adapters/reader), so what leaves answers the question rather
    # than resembles it; "none" ranks by cosine; or a reader model directory. The site holds the
    # text, so the reading work scales with the federation; the gateway re-reads what arrives.
    reader: str = "none"
    answer_max_citations: int = 10
    answer_unused_documents: bool = False
    answer_titles: bool = True
    answer_sources: str = "name"
    # The federation gateway's Ed25519 public key (base64, as `hansa gateway` prints it): the site
    # answers only retrieve requests signed with it (RFC 9421).
    gateway_public_key: str = ""
    # Production serving (`serve`, core/wsgi_server.py): worker processes (gunicorn), TLS served
    # directly from PEM files, or `proxy_hops` trusted reverse proxies whose X-Forwarded-Proto/-Host/
    # -Port/-For headers say which URL the client used (0: trust no forwarded header).
    workers: int = 1
    tls_cert: str = ""
    tls_key: str = ""
    proxy_hops: int = 0
    # The organization's own Neo4j graph as the site's corpus (`hansa site map`): a TOML table.
    graph_map: GraphMapConfig = field(default_factory=GraphMapConfig)


@dataclass
class GatewayConfig:
    host: str = "127.0.0.1"
    port: int = 8700
    top_m_summaries: int = 128  # summaries matched per question (DGRAG's m)
    top_k_sites: int = 5  # at most this many sites are asked (DGRAG's k) ...
    # ... and only those scoring within this of the best. With lexical_weight, both chosen on the
    # MTRAG and SQuAD fit splits (gateway/query/route.py says how); summaries alone used 0.24.
    # Both are in the embedder's cosine units: left out of the configuration, a gateway opened from
    # it uses its embedder's (adapters/embedder/scales.toml); these defaults are all-MiniLM-L6-v2's.
    site_margin: float = 0.4
    # Weight of a site's term statistics (its CORI score as a share of the best site's) beside its
    # summary match; 0 routes by summary vectors alone.
    lexical_weight: float = 0.3
    # Which community levels' summaries vote in summary routing (gateway/query/route.py): "all"
    # (a site's best match over every level it publishes, GraphRAG's coarse summaries included) or
    # "finest" (level 0 only; [site] community_levels). "all" has not beaten "finest" (benchmarks/
    # README.md, "Community levels").
    route_levels: str = "finest"
    # Fusion's citation ranking weighs each site's documents by how well the site matched the question
    # at routing (gateway/query/fusion.py, CORI's result merging): a factor 1 - w + w x (the site's routing
    # score / the best asked site's). 0: the sites' own scores alone. 0.2 was fit on SQuAD's fit split
    # (scripts/sweep_fusion.py, benchmarks/site_prior_fit.json; more weight lost recall).
    fusion_site_prior: float = 0.2
    # ... and by how much of the question (rare words weighing most) each site's answer sentences
    # use (gateway/query/route.py AnswerCoverage): a factor 1 - w + w x that share. 0: not weighed. 0.5
    # was fit on SQuAD's fit split (scripts/sweep_fusion.py --param answer_coverage,
    # benchmarks/answer_coverage_fit.json); on the report split it ranks the gold document higher
    # (MRR +3 points) without raising evidence recall@10 (benchmarks/README.md).
    fusion_answer_coverage: float = 0.5
    # The reader the gateway judges answers with (gateway/query/reading.py): "packaged" (the default:
    # the cross-encoder shipped in adapters/reader/model, its card beside it), "none", or a model
    # directory. Its score replaces cosine as an answer sentence's relevance; below `reader_floor`
    # (negative: the model's own fit-split calibration, a floor per kind of question,
    # gateway/query/reading.py; 0..1: that one floor) a sentence supports nothing, and with
    # none above it the gateway abstains. `reader_pool`: sentences read per question (the best by
    # cosine). Default since the per-kind floors: benchmarks/README.md "The reader".
    reader: str = "packaged"
    reader_floor: float = -1.0
    reader_pool: int = 12
    # A further answer sentence scores at least this share of the best one's (negative: the model's
    # calibration, else 0.5).
    reader_relative_floor: float = -1.0
    # With a reader, an offered sentence the gateway measured below this cosine to the question is
    # not about it and answers nothing, however the reader scores it (the reader, trained on SQuAD,
    # reads "keeping the cash in a savings account" as answering "What items should I keep in the
    # safe room?"). In the embedder's cosine units like site_margin: left out, the embedder's
    # (adapters/embedder/scales.toml); 0 turns it off.
    topic_floor: float = 0.25
    # Abstain when the best passages the sites returned hold none of the question's content words
    # (gateway/query/abstain.py, NO_SHARED_WORD): the sites hold nothing on it, and what came back
    # is their nearest filler. Not applied to the gate's look at an origin. Measured:
    # benchmarks/README.md, "Questions no site holds".
    abstain_without_question_words: bool = True
    # With a reader: abstention after reading (a logistic model over the final evidence and the
    # reader's best score): the calibration's `read_abstain` when fit for that reader (`hansa gateway
    # calibrate` from reader rows), else the one the reader's card ships (evaluation/reader_abstain.py).
    # Measured: benchmarks/README.md, "Abstention after reading".
    read_abstain: bool = True
    # With a reader: follow-up rounds that ask about the names in the best-read sentence while the
    # reader supports no answer (gateway/query/hops.py); 0: none. Bounded by the request's budget.
    second_hops: int = 1
    # How long a round of site calls may take, counted from when the gateway began working toward
    # it (the query's arrival, or the previous round's end): the gateway's own routing and
    # assessment come out of it.
    site_timeout_s: float = 10.0
    # ... and a round stops waiting up to this much earlier, keeping back what the gateway's work
    # after a round took for this process's recent questions cut at a deadline (their 95th
    # percentile: gateway/query/call.py), so a hung site costs the user the deadline, not the
    # deadline plus the final fusion. 0: off.
    finish_reserve_max_ms: float = 200.0
    # Which router answers HTTP queries: "summary" (DGRAG summary matching) or "learned" (RAGRoute's
    # model from <home>/gateway/router/model.json, trained by `hansa gateway router train`; summary
    # matching until a usable model exists). gateway/query/learned/ says how it learns.
    router: str = "summary"
    # The strategy HTTP queries run with (gateway/query/policy.py named_policy): "hansa" (the
    # engine's defaults: calibrated escalation when the calibration holds one, else one round of
    # summary routing), "one_round", "tiers" / "refine" (SCOUT-RAG's tiers, with budgeted
    # refinement), "escalate", "gated" (an origin's own answer first) or "learned" (RAGRoute's router).
    # Every strategy `hansa eval` reports can be served.
    strategy: str = "hansa"
    router_explore_share: float = 0.05  # share of questions that also ask router_explore_sites random sites
    router_explore_sites: int = 2
    router_log_max_records: int = 50_000  # outcome log: kept records = at most twice this
    router_target_recall: float = 0.95  # training picks the threshold reaching this per-question recall
    max_request_bytes: int = 8 * 1024 * 1024
    # The longest a site's publication may be signed to stay in force (expires - issued_at). Why:
    # a publication is the site's word until it expires, so a long one outlives a stolen key's
    # revocation window and a site that left; sites sign [site] publication_ttl_hours (7 days) and
    # `hansa site serve` re-signs before half of it is gone, so 30 days leaves them ample room.
    max_publication_lifetime_days: float = 30.0
    allow_private_addresses: bool = False
    # Token buckets keyed by verified identity (API key name; publishing site id). A query costs one
    # token per site it asks, so fan-out, not request count, is what a client spends.
    query_burst: int = 120
    query_refill_per_s: float = 2.0
    publish_burst: int = 10
    publish_refill_per_s: float = 1 / 60
    # Replicas on several hosts (docs/production.md, "Replicas on several hosts"): one "primary" accepts
    # publications and, on a Milvus server, mirrors each site's head into it (gateway/index/head_mirror.py);
    # a "follower" shares that Milvus server, refuses publications, and at a request at least
    # follow_interval_s after its last look loads the sets the primary mirrored since.
    role: str = "primary"
    follow_interval_s: float = 2.0
    # Production serving (`serve`, core/wsgi_server.py): worker processes (gunicorn), TLS served
    # directly from PEM files, or `proxy_hops` trusted reverse proxies whose X-Forwarded-Proto/-Host/
    # -Port/-For headers say which URL the client used (0: trust no forwarded header).
    workers: int = 1
    # Questions one worker answers at once (threads; core/wsgi_server.py says why the gateway needs
    # more than one: a request mostly waits on sites, up to site_timeout_s when one hangs).
    threads: int = 16
    # Embeddings the gateway keeps per worker (questions, and the answer sentences fusion measures:
    # adapters/embedder/memo.py; 0: none). Exact: the same text always gives the same vector. Why:
    # fusion embeds the sentences sites answer with, and the same documents answer again and again;
    # scripts/bench_load.py measured the fuse stage at p50 259 ms, p99 1.8 s without it under load.
    embedding_memo_entries: int = 16384
    # A catalog embedder the federation is moving to (adapters/embedder/catalog.py): publications made
    # with it are verified and kept in a staged index (not routed) until the gateway's [embedder]
    # model is set to it, when the staged sets become the index at start: no window where routing is
    # empty. "" : none. Same dimension as the current embedder (one durable collection holds both).
    next_embedder: str = ""
    tls_cert: str = ""
    tls_key: str = ""
    proxy_hops: int = 0
    # Site reliability learned from fusion (gateway/query/reliability.py): how fast old evidence fades.
    reliability_half_life_hours: float = 168.0
    # Dispute breadth (gateway/query/conduct.py): a site that has stood against at least
    # `dispute_breadth` distinct sites in contradictions, and `dispute_breadth_ratio` times the other
    # sites' median (its own disputes left out), is broadly disputed: its side counts for nothing against a site that is
    # not, and its agreement corroborates nobody. 0: off. Disputes older than `dispute_memory_hours`
    # are forgotten. Argued, not fitted (3 distinct opponents: one liar or two colluders disputing a
    # site never make it broad); measured in benchmarks/README.md, "A lying enrolled member".
    dispute_breadth: int = 3
    dispute_breadth_ratio: float = 3.0
    dispute_memory_hours: float = 720.0
    # A broadly disputed site's sentences fill an answer only where no other site's sentence
    # answers the question (gateway/query/fusion.py, "Last resort"): a liar's altered sentence that
    # nobody happened to contradict no longer rides beside honest answers. false: they rank with the
    # others. Measured in benchmarks/README.md, "A lying enrolled member".
    disputed_last_resort: bool = True
    # Standing (gateway/query/reliability.py, conflicts.py): a site whose reliability holds fewer than
    # `dispute_standing` confirmations (something independent of it confirmed its sentences; copies
    # of another site's text confirm nothing) cannot win or tie a contradiction against a site that
    # holds them (decayed from when each was earned, so at 2.0 a site needs a third). 0: off. Argued,
    # not fitted; measured in benchmarks/README.md, "A lying enrolled member".
    dispute_standing: float = 2.0
    # Routing never asks a site without standing alone (gateway/query/route.py `accompanied`): the
    # best-ranked site with standing is asked beside it, so a newcomer whose summaries match a
    # question best cannot keep it from the honest holder. false: the router's selection as it is
    # (a closed federation of members that trust each other saves the call). Measured in
    # benchmarks/README.md, "A lying enrolled member".
    unproven_never_alone: bool = True
    # The gate's and abstention's calibration (gateway/query/calibration.py), relative to the
    # gateway home (<home>/gateway) unless absolute. Missing or corrupt: safe defaults, one log line.
    calibration_file: str = "gate-calibration.json"
    # The read-only admin page (/admin, gateway/http/admin_page.py). Empty: no admin page. Set it from the
    # environment (HANSA_GATEWAY_ADMIN_KEY) rather than a file; at least 24 characters, and never a
    # client API key (those start with "hansa_"): e.g. `python -c "import secrets; print(secrets.token_urlsafe(32))"`.
    admin_key: str = ""
    # How many answered queries (with their traces) the admin page keeps, newest first; 0: none.
    recent_queries: int = 50
    # Conversation-aware routing (gateway/query/request.py): a follow-up question is routed and
    # retrieved as itself plus this many salient content words of the user's earlier turns, a turn's
    # words weighted by conversation_decay per turn back (0 words: the last turn alone).
    conversation_carry_words: int = 16  # chosen on the fit split: benchmarks/conversation_routing.json
    conversation_decay: float = 0.5


@dataclass
class ClientConfig:
    """`hansa query`: the gateway a query client asks and its API key (better HANSA_CLIENT_API_KEY)."""

    gateway_url: str = ""  # empty: [site] gateway_url, then http://[gateway] host:port
    api_key: str = ""
    timeout_s: float = 120.0  # the whole query, as the client waits for it


@dataclass
class Config:
    home: Path = field(default_factory=default_home)
    neo4j: Neo4jConfig = field(default_factory=Neo4jConfig)
    graph: GraphConfig = field(default_factory=GraphConfig)
    milvus: MilvusConfig = field(default_factory=MilvusConfig)
    embedder: EmbedderConfig = field(default_factory=EmbedderConfig)
    llm: LLMConfig = field(default_factory=LLMConfig)
    site: SiteConfig = field(default_factory=SiteConfig)
    gateway: GatewayConfig = field(default_factory=GatewayConfig)
    client: ClientConfig = field(default_factory=ClientConfig)
    # "section.key" of every setting the file or the environment gave (load_config): a default that
    # depends on another setting (the embedder's cosine-unit defaults, adapters/embedder/scale.py)
    # applies only where the operator left the setting out. A program that builds its Config in code
    # and sets such a setting names it here too (explicit=frozenset({"gateway.site_margin"})), or its
    # value gives way to the embedder's.
    explicit: frozenset[str] = frozenset()

    # Derived locations: one place that says where each piece of local state lives.
    @property
    def graph_path(self) -> Path:
        return Path(self.graph.path) if self.graph.path else self.home / "graph.sqlite"

    @property
    def milvus_uri(self) -> str:
        return self.milvus.uri or str(self.home / "milvus.db")

    @property
    def keys_dir(self) -> Path:
        return self.home / "keys"

    @property
    def onnx_cache_dir(self) -> Path | None:
        """None: the embedder's per-user default (adapters/embedder/onnx_export.py says why)."""
        return Path(self.embedder.cache_dir).expanduser() if self.embedder.cache_dir else None

    @property
    def state_path(self) -> Path:
        """The SQLite (WAL) file a service's worker processes share (core/shared_state.py)."""
        return self.home / "state.sqlite"


ROUTERS = ("summary", "learned")
ROLES = ("primary", "follower")
ROUTE_LEVELS = ("finest", "all")
MAX_RECENT_QUERIES = 1000  # each record holds a whole trace: the ring stays small
SECTIONS = ("neo4j", "graph", "milvus", "embedder", "llm", "site", "gateway", "client")


def _coerce(value: str, target_type: Any, name: str) -> Any:
    """Env vars are strings: turn them into the field's declared type or say which one is wrong."""
    try:
        if target_type in (bool, "bool"):
            lowered = value.strip().lower()
            if lowered in ("1", "true", "yes", "on"):
                return True
            if lowered in ("0", "false", "no", "off", ""):
                return False
            raise ValueError(value)
        if target_type in (int, "int"):
            return int(value)
        if target_type in (float, "float"):
            return float(value)
        if target_type in (list, "list[str]"):  # from the environment: comma-separated names
            return [part.strip() for part in value.split(",") if part.strip()]
    except ValueError as exc:
        raise ConfigError(f"{name}={value!r} is not a valid {target_type}") from exc
    return value


def _apply(section_obj: Any, values: Mapping[str, Any], where: str) -> None:
    known = {f.name: f for f in fields(section_obj)}
    for key, value in values.items():
        if key not in known:
            raise ConfigError(f"unknown key {key!r} in {where}; known keys: {', '.join(sorted(known))}")
        ftype = known[key].type
        current = getattr(section_obj, key)
        if is_dataclass(current):  # a nested table, e.g. [site.graph_map]: file only
            if not isinstance(value, dict):
                raise ConfigError(f"{where}.{key} must be a TOML table, not {value!r}")
            _apply(current, value, f"{where}.{key}")
            continue
        if isinstance(value, str) and ftype not in ("str", str):
            value = _coerce(value, ftype, f"{where}.{key}")
        setattr(section_obj, key, value)


def load_config(path: str | os.PathLike[str] | None = None, env: Mapping[str, str] | None = None) -> Config:
    """Build the effective configuration.

    `path` defaults to `$HANSA_CONFIG`, then `<home>/hansa.toml` if it exists.
    """
    env = os.environ if env is None else env
    cfg = Config(home=Path(env.get("HANSA_HOME", default_home())).expanduser())
    path = path or env.get("HANSA_CONFIG")
    candidate = Path(path) if path else cfg.home / CONFIG_FILENAME
    if path and not candidate.is_file():
        raise ConfigError(f"config file {candidate} does not exist")
    data: dict[str, Any] = {}
    if candidate.is_file():
        try:
            data = tomllib.loads(candidate.read_text(encoding="utf-8"))
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            raise ConfigError(f"{candidate}: not valid TOML: {exc}") from exc
        for section, values in data.items():
            if section == "home":
                cfg.home = Path(values).expanduser()
                continue
            if section not in SECTIONS or not isinstance(values, dict):
                raise ConfigError(f"{candidate}: unknown section [{section}]; sections: {', '.join(SECTIONS)}")
            _apply(getattr(cfg, section), values, f"{candidate}[{section}]")
    for section in SECTIONS:
        obj = getattr(cfg, section)
        prefix = f"{ENV_PREFIX}{section.upper()}_"
        overrides = {
            k[len(prefix):].lower(): v for k, v in env.items() if k.startswith(prefix)
        }
        nested = {}
        for f in fields(obj):  # HANSA_SITE_GRAPH_MAP_<KEY> sets [site.graph_map] <key>
            if is_dataclass(getattr(obj, f.name)):
                head = f"{f.name}_"
                nested[f.name] = {k[len(head):]: overrides.pop(k) for k in list(overrides) if k.startswith(head)}
        if overrides:
            _apply(obj, overrides, f"environment {prefix}*")
        for name, values in nested.items():
            if values:
                _apply(getattr(obj, name), values, f"environment {prefix}{name.upper()}_*")
    cfg.explicit = frozenset(
        {f"{section}.{key}" for section, values in data.items() if isinstance(values, dict) for key in values}
        | {f"{section}.{k[len(ENV_PREFIX) + len(section) + 1:].lower()}" for section in SECTIONS
           for k in env if k.startswith(f"{ENV_PREFIX}{section.upper()}_")})
    if cfg.graph.backend not in ("embedded", "neo4j"):
        raise ConfigError(f"graph.backend must be 'embedded' or 'neo4j', not {cfg.graph.backend!r}")
    if cfg.gateway.role not in ROLES:
        raise ConfigError(f"gateway.role must be one of {', '.join(ROLES)}, not {cfg.gateway.role!r}")
    if not 0 < cfg.gateway.follow_interval_s <= 3600:
        raise ConfigError(f"gateway.follow_interval_s must be in (0, 3600] seconds, not {cfg.gateway.follow_interval_s}")
    if cfg.gateway.route_levels not in ROUTE_LEVELS:
        raise ConfigError(f"gateway.route_levels must be one of {', '.join(ROUTE_LEVELS)}, not {cfg.gateway.route_levels!r}")
    if cfg.gateway.router not in ROUTERS:
        raise ConfigError(f"gateway.router must be one of {', '.join(ROUTERS)}, not {cfg.gateway.router!r}")
    if not 0.0 <= cfg.gateway.router_explore_share <= 1.0:
        raise ConfigError(f"gateway.router_explore_share must be in [0, 1], not {cfg.gateway.router_explore_share}")
    if cfg.gateway.dispute_standing < 0:
        raise ConfigError(f"gateway.dispute_standing must be >= 0 (0: off), not {cfg.gateway.dispute_standing}")
    if cfg.gateway.dispute_breadth < 0 or cfg.gateway.dispute_breadth_ratio < 0 or cfg.gateway.dispute_memory_hours <= 0:
        raise ConfigError("gateway.dispute_breadth and dispute_breadth_ratio must be >= 0 (0: off) and "
                          f"dispute_memory_hours > 0, not {cfg.gateway.dispute_breadth}, "
                          f"{cfg.gateway.dispute_breadth_ratio}, {cfg.gateway.dispute_memory_hours}")
    if not 0 <= cfg.gateway.recent_queries <= MAX_RECENT_QUERIES:
        raise ConfigError(f"gateway.recent_queries must be in [0, {MAX_RECENT_QUERIES}], not {cfg.gateway.recent_queries}")
    if cfg.gateway.max_publication_lifetime_days <= 0:
        raise ConfigError("gateway.max_publication_lifetime_days must be > 0 (every publication expires), "
                          f"not {cfg.gateway.max_publication_lifetime_days}")
    if cfg.gateway.embedding_memo_entries < 0:
        raise ConfigError(f"gateway.embedding_memo_entries must be >= 0 (0: off), not {cfg.gateway.embedding_memo_entries}")
    if cfg.embedder.backend not in EMBEDDER_BACKENDS:
        raise ConfigError(f"embedder.backend must be one of {', '.join(EMBEDDER_BACKENDS)}, not {cfg.embedder.backend!r}")
    check_graph_map(cfg.site.graph_map)
    if cfg.site.terms_min_documents < 1:
        raise ConfigError(f"site.terms_min_documents must be >= 1, not {cfg.site.terms_min_documents}")
    return cfg


def as_dict(cfg: Config) -> dict[str, Any]:
    """The effective configuration for `--show-config`, with secrets masked."""
    out: dict[str, Any] = {"home": str(cfg.home)}
    for section in SECTIONS:
        obj = getattr(cfg, section)
        assert is_dataclass(obj)
        values = {}
        for f in fields(obj):
            v = getattr(obj, f.name)
            if is_dataclass(v):
                values[f.name] = asdict(v)
                continue
            values[f.name] = "***" if (f.name in ("password", "token", "api_key", "admin_key") and v) else v
        out[section] = values
    return out
