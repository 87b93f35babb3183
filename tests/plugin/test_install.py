"""`install_site` on the real embedded graph store, Milvus Lite and the packaged embedder."""
from __future__ import annotations

import json
import stat
from pathlib import Path
from typing import Callable

import pytest

from hansa.adapters.embedder.catalog import MODELS
from hansa.adapters.embedder.local_model import packaged_model_dir
from hansa.core.config import Config, load_config
from hansa.core.errors import ConfigError
from hansa.plugin.install import install_site, load_identity
from hansa.plugin.site import CHUNKS, COLLECTIONS, SENTENCES, SUMMARIES, SiteContext
from hansa.sync.keys import PRIVATE_KEY_FILE, SiteIdentity


def _snapshot(home: Path) -> dict[str, bytes]:
    """The site's own state files (not the stores' internals), to prove a refusal changed nothing."""
    return {p.name: p.read_bytes() for p in [home / "site.json", *sorted((home / "keys").iterdir())]}


def test_install_creates_everything_then_is_idempotent(tmp_path: Path, make_config: Callable[..., Config]) -> None:
    cfg = make_config(tmp_path)
    with SiteContext.open(cfg) as ctx:
        first = install_site(ctx)
        assert first.already_installed == ()
        assert first.graph.created and first.identity_created and first.site_file_created
        assert set(first.collections_created) == set(COLLECTIONS) == {CHUNKS, SUMMARIES, SENTENCES}
        assert ctx.vectors.count(CHUNKS) == 0 and ctx.vectors.count(SUMMARIES) == 0
        before = _snapshot(tmp_path)

        second = install_site(ctx)
        assert set(second.already_installed) == {
            "graph schema", *(f"collection {name}" for name in COLLECTIONS), "site identity", "site file"
        }
        assert second.keyid == first.keyid and second.public_key_b64 == first.public_key_b64
        assert _snapshot(tmp_path) == before  # nothing rewritten, the key least of all

    recorded = json.loads((tmp_path / "site.json").read_text())
    assert recorded["site_id"] == "acme"
    assert recorded["embedding"] == {"model_id": "sentence-transformers/all-MiniLM-L6-v2", "dim": 384,
                                     "model_sha256": MODELS["all-MiniLM-L6-v2"].graph.sha256}


def test_private_key_is_owner_only_and_loads(tmp_path: Path, make_config: Callable[..., Config]) -> None:
    with SiteContext.open(make_config(tmp_path)) as ctx:
        result = install_site(ctx)
        assert stat.S_IMODE((tmp_path / "keys" / PRIVATE_KEY_FILE).stat().st_mode) == 0o600
        assert load_identity(ctx).public_key_b64 == result.public_key_b64


def test_an_existing_key_is_kept(tmp_path: Path, make_config: Callable[..., Config]) -> None:
    existing = SiteIdentity.generate()
    existing.save(tmp_path / "keys")
    with SiteContext.open(make_config(tmp_path)) as ctx:
        result = install_site(ctx)
    assert not result.identity_created
    assert result.public_key_b64 == existing.public_key_b64


def test_another_embedding_model_is_refused_and_nothing_changes(tmp_path: Path, make_config: Callable[..., Config]) -> None:
    with SiteContext.open(make_config(tmp_path)) as ctx:
        install_site(ctx)
    before = _snapshot(tmp_path)
    # The same weights named by their directory get another model id: another space as far as
    # published vectors are concerned, so the site must be re-embedded, not silently mixed.
    other = make_config(tmp_path, HANSA_EMBEDDER_MODEL=str(packaged_model_dir()))
    with SiteContext.open(other) as ctx:
        assert ctx.embedder.model_id != "sentence-transformers/all-MiniLM-L6-v2"
        with pytest.raises(ConfigError, match="re-embed"):
            install_site(ctx)
    assert _snapshot(tmp_path) == before


def test_another_file_of_the_same_model_is_refused_a_legacy_record_is_not(tmp_path: Path, make_config: Callable[..., Config]) -> None:
    """int8 and fp32 graphs of one model share a model id, not a space: the file hash tells them
    apart. A site recorded before hashes were (no model_sha256) is matched on id and dimension."""
    with SiteContext.open(make_config(tmp_path)) as ctx:
        install_site(ctx)
    before = _snapshot(tmp_path)
    with SiteContext.open(make_config(tmp_path, HANSA_EMBEDDER_MODEL="all-MiniLM-L6-v2-q")) as ctx:
        with pytest.raises(ConfigError) as err:
            install_site(ctx)
    assert MODELS["all-MiniLM-L6-v2-q"].graph.sha256[:12] in str(err.value) and "hansa site reembed" in str(err.value)
    assert _snapshot(tmp_path) == before
    recorded = json.loads((tmp_path / "site.json").read_text())
    del recorded["embedding"]["model_sha256"]
    (tmp_path / "site.json").write_text(json.dumps(recorded))
    with SiteContext.open(make_config(tmp_path)) as ctx:
        install_site(ctx)  # same id and dimension: accepted


def test_another_site_id_on_the_same_home_is_refused(tmp_path: Path, make_config: Callable[..., Config]) -> None:
    with SiteContext.open(make_config(tmp_path)) as ctx:
        install_site(ctx)
    with SiteContext.open(make_config(tmp_path, HANSA_SITE_SITE_ID="globex")) as ctx:
        with pytest.raises(ConfigError, match="installed as site 'acme'"):
            install_site(ctx)


def test_a_damaged_site_file_is_reported(tmp_path: Path, make_config: Callable[..., Config]) -> None:
    with SiteContext.open(make_config(tmp_path)) as ctx:
        install_site(ctx)
        (tmp_path / "site.json").write_text('{"site_id": "acme"}')
        with pytest.raises(ConfigError, match="damaged"):
            install_site(ctx)


def test_missing_site_id_is_a_config_error(tmp_path: Path, make_config: Callable[..., Config]) -> None:
    cfg = load_config(env={"HANSA_HOME": str(tmp_path)})
    with SiteContext.open(cfg) as ctx:
        with pytest.raises(ConfigError, match="site id"):
            install_site(ctx)
