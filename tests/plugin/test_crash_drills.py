"""`kill -9` drills on the embedded backend (SQLite + igraph graph, Milvus Lite): a real process is
killed by SIGKILL at a chosen step of ingest, community building and publishing
(HANSA_TEST_CRASH_AT, hansa.core.crash_points); then the same command is run again and the site
must equal a clean run's — same documents, chunks, vectors, communities and published summaries,
no orphan rows, nothing lost.

The reference is one clean in-process build of the same corpus (module fixture); each drill copies
a prepared site home, so a drill costs two or three short `hansa` processes.
"""
from __future__ import annotations

import importlib.util
import json
import shutil
import threading
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest
from werkzeug.serving import make_server

from hansa.adapters.vector.milvus import MilvusVectorStore
from hansa.core.config import Config, GatewayConfig
from hansa.gateway.http.app import create_gateway_app
from hansa.gateway.trust.registry import SiteRegistry
from hansa.gateway.trust import admin
from hansa.gateway.service import Gateway
from hansa.plugin.install import load_identity
from hansa.plugin.outbox import Outbox
from hansa.plugin.publish import read_state, summaries_changed
from hansa.plugin.site import SiteContext

_spec = importlib.util.spec_from_file_location("crash_drill", Path(__file__).with_name("crash_drill.py"))
drill = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(drill)  # type: ignore[union-attr]

SITE_ID = "acme"


@pytest.fixture(scope="module")
def docs(tmp_path_factory: pytest.TempPathFactory, corpus: dict[str, str]) -> Path:
    folder = tmp_path_factory.mktemp("crash") / "docs"
    folder.mkdir()
    for doc_id, text in corpus.items():
        (folder / Path(doc_id).name).write_text(text, encoding="utf-8")
    return folder


# A document that links two of the corpus's subjects: ingested after the communities were built,
# it changes their membership, so a rebuild replaces community ids (and must retire the old ones).
LOGBOOK = """# The Keepers' Logbook

The keepers of the Brightwater Lighthouse watched the eruption of Mount Teravik in March 1912. From
the lamp room of the Brightwater Lighthouse they saw the ash fall on Solvik. The Karsholm Harbour
Trust later lent the logbook to the Hallgrim Volcano Observatory, where Ingrid Saeter keeps it.
"""


@pytest.fixture(scope="module")
def more(docs: Path) -> Path:
    folder = docs.parent / "more"
    folder.mkdir()
    (folder / "logbook.md").write_text(LOGBOOK, encoding="utf-8")
    return folder


@pytest.fixture(scope="module")
def homes(tmp_path_factory: pytest.TempPathFactory, docs: Path, more: Path,
          make_config: Callable[..., Config]) -> dict[str, Any]:
    """Site homes built cleanly in-process, at rest after each step, and their states: installed,
    ingested, built (communities), grown (built, then the logbook ingested) and grown_built."""
    from hansa.plugin.communities import build_communities
    from hansa.plugin.ingest import ingest_paths
    from hansa.plugin.install import install_site

    root = tmp_path_factory.mktemp("clean")
    corpus_ids = drill.expected_chunk_ids(make_config(root / "x"), docs)
    grown_ids = corpus_ids | drill.expected_chunk_ids(make_config(root / "x"), more)
    out: dict[str, Any] = {"chunk_ids": corpus_ids, "grown_chunk_ids": grown_ids}
    for step in ("installed", "ingested", "built", "grown", "grown_built"):
        home = root / step
        with SiteContext.open(make_config(home)) as ctx:
            install_site(ctx)
            if step != "installed":
                ingest_paths(ctx, [docs])
            if step in ("built", "grown", "grown_built"):
                build_communities(ctx)
            if step in ("grown", "grown_built"):
                ingest_paths(ctx, [more])
            if step == "grown_built":
                build_communities(ctx)
        out[step] = home
        out[f"{step}_state"] = drill.site_state(make_config(home), out["grown_chunk_ids" if "grown" in step else "chunk_ids"])
    assert out["grown_built_state"]["communities"] != out["built_state"]["communities"]
    return out


def _copy(homes: dict[str, Any], step: str, tmp_path: Path) -> Path:
    home = tmp_path / "home"
    shutil.copytree(homes[step], home)
    return home


def _env(home: Path) -> dict[str, str]:
    return {"HANSA_HOME": str(home), "HANSA_SITE_SITE_ID": SITE_ID}


# -- (a) ingest ------------------------------------------------------------------------------------

@pytest.mark.parametrize("point", [
    "ingest.after_vectors@3",  # two documents committed, the third's vectors written, its graph not
    "ingest.after_graph@2",  # two documents committed, two never started
    "ingest.after_graph@4",  # everything committed, the process dies before it reports
])
def test_ingest_killed_then_rerun_equals_a_clean_ingest(point: str, homes: dict[str, Any], docs: Path, tmp_path: Path,
                                                        make_config: Callable[..., Config]) -> None:
    home = _copy(homes, "installed", tmp_path)
    drill.run(drill.driver("ingest", "1", str(docs)), _env(home), crash=point)

    crashed = drill.site_state(make_config(home), homes["chunk_ids"])
    committed = int(point.split("@")[1]) - (1 if "after_vectors" in point else 0)
    assert crashed["stats"].documents == committed
    # Nothing half-written is visible: each stored document has all its chunks in the graph, and
    # the vectors of the uncommitted document are the only rows without a chunk (rerun removes them).
    assert set(crashed["graph_chunks"]) <= set(crashed["chunk_vectors"])
    assert crashed["documents"] == {k: v for k, v in homes["ingested_state"]["documents"].items() if k in crashed["documents"]}

    proc = drill.run(drill.driver("ingest", "1", str(docs)), _env(home))
    assert json.loads(proc.stdout.strip().splitlines()[-1])["new"] == 4 - committed
    after = drill.site_state(make_config(home), homes["chunk_ids"])
    drill.assert_consistent(after)
    assert after == homes["ingested_state"]


# -- (b) communities and summaries ---------------------------------------------------------------

# start -> (the chunk ids it holds, the state a clean community build reaches from it)
STARTS = {"ingested": ("chunk_ids", "built_state"), "built": ("chunk_ids", "built_state"),
          "grown": ("grown_chunk_ids", "grown_built_state")}


@pytest.mark.parametrize("point", ["communities.after_vectors", "communities.after_graph"])
@pytest.mark.parametrize("start", sorted(STARTS))
def test_communities_killed_then_rerun_equals_a_clean_build(point: str, start: str, homes: dict[str, Any],
                                                            tmp_path: Path, make_config: Callable[..., Config]) -> None:
    """From a site without communities, from one whose (equal) set is rebuilt, and from one whose
    set changes: a crash between the summary vectors and the graph's community set, or after the
    set but before the stale summary vectors are deleted."""
    ids_key, clean_key = STARTS[start]
    home = _copy(homes, start, tmp_path)
    command = drill.hansa("site", "communities", "--no-progress")
    drill.run(command, _env(home), crash=point)

    crashed = drill.site_state(make_config(home), homes[ids_key])
    before = homes[f"{start}_state"]
    # The graph's community set is the old one or the new one, never a mix.
    assert crashed["communities"] == (before if point == "communities.after_vectors" else homes[clean_key])["communities"]
    assert crashed["documents"] == before["documents"] and crashed["chunk_vectors"] == before["chunk_vectors"]
    # Every community in force has its summary vector (publish reads them) ...
    assert set(crashed["summary_vectors"]) == {c[0] for c in crashed["communities"]}

    drill.run(command, _env(home))
    after = drill.site_state(make_config(home), homes[ids_key])
    drill.assert_consistent(after)  # ... and the rerun leaves no stray one
    assert after == homes[clean_key]


# -- (c) publish -----------------------------------------------------------------------------------

@pytest.fixture
def gateway(homes: dict[str, Any], tmp_path: Path, make_config: Callable[..., Config]) -> Iterator[dict[str, Any]]:
    """A real gateway (Milvus Lite, a registry enrolling the site's key) behind a loopback HTTP
    server in this process, for a site home copied from the clean build."""
    home = _copy(homes, "built", tmp_path)
    with SiteContext.open(make_config(home)) as ctx:
        key = load_identity(ctx).public_key_b64
        embedder = ctx.embedder
    store = MilvusVectorStore(str(tmp_path / "gw.db"))
    registry = SiteRegistry(tmp_path / "gateway" / "registry.json")
    admin.enroll(registry, SITE_ID, "http://127.0.0.1:9/none", [key])
    service = Gateway.open(GatewayConfig(publish_burst=1000, max_request_bytes=4 * 1024 * 1024),
                           embedder=embedder, vector_store=store, registry=registry)
    server = make_server("127.0.0.1", 0, create_gateway_app(service), threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield {"home": home, "service": service, "url": f"http://127.0.0.1:{server.server_port}"}
    finally:
        server.shutdown()
        service.close()
        store.close()


@pytest.mark.parametrize("point", ["publish.after_outbox", "publish.after_delivery"])
def test_publish_killed_then_rerun_leaves_the_gateway_holding_the_whole_set(
        point: str, gateway: dict[str, Any], make_config: Callable[..., Config]) -> None:
    """Killed with the signed publication in the outbox, before it was sent or after the gateway
    accepted it but before the site recorded that: the rerun resends those exact bytes, and the
    gateway ends up holding the site's whole current set, each summary at version 1."""
    home, service = gateway["home"], gateway["service"]
    command = drill.hansa("site", "publish", "--gateway", gateway["url"], "--attempts", "1")
    drill.run(command, _env(home), crash=point)

    cfg = make_config(home)
    (entry,) = Outbox(home).pending()
    held = service.index.current(SITE_ID)
    if point == "publish.after_outbox":
        assert held is None
    else:  # accepted whole: the gateway holds exactly the pending entry's set
        assert held is not None and held.sequence == entry.sequence
        assert held.manifest_sha256 == entry.manifest_sha256
    assert _ctx_state(cfg).accepted is None  # the site has not recorded an acceptance

    drill.run(command, _env(home))
    assert Outbox(home).pending() == []
    held = service.index.current(SITE_ID)
    state = _ctx_state(cfg)
    assert held is not None and state.accepted is not None and held.sequence == state.accepted["sequence"]
    with SiteContext.open(cfg) as ctx:
        assert not summaries_changed(ctx)  # the gateway's set is the site's current set
        communities = {c.id for c in ctx.graph.communities()}
    assert set(held.rows) == communities
    assert {row[1] for row in held.rows.values()} == {1}  # no version was burnt by the crash
    assert service.registry.last_sequence(SITE_ID) == held.sequence


def _ctx_state(cfg: Config) -> Any:
    with SiteContext.open(cfg) as ctx:
        return read_state(ctx)


# -- (a') a changed document ---------------------------------------------------------------------

@pytest.mark.parametrize("point", ["ingest.after_vectors", "ingest.after_graph"])
def test_reingest_of_a_changed_document_killed_keeps_one_whole_version(
        point: str, corpus: dict[str, str], tmp_path: Path, make_config: Callable[..., Config]) -> None:
    """A changed document is replaced: killed before its graph transaction, the old version must
    stay whole (its chunks still have their vectors, so it is still found); killed after, the new
    one. The rerun must leave exactly a clean ingest of the new text: no vector of the old version."""
    from hansa.plugin.ingest import ingest_paths
    from hansa.plugin.install import install_site

    def write(folder: Path, changed: bool) -> Path:
        folder.mkdir(parents=True)
        for doc_id, text in corpus.items():
            if changed and doc_id == "docs/lighthouse.md":
                text = text.replace("38 metres", "41 metres").replace("142 steps", "151 steps")
            (folder / Path(doc_id).name).write_text(text, encoding="utf-8")
        return folder

    old, new = write(tmp_path / "v1" / "docs", False), write(tmp_path / "v2" / "docs", True)
    cfg = make_config(tmp_path / "x")
    old_ids, new_ids = drill.expected_chunk_ids(cfg, old), drill.expected_chunk_ids(cfg, new)
    assert old_ids != new_ids
    states = {}
    for name, folders in (("v1", [old]), ("v2", [new])):
        with SiteContext.open(make_config(tmp_path / name / "home")) as ctx:
            install_site(ctx)
            ingest_paths(ctx, folders)
        states[name] = drill.site_state(make_config(tmp_path / name / "home"), old_ids | new_ids)
    home = tmp_path / "v1" / "home"  # the v1 site, whose folder now holds the new text
    shutil.rmtree(old)
    shutil.copytree(new, old)

    drill.run(drill.driver("ingest", "64", str(old)), _env(home), crash=point)
    crashed = drill.site_state(make_config(home), old_ids | new_ids)
    whole = states["v1" if point == "ingest.after_vectors" else "v2"]
    assert crashed["documents"] == whole["documents"] and crashed["graph_chunks"] == whole["graph_chunks"]
    assert set(crashed["graph_chunks"]) <= set(crashed["chunk_vectors"]), "a stored chunk lost its vector"

    drill.run(drill.driver("ingest", "64", str(old)), _env(home))
    after = drill.site_state(make_config(home), old_ids | new_ids)
    drill.assert_consistent(after)
    assert after == states["v2"]


def test_delete_killed_then_rerun_leaves_no_vector_of_the_document(homes: dict[str, Any], tmp_path: Path,
                                                                   make_config: Callable[..., Config]) -> None:
    """Killed after the graph dropped the document, before its vectors went: it is no longer
    stored (nor citable); the rerun of the same command deletes the vectors left behind."""
    home = _copy(homes, "ingested", tmp_path)
    command = drill.hansa("site", "delete", "--no-progress", "docs/volcano.md")
    drill.run(command, _env(home), crash="delete.after_graph")
    crashed = drill.site_state(make_config(home), homes["chunk_ids"])
    assert "docs/volcano.md" not in crashed["documents"] and crashed["chunk_rows"] > len(crashed["graph_chunks"])

    drill.run(command, _env(home))
    after = drill.site_state(make_config(home), homes["chunk_ids"])
    drill.assert_consistent(after)
    clean = homes["ingested_state"]
    assert after["documents"] == {k: v for k, v in clean["documents"].items() if k != "docs/volcano.md"}
    assert after["chunk_vectors"] == {k: v for k, v in clean["chunk_vectors"].items() if k in after["graph_chunks"]}
