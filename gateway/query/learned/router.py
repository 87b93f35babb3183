"""`LearnedRouter`: RAGRoute's learned relevance model behind the engine's `Router` contract.

rank(): every routable site with summary hits gets site-agnostic features (features.py) and, when a
model is loaded, P(site contributes to the answer); sites are ordered by that probability (cold
start: by summary score, exactly as `SummaryRouter`). select(): the sites whose probability reaches
the model's calibrated threshold, at most k and at least the best one, so fan-out follows how
sure the model is; without a model, summary matching's margin rule. Then, on a configurable share
of questions (`explore_share`), `explore_sites` more sites drawn at random from the rest: the only
way labels ever exist for sites the router would not have asked.

observe() (called by the engine after fusion) appends the question's outcome to the OutcomeLog.

The model file is re-read when it changes on disk (`hansa gateway router train` while the gateway
serves); a missing or corrupt file leaves routing on summary matching, with one log line.
"""
from __future__ import annotations

import random
import threading
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Collection, Mapping, Sequence

import numpy as np

from hansa.core.config import GatewayConfig
from hansa.core.logs import get_logger
from hansa.adapters.embedder.scale import default_scale, scale_of
from hansa.gateway.query.policy import QueryPolicy
from hansa.gateway.client import OK, SiteCall
from hansa.gateway.query.fusion import FusedAnswer
from hansa.gateway.index.summaries import SummaryHit, SummaryIndex
from hansa.gateway.query.learned.features import Published, site_features
from hansa.gateway.query.learned.model import RouterModel, load_model
from hansa.gateway.query.learned.outcomes import OutcomeLog
from hansa.gateway.query.route import SiteScore, select_sites

log = get_logger(__name__)

MODEL_FILE = "model.json"


@dataclass(frozen=True)
class LearnedScore(SiteScore):
    """A SiteScore (score stays the summary-matching score) with the model's view of the site."""

    features: tuple[float, ...] = ()
    probability: float | None = None  # None: no model (cold start)
    explored: bool = False

    def to_json(self) -> dict[str, object]:
        out = super().to_json()
        if self.probability is not None:
            out["probability"] = round(self.probability, 4)
        return out


def index_published(index: SummaryIndex) -> Published:
    """(summaries, entities) a site has published, read from the gateway's summary index."""
    def published(site_id: str) -> tuple[int, int]:
        current = index.current(site_id)
        if current is None:
            return 0, 0
        return len(current.rows), sum(row[4] for row in current.rows.values())
    return published


@dataclass
class LearnedRouter:
    model_path: Path | None
    published: Published
    outcomes: OutcomeLog | None = None
    explore_share: float = 0.0
    explore_sites: int = 2
    # cold start: summary matching's rule (its scores are the summaries'), in the embedder's cosine
    # units (adapters/embedder/scales.toml, summary_margin); the default model's when not given
    margin: float = field(default_factory=lambda: default_scale().summary_margin)
    seed: int | None = None
    name: str = "learned"
    _model: RouterModel | None = field(default=None, init=False, repr=False)
    _stamp: tuple[int, int] | None = field(default=None, init=False, repr=False)
    _loaded: bool = field(default=False, init=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)
    reads_lexical = True  # two of its features are the sites' term scores (features.py)
    _rng: random.Random = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if not 0.0 <= self.explore_share <= 1.0:
            raise ValueError(f"explore_share must be in [0, 1], got {self.explore_share}")
        if self.explore_sites < 0:
            raise ValueError(f"explore_sites must be >= 0, got {self.explore_sites}")
        self._rng = random.Random(self.seed)
        self.model()

    @classmethod
    def from_model(cls, model: RouterModel | None, published: Published, **kw: Any) -> "LearnedRouter":
        """A router around an in-memory model (evaluation, tests): no file is read."""
        router = cls(None, published, **kw)
        router._model = model
        return router

    def model(self) -> RouterModel | None:
        """The current model, re-read when its file changed (None: fall back)."""
        if self.model_path is None:
            return self._model
        try:
            st = self.model_path.stat()
            stamp = (st.st_mtime_ns, st.st_size)
        except OSError:
            stamp = None
        with self._lock:
            if not self._loaded or stamp != self._stamp:  # once per change of the file: one log line
                self._loaded, self._stamp = True, stamp
                self._model = None if stamp is None else load_model(self.model_path)
                if self._model is not None:
                    log.info("router.model_loaded", version=self._model.version, rows=self._model.rows,
                             threshold=round(self._model.threshold, 4))
                elif stamp is None:
                    log.info("router.model_missing", path=str(self.model_path), fallback="summary matching")
            return self._model

    @property
    def model_version(self) -> str | None:
        model = self.model()
        return model.version if model else None

    def describe(self) -> dict[str, Any]:
        """What the trace records as `router`."""
        model = self.model()
        return {"name": self.name, "model_version": model.version if model else None,
                "fallback": None if model else "summary matching (no usable model)",
                "explore_share": self.explore_share}

    # -- Router contract ------------------------------------------------------------------------------

    def rank(self, question_vector: np.ndarray, hits: Sequence[SummaryHit], routable: Collection[str],
             lexical: Mapping[str, float] | None = None) -> list[SiteScore]:
        """Sites with summary hits, with features from their summaries and their term scores."""
        feats = site_features(hits, routable, self.published, lexical)
        if not feats:
            return []
        model = self.model()
        probs = model.probabilities(np.vstack([f.vector for f in feats])) if model else [None] * len(feats)
        scored = [LearnedScore(f.score.site_id, f.score.score, f.score.summaries, f.score.richness,
                               features=tuple(float(v) for v in f.vector),
                               probability=None if p is None else float(p))
                  for f, p in zip(feats, probs)]
        if model:  # stable: ties keep summary order
            scored.sort(key=lambda s: -(s.probability or 0.0))
        return list(scored)

    def pick(self, ranked: Sequence[SiteScore], k: int) -> list[SiteScore]:
        """The router's own choice (no exploration)."""
        model = self.model()
        probs = [getattr(s, "probability", None) for s in ranked]
        if model is None or any(p is None for p in probs):
            return select_sites(ranked, k, self.margin)
        select_sites(ranked, k, self.margin)  # the same validation of k
        chosen = [s for s, p in zip(ranked[:k], probs[:k]) if p >= model.threshold]
        return chosen or list(ranked[:1])

    def select(self, ranked: Sequence[SiteScore], k: int) -> list[SiteScore]:
        chosen = self.pick(ranked, k)
        if self.explore_share and self.explore_sites:
            with self._lock:
                explore = self._rng.random() < self.explore_share
                rest = [s for s in ranked if s not in chosen]
                extra = self._rng.sample(rest, min(self.explore_sites, len(rest))) if explore else []
            chosen = list(chosen) + [replace(s, explored=True) if isinstance(s, LearnedScore) else s for s in extra]
        return list(chosen)

    # -- learning from outcomes ------------------------------------------------------------------------

    def observe(self, question: str, considered: Sequence[SiteScore], selected: Sequence[str],
                calls: Sequence[SiteCall], fused: FusedAnswer) -> None:
        """Log the outcome of one question: a site contributed when its evidence carried the fused
        answer (FusedAnswer.contributors: with the reader, confirmed as reliability counts it; without,
        also a sentence near the leading one's measured weight; filler and a site's own claims teach
        nothing, issue 32).
        Only sites that answered carry a label (`called`); a failed call (timeout, error) says
        nothing about relevance, so it is logged as `failed` and never trained on.
        A called site outside the router's own pick (a prefix of `considered`) was explored; an
        explored site that happens to be next in rank counts as picked, which only blurs the
        `explored` flag (kept for reporting), never a label."""
        if self.outcomes is None:
            return
        own: set[str] = set()
        for s in considered:  # the router's own pick is a prefix of its ranking; the rest was explored
            if s.site_id not in selected:
                break
            own.add(s.site_id)
        contributed = set(fused.contributors)
        answered = {c.site_id for c in calls if c.status == OK}
        failed = {c.site_id for c in calls} - answered
        sites = [{"features": s.features, "called": s.site_id in answered, "failed": s.site_id in failed,
                  "explored": s.site_id in answered and s.site_id not in own, "contributed": s.site_id in contributed}
                 for s in considered if isinstance(s, LearnedScore)]
        if sites:
            try:
                self.outcomes.append(question, self.model_version, sites)
            except OSError as exc:  # a full disk must not fail the query that was just answered
                log.warning("router.log_failed", reason=str(exc)[:200])


def router_dir(gateway_dir: Path) -> Path:
    """Where the router's model and outcome log live: `<home>/gateway/router/`."""
    return gateway_dir / "router"


def open_router(cfg: GatewayConfig, index: SummaryIndex, gateway_dir: Path, *, explore_share: float | None = None,
                seed: int | None = None, embedder: Any = None) -> LearnedRouter:
    """The learned router as configured ([gateway] router_*), over the gateway's model and log; its
    cold-start margin is `embedder`'s summary_margin (the default model's without one)."""
    home = router_dir(gateway_dir)
    return LearnedRouter(home / MODEL_FILE, index_published(index), OutcomeLog(home, cfg.router_log_max_records),
                         explore_share=cfg.router_explore_share if explore_share is None else explore_share,
                         explore_sites=cfg.router_explore_sites, seed=seed, margin=_cold_margin(embedder))


def _cold_margin(embedder: Any) -> float:
    return (scale_of(embedder) if embedder is not None else default_scale()).summary_margin


def learned_policy(gateway: Any, *, explore_share: float = 0.0, name: str = "learned",
                   model_path: Path | None = None) -> QueryPolicy:
    """`hansa eval`'s strategy `learned`: the gateway's own model and log, exploring only when
    asked (an evaluation measures the router's choice, not its exploration); given `model_path`,
    that model instead, and no log (an evaluation's model trained on its fit split)."""
    own = getattr(gateway, "router", None)
    if model_path is not None:
        router = LearnedRouter(model_path, index_published(gateway.index),
                               margin=_cold_margin(getattr(gateway, "embedder", None)))
    elif isinstance(own, LearnedRouter):  # the configured router's model and log, exploration as asked
        router = LearnedRouter(own.model_path, own.published, own.outcomes, explore_share, own.explore_sites,
                               own.margin)
    else:
        router = open_router(gateway.cfg, gateway.index, gateway.registry.path.parent, explore_share=explore_share,
                             embedder=getattr(gateway, "embedder", None))
    return QueryPolicy(name=name, router=router)
