"""The site cache: a digest of content + configuration + code picks the slot; only a slot whose
marker was written last is reused; real sites (embedded graph, Milvus Lite) built through
LocalFederation prove reuse, rebuild on changed content and rebuild of an unfinished slot."""
from __future__ import annotations

from pathlib import Path

import pytest

from hansa.evaluation.sitecache import MARKER, SiteCache, default_cache_dir
from hansa.federation.local import LocalFederation, role_config

DOCS = [{"id": f"d{i}", "title": f"Doc {i}", "text": f"The Rhine river flows through Basel and Cologne. Document {i} "
         f"describes barges, locks and the Lorelei rock near St. Goarshausen."} for i in range(3)]


def test_digest_follows_content_config_and_site_but_not_the_gateway_key(tmp_path: Path) -> None:
    cache = SiteCache(tmp_path)
    base = cache.digest("a", DOCS, role_config(tmp_path / "x", HANSA_SITE_GATEWAY_PUBLIC_KEY="k1"))
    assert base == cache.digest("a", DOCS, role_config(tmp_path / "elsewhere", HANSA_SITE_GATEWAY_PUBLIC_KEY="k2"))
    changed = [dict(DOCS[0], text=DOCS[0]["text"] + "!")] + DOCS[1:]
    assert base != cache.digest("a", changed, role_config(tmp_path / "x"))
    assert base != cache.digest("a", DOCS[:2], role_config(tmp_path / "x"))
    assert base != cache.digest("b", DOCS, role_config(tmp_path / "x"))
    assert base != cache.digest("a", DOCS, role_config(tmp_path / "x", HANSA_SITE_LEIDEN_GAMMA="2.0"))
    # how a built site answers is not what it built: a site with the reader reuses the same build
    assert base == cache.digest("a", DOCS, role_config(tmp_path / "x", HANSA_SITE_READER="packaged"))


def test_only_a_marked_slot_is_complete_and_prepare_wipes_leftovers(tmp_path: Path) -> None:
    cache = SiteCache(tmp_path)
    slot = cache.slot("a", "0" * 64)
    assert cache.complete(slot) is None
    cache.prepare(slot)
    (slot / "leftover").write_text("half a build")
    assert cache.complete(slot) is None
    cache.prepare(slot)
    assert not (slot / "leftover").exists()
    cache.mark_complete(slot, {"chunks": 3})
    assert cache.complete(slot) == {"chunks": 3}
    (slot / "publish_state.json").write_text("{}")
    cache.reuse(slot)
    assert not (slot / "publish_state.json").exists() and cache.complete(slot) == {"chunks": 3}


def test_default_cache_dir_honours_the_environment(tmp_path: Path) -> None:
    assert default_cache_dir({"HANSA_EVAL_CACHE": str(tmp_path)}) == tmp_path
    assert default_cache_dir({"XDG_CACHE_HOME": str(tmp_path)}) == tmp_path / "hansa" / "eval"


def _federation(tmp_path: Path, cache: SiteCache, docs: list[dict[str, str]], run: str) -> dict:
    with LocalFederation(tmp_path / run, {"rhine": docs}, site_cache=cache) as fed:
        answer = fed.query({"question": "Which rock stands near St. Goarshausen?"}).json()
        assert answer["citations"], answer  # a reused site still serves its chunks
        return dict(fed.sites["rhine"].info)


@pytest.mark.slow
def test_second_build_reuses_changed_content_rebuilds_and_unfinished_slots_are_rebuilt(tmp_path: Path) -> None:
    cache = SiteCache(tmp_path / "cache")
    first = _federation(tmp_path, cache, DOCS, "run1")
    assert first["cached"] is False and len(cache.built) == 1
    embedded = cache.embedder(None).misses  # type: ignore[arg-type]  (already open: inner unused)
    second = _federation(tmp_path, cache, DOCS, "run2")
    assert second["cached"] is True and cache.reused == cache.built == [cache.built[0]]
    assert second["chunks"] == first["chunks"]

    changed = DOCS + [{"id": "d9", "title": "Doc 9", "text": "Cologne cathedral took 632 years to finish."}]
    third = _federation(tmp_path, cache, changed, "run3")
    assert third["cached"] is False and len(cache.built) == 2
    assert cache.embedder(None).misses > embedded  # type: ignore[arg-type]
    assert cache.embedder(None).hits > 0  # type: ignore[arg-type]  (the unchanged chunks)

    (tmp_path / "cache" / "sites" / cache.built[1] / MARKER).unlink()  # as if the build had died
    fourth = _federation(tmp_path, cache, changed, "run4")
    assert fourth["cached"] is False and len(cache.built) == 3 and cache.built[2] == cache.built[1]
    cache.close()
