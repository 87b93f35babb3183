"""`hansa site doctor`: what is wrong with this site and how to fix it, one check per line.

Why not open a SiteContext: the doctor runs when something is broken, so each part (graph store,
vector store, embedder, key, publication, gateway) is opened on its own and a part that cannot be
opened is a failed check, not a traceback that hides the other findings. Each store's own checks
live in its adapter (`GraphStore.diagnose`); this module adds the site's files, the embedding
space shared by them, and the gateway's view of the site.
"""
from __future__ import annotations

import os
import stat
from datetime import datetime, timedelta, timezone
from typing import Any, Callable

from hansa.core.checks import FAIL, PASS, SKIP, Check, Step, run_chain, skipped
from hansa.core.config import Config
from hansa.core.errors import BackendError, ConfigError, HansaError, VerificationError
from hansa.sync.wire import validate_site_id

VECTOR_CHECKS = ("vector store reachable", "vector collections")
# What a configuration that does not load leaves unchecked (the graph checks' names depend on the backend).
LATER_CHECKS = ("site id", "site installed", "graph store", *VECTOR_CHECKS, "embedder", "site identity",
                "publication", "gateway")
SITES_PATH = "/v1/sites"


def _check(name: str, run: Callable[[], str], hint: str) -> Check:
    return run_chain([Step(name, run, hint)])[0]


def _site_id(cfg: Config) -> str:
    if not cfg.site.site_id:
        raise ConfigError("no site id configured")
    return validate_site_id(cfg.site.site_id)


def _installed(cfg: Config, site_id: str | None) -> dict[str, Any]:
    from hansa.plugin.install import read_site_file_in

    recorded = read_site_file_in(cfg.home)
    if recorded is None:
        raise ConfigError(f"{cfg.home / 'site.json'} is missing: this home was never installed")
    if site_id and recorded["site_id"] != site_id:
        raise ConfigError(f"{cfg.home} was installed as site {recorded['site_id']!r}, not {site_id!r}")
    return recorded


def _graph_checks(cfg: Config, site_id: str | None) -> list[Check]:
    from hansa.adapters.graph import open_graph_store

    try:
        store = open_graph_store(cfg)
    except HansaError as exc:
        hint = "fix [graph] path" if cfg.graph.backend == "embedded" else "fix [neo4j] uri (bolt://host:7687)"
        return [Check("graph store reachable", FAIL, str(exc), hint)]
    try:
        return store.diagnose(site_id)
    finally:
        store.close()


def _graph_map_check(cfg: Config) -> Check:
    """[site.graph_map] against the live database: every label, type and property it names exists."""
    def run() -> str:
        if cfg.graph.backend != "neo4j":
            raise ConfigError(f"[graph] backend is {cfg.graph.backend!r}: a graph map needs 'neo4j'")
        from hansa.adapters.graph.neo4j_source import OrgGraphSource

        with OrgGraphSource(cfg.neo4j, cfg.site.graph_map) as source:
            return source.check()

    return _check("graph map", run, "fix [site.graph_map]: name labels, types and properties the database has")


def _vector_checks(cfg: Config, expected_dim: int | None) -> list[Check]:
    from hansa.adapters.vector.milvus import MilvusVectorStore, is_server_uri
    from hansa.plugin.site import COLLECTIONS

    uri = cfg.milvus_uri
    where = f"Milvus server {uri}" if is_server_uri(uri) else f"Milvus Lite file {uri}"
    try:
        store = MilvusVectorStore(uri, token=cfg.milvus.token, prefix=cfg.milvus.collection_prefix)
    except HansaError as exc:
        return [Check("vector store reachable", FAIL, str(exc),
                      "start the Milvus server, or fix [milvus] uri; Milvus Lite allows one process per data "
                      "directory (stop `hansa site serve`, or serve from a Milvus server)"),
                *skipped(VECTOR_CHECKS[1:], "vector store reachable failed")]
    try:
        def collections() -> str:
            found = {name: store.collection_dim(name) for name in COLLECTIONS}
            missing = [cfg.milvus.collection_prefix + n for n, dim in found.items() if dim is None]
            if missing:
                raise BackendError(f"collection(s) {', '.join(missing)} missing in {where}")
            wrong = [f"{cfg.milvus.collection_prefix}{n} holds {dim}-d vectors" for n, dim in found.items()
                     if expected_dim is not None and dim != expected_dim]
            if wrong:
                raise BackendError(f"{'; '.join(wrong)}, the site was installed with {expected_dim}-d embeddings")
            return ", ".join(f"{cfg.milvus.collection_prefix}{n} ({dim}-d, {store.count(n)} rows)" for n, dim in found.items())

        return [Check("vector store reachable", PASS, where),
                _check("vector collections", collections,
                       "run `hansa site install` (creates missing collections), then `hansa site ingest` and "
                       "`hansa site communities`; a collection of another dimension: drop it and re-embed")]
    finally:
        store.close()


def _embedder_check(cfg: Config, recorded: dict[str, Any] | None) -> Check:
    from hansa.adapters.embedder import open_embedder
    from hansa.plugin.install import space_mismatch

    def load() -> str:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")  # a model that needs the network fails here, as it would offline
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        try:
            embedder = open_embedder(cfg)
            vector = embedder.embed(["hansa site doctor"])[0]
        except HansaError:
            raise
        except Exception as exc:  # a model that cannot load fails in its library's own way
            raise BackendError(f"the {cfg.embedder.backend} embedder did not load: {type(exc).__name__}: {exc}") from exc
        if len(vector) != embedder.dim:
            raise BackendError(f"{embedder.model_id} returned {len(vector)}-d vectors but declares {embedder.dim}")
        if recorded is not None:
            mismatch = space_mismatch(recorded, embedder)
            if mismatch:
                raise ConfigError(mismatch)
        return f"{cfg.embedder.backend}: {embedder.model_id}, {embedder.dim}-d"

    return _check("embedder", load, "set [embedder] back to the model the site was installed with, or re-embed the "
                  "site with `hansa site reembed`; a catalog model's files come from `hansa embedder fetch`")


def _identity_check(cfg: Config) -> Check:
    from hansa.sync.keys import SiteIdentity

    def load() -> str:
        identity = SiteIdentity.load(cfg.keys_dir)  # refuses a key group/others can read
        mode = stat.S_IMODE(os.stat(cfg.keys_dir).st_mode)
        if mode & 0o022:
            raise VerificationError(f"{cfg.keys_dir} is writable by group or others (mode {mode:04o})")
        return f"keyid {identity.keyid} in {cfg.keys_dir}"

    return _check("site identity", load, f"run `hansa site install` when the key is missing; "
                  f"`chmod 700 {cfg.keys_dir}; chmod 600 {cfg.keys_dir}/*.pem` when others can reach it")


def _publication_check(cfg: Config, now: datetime) -> tuple[Check, int | None]:
    """The freshness of the last publication, and its sequence (None when never accepted)."""
    from hansa.plugin.publish import read_state_in
    from hansa.sync.wire import parse_utc

    accepted_sequence: list[int] = []

    def fresh() -> str:
        state = read_state_in(cfg.home)
        if not state.sequence:
            raise ConfigError("never published")
        if not state.accepted or not state.accepted.get("expires"):
            return f"sequence {state.sequence} written to a file (`publish --out`): its expiry is the gateway's to tell"
        accepted_sequence.append(int(state.accepted["sequence"]))
        expires = parse_utc(str(state.accepted["expires"]), "publish state")
        left = expires - now
        if left <= timedelta(0):
            raise ConfigError(f"the publication the gateway accepted (sequence {state.accepted['sequence']}) expired at "
                              f"{expires:%Y-%m-%d %H:%M}Z: the site is out of routing")
        return (f"sequence {state.accepted['sequence']} accepted, expires {expires:%Y-%m-%d %H:%M}Z "
                f"(in {left.total_seconds() / 3600:.1f} h)")

    check = _check("publication", fresh, "run `hansa site publish`, and keep `hansa site serve` running: it "
                   "re-publishes before expiry")
    return check, (accepted_sequence[0] if accepted_sequence else None)


def _gateway_check(site_id: str | None, url: str | None, local_sequence: int | None) -> Check:
    if not url:
        return Check("gateway", SKIP, "not checked: no gateway URL ([site] gateway_url or --gateway)")

    def accepted() -> str:
        import requests

        try:
            resp = requests.get(url.rstrip("/") + SITES_PATH, timeout=10)
            resp.raise_for_status()
            sites = {s["site_id"]: s for s in resp.json()["sites"]}
        except (requests.RequestException, ValueError, KeyError, TypeError) as exc:
            raise BackendError(f"cannot read {url.rstrip('/')}{SITES_PATH}: {exc}") from exc
        mine = sites.get(site_id or "")
        if mine is None:
            raise VerificationError(f"the gateway at {url} has not enrolled site {site_id!r}")
        if mine.get("status") != "active":
            raise VerificationError(f"the gateway at {url} lists site {site_id!r} as {mine.get('status')}")
        if not mine.get("routable"):
            raise VerificationError(f"the gateway at {url} does not route to {site_id!r}: "
                                    f"{'its publication expired' if mine.get('expired') else 'no publication accepted'}")
        if local_sequence is not None and mine.get("last_sequence") != local_sequence:
            raise VerificationError(f"the gateway holds sequence {mine.get('last_sequence')}, this site recorded "
                                    f"{local_sequence} as accepted")
        return (f"routable at {url}: sequence {mine.get('last_sequence')}, {mine.get('summary_count')} summaries, "
                f"expires {mine.get('expires')}")

    return _check("gateway", accepted, "not enrolled: `hansa site join-request` and the admins' approval; not "
                  "routable or behind: `hansa site publish --gateway URL`; revoked: ask the federation admins")


def diagnose(cfg: Config | None, config_error: str | None, config_source: str, gateway_url: str | None = None,
             now: datetime | None = None) -> list[Check]:
    """Every check, in the order an admin fixes things. `cfg` None: the configuration did not load
    (`config_error` says why) and nothing else can be checked."""
    if cfg is None:
        return [Check("config", FAIL, f"{config_source}: {config_error}",
                      "fix the file (TOML, known sections and keys) or the HANSA_* variable the message names"),
                *skipped(LATER_CHECKS, "config failed")]
    now = now or datetime.now(timezone.utc)
    checks = [Check("config", PASS, f"read {config_source}; home {cfg.home}")]
    site = _check("site id", lambda: _site_id(cfg), "set [site] site_id or HANSA_SITE_SITE_ID (lowercase letters, digits, '-')")
    checks.append(site)
    site_id = cfg.site.site_id if site.status == PASS else None
    recorded: dict[str, Any] | None = None

    def installed() -> str:
        nonlocal recorded
        recorded = _installed(cfg, site_id)
        emb = recorded["embedding"]
        return f"at {recorded.get('installed_at', '?')}, {emb['model_id']} ({emb['dim']}-d)"

    checks.append(_check("site installed", installed, "run `hansa site install` with this configuration"))
    checks.extend(_graph_checks(cfg, site_id))
    if cfg.site.graph_map.enabled:
        checks.append(_graph_map_check(cfg))
    checks.extend(_vector_checks(cfg, recorded["embedding"]["dim"] if recorded else None))
    checks.append(_embedder_check(cfg, recorded))
    checks.append(_identity_check(cfg))
    publication, sequence = _publication_check(cfg, now)
    checks.append(publication)
    checks.append(_gateway_check(site_id, gateway_url or cfg.site.gateway_url, sequence))
    return checks


def failed(checks: list[Check]) -> bool:
    return any(c.status == FAIL for c in checks)
