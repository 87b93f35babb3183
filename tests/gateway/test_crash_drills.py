"""`kill -9` drill of a gateway applying a publication (embedded: Milvus Lite under the gateway home).

A gateway holding a site's set P1 is killed by SIGKILL while it applies P2 (a delta: one summary
changed, one withdrawn, one new) — after the registry raised the floor but before the index swap,
after the swap but before the durable copy, between the durable rows and the head switch, and after
the switch but before the orphan rows go. On restart the gateway must serve P1 or P2 whole (never a
mix, no orphan rows), with a floor at or above what it serves; then the site's resend of P2 (and,
if the gateway refuses it with 409, the site's full set above the floor — what plugin.publish does)
must leave it routing exactly as a gateway that applied P1 and P2 without a crash.

A gateway whose durable copy is of the previous format (float32 rows, format-1 heads) migrates it
to int8 codes at start; killed in the middle of that, it still restarts serving the whole set, and
routes exactly as a gateway that applied the set with this version.

The publications are signed here with a site key (synthetic unit vectors, the gateway's embedding
space); the gateway runs as the real code in its own process (tests/plugin/crash_driver.py).
"""
from __future__ import annotations

import importlib.util
import json
import shutil
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from hansa.adapters.embedder import open_embedder
from hansa.adapters.vector.base import CollectionSpec
from hansa.adapters.vector.milvus import MilvusVectorStore
from hansa.core.config import Config, load_config
from hansa.core.jsonsafe import dumps
from hansa.gateway.index.durable import COLLECTION, LEGACY_COLLECTION, row_key
from hansa.sync.vectors import decode_vector
from hansa.gateway.trust.registry import SiteRegistry
from hansa.gateway.trust import admin
from hansa.gateway.service import Gateway
from hansa.sync.keys import SiteIdentity
from hansa.sync.publication import PublicationHead, build_publication, summary_sha256
from hansa.sync.vectors import encode_vector
from hansa.sync.wire import EmbeddingSpace, Richness, SummaryRecord

_spec = importlib.util.spec_from_file_location(
    "crash_drill", Path(__file__).parents[1] / "plugin" / "crash_drill.py")
drill = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(drill)  # type: ignore[union-attr]

SITE = "rivers"
TTL = timedelta(hours=6)


def _config(home: Path) -> Config:
    return load_config(env={"HANSA_HOME": str(home)})


def _record(sid: str, version: int, rng: np.random.Generator) -> SummaryRecord:
    vector = rng.standard_normal(384).astype(np.float32)
    return SummaryRecord(sid, version, encode_vector(vector / np.linalg.norm(vector)), Richness(4, 3, 2), level=0)


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Envelopes P1 (full), P2 (delta on P1), P3 (P2's set in full, above P2); a gateway home that
    holds P1 and a clean one that applied P1 then P2; probe vectors."""
    root = tmp_path_factory.mktemp("gateway-crash")
    embedder = open_embedder(_config(root / "probe"))
    space = EmbeddingSpace.of(embedder)
    assert space.dim == 384
    site = SiteIdentity.generate()
    rng = np.random.default_rng(7)
    first = [_record(f"c{i}", 1, rng) for i in range(1, 7)]
    second = [_record("c1", 2, rng), *first[2:], _record("c7", 1, rng)]  # c1 changed, c2 withdrawn, c7 new
    head = PublicationHead(1, {r.summary_id: (r.version, summary_sha256(r)) for r in first})
    envelopes = {
        "P1": build_publication(site, SITE, 1, space, first, TTL),
        "P2": build_publication(site, SITE, 2, space, second, TTL, base=head),
        "P3": build_publication(site, SITE, 3, space, second, TTL),
    }
    paths = {}
    for name, envelope in envelopes.items():
        paths[name] = root / f"{name}.json"
        paths[name].write_text(json.dumps(envelope), encoding="utf-8")
    homes = {}
    for name, applied in (("holds_p1", ["P1"]), ("clean", ["P1", "P2"])):
        home = homes[name] = root / name
        admin.enroll(SiteRegistry(home / "gateway" / "registry.json"), SITE, "https://rivers.example.org", [site.public_key_b64])
        with Gateway.open(_config(home), embedder=embedder) as gateway:
            for pub in applied:
                gateway.publish(SITE, envelopes[pub])
    probes = rng.standard_normal((8, 384)).astype(np.float32)
    return {"embedder": embedder, "paths": paths, "homes": homes, "probes": probes, "first": first, "second": second}


def _view(home: Path, setup: dict[str, Any]) -> dict[str, Any]:
    """What a restarted gateway serves for the site, how it routes the probes, its floor, and the
    rows its durable store holds."""
    cfg = _config(home)
    with Gateway.open(cfg, embedder=setup["embedder"]) as gateway:
        held = gateway.index.current(SITE)
        routes = [[(h.site_id, h.summary_id, round(h.score, 5)) for h in gateway.index.search(p, 16)]
                  for p in setup["probes"]]
        view = {
            "rows": None if held is None else {sid: (r[1], r[2]) for sid, r in held.rows.items()},
            "sequence": None if held is None else held.sequence,
            "manifest": None if held is None else held.manifest_sha256,
            "indexed": gateway.index.count(),
            "routes": routes,
            "floor": gateway.registry.last_sequence(SITE),
        }
    with MilvusVectorStore(cfg.milvus_uri, prefix=cfg.milvus.collection_prefix) as store:
        view["durable_rows"] = store.count(COLLECTION)
        view["legacy_collection"] = store.collection_dim(LEGACY_COLLECTION) is not None
    return view


def _set_of(records: list[SummaryRecord]) -> dict[str, tuple[int, str]]:
    return {r.summary_id: (r.version, summary_sha256(r)) for r in records}


# crash point -> the set a restarted gateway serves: P2 only once its durable head was switched
# (the durable copy is a write-behind cache of the in-memory swap; the floor is written before both).
POINTS = {"gateway.after_floor": "first", "gateway.after_commit": "first", "durable.after_rows": "first",
          "durable.after_switch": "second"}


@pytest.mark.parametrize("point", sorted(POINTS))
def test_a_gateway_killed_while_applying_serves_a_whole_set_and_the_resend_repairs_it(
        point: str, setup: dict[str, Any], tmp_path: Path) -> None:
    home = tmp_path / "gw"
    shutil.copytree(setup["homes"]["holds_p1"], home)
    env = {"HANSA_HOME": str(home)}
    apply = drill.driver("gateway-apply", SITE, str(setup["paths"]["P2"]))
    drill.run(apply, env, crash=point)

    crashed = _view(home, setup)
    assert crashed["rows"] == _set_of(setup[POINTS[point]]), "not the whole set expected (or a mix)"
    assert crashed["indexed"] == len(crashed["rows"]) == crashed["durable_rows"], "rows of no set are left"
    assert crashed["floor"] == 2  # the floor is the authority: P2 is never accepted twice, P1 never again
    assert all(hit[1] in crashed["rows"] for route in crashed["routes"] for hit in route)

    # The site's outbox resends P2's exact bytes; a 409 (floor raised, set not held) makes it send
    # its whole set above the gateway's sequence (plugin.publish): P3.
    answer = json.loads(drill.run(apply, env).stdout.strip().splitlines()[-1])
    if POINTS[point] == "second":
        assert answer["ok"]["replay"] is True, answer
    else:
        assert answer["kind"] == "ConflictError" and answer["current_sequence"] == 2, answer
        full = json.loads(drill.run(drill.driver("gateway-apply", SITE, str(setup["paths"]["P3"])), env)
                          .stdout.strip().splitlines()[-1])
        assert full["ok"]["sequence"] == 3, full

    after, clean = _view(home, setup), _view(setup["homes"]["clean"], setup)
    assert after["rows"] == clean["rows"] == _set_of(setup["second"])
    assert after["routes"] == clean["routes"]
    assert after["floor"] == after["sequence"] and after["indexed"] == after["durable_rows"] == len(after["rows"])


def _as_previous_format(home: Path, records: list[SummaryRecord]) -> None:
    """Rewrite a gateway home's durable copy as the previous version wrote it: the exact float32
    vectors in `gateway_summaries` (its schema) and format-1 heads; no int8 rows."""
    cfg = _config(home)
    head_path = home / "gateway" / "publications" / f"{SITE}.json"
    head = json.loads(head_path.read_text(encoding="utf-8"))
    assert head["format"] == 2
    vectors = {r.summary_id: decode_vector(r.vector_b64, 384) for r in records}
    keys = [row_key(SITE, sid, v, sha) for sid, (v, sha, _, _) in head["summaries"].items()]
    with MilvusVectorStore(cfg.milvus_uri, prefix=cfg.milvus.collection_prefix) as store:
        store.ensure_collection(CollectionSpec(LEGACY_COLLECTION, dim=384, index="FLAT", fields={
            "site_id": "str", "summary_id": "str", "level": "int", "richness": "int"}))
        store.upsert(LEGACY_COLLECTION, keys, np.stack([vectors[sid] for sid in head["summaries"]]),
                     [{"site_id": SITE, "summary_id": sid, "level": r[2], "richness": r[3]}
                      for sid, r in head["summaries"].items()])
        store.delete(COLLECTION, where={"site_id": SITE})
    head_path.write_bytes(dumps({**head, "format": 1}))


@pytest.mark.parametrize("point", [None, "durable.migrate_after_rows", "durable.migrate_after_switch"])
def test_a_previous_format_copy_is_migrated_at_start_and_routes_as_a_fresh_one_even_after_a_crash(
        point: str | None, setup: dict[str, Any], tmp_path: Path) -> None:
    home = tmp_path / "gw"
    shutil.copytree(setup["homes"]["holds_p1"], home)
    _as_previous_format(home, setup["first"])
    if point is not None:  # killed while migrating, at start (before any publication is applied)
        drill.run(drill.driver("gateway-apply", SITE), {"HANSA_HOME": str(home)}, crash=point)
    migrated, fresh = _view(home, setup), _view(setup["homes"]["holds_p1"], setup)
    assert migrated["rows"] == fresh["rows"] == _set_of(setup["first"])
    assert migrated["routes"] == fresh["routes"], "the migrated codes score otherwise than a fresh publication's"
    assert migrated["indexed"] == migrated["durable_rows"] == len(migrated["rows"])
    assert not migrated["legacy_collection"], "the float32 collection outlived the last format-1 head"
    assert json.loads((home / "gateway" / "publications" / f"{SITE}.json").read_text())["format"] == 2
    # and the migrated gateway takes the site's next delta on the migrated set
    answer = json.loads(drill.run(drill.driver("gateway-apply", SITE, str(setup["paths"]["P2"])),
                                  {"HANSA_HOME": str(home)}).stdout.strip().splitlines()[-1])
    assert answer["ok"]["sequence"] == 2, answer
    after, clean = _view(home, setup), _view(setup["homes"]["clean"], setup)
    assert after["rows"] == clean["rows"] and after["routes"] == clean["routes"]
    assert after["indexed"] == after["durable_rows"] == len(after["rows"])
