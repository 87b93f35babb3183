from pathlib import Path

import pytest

from hansa.core.config import as_dict, load_config
from hansa.core.errors import ConfigError


def test_defaults_use_home_from_env(tmp_path: Path) -> None:
    cfg = load_config(env={"HANSA_HOME": str(tmp_path)})
    assert cfg.home == tmp_path
    assert cfg.graph.backend == "embedded"
    assert cfg.graph_path == tmp_path / "graph.sqlite"
    assert cfg.milvus_uri == str(tmp_path / "milvus.db")


def test_env_overrides_file_and_coerces_types(tmp_path: Path) -> None:
    (tmp_path / "hansa.toml").write_text(
        '[neo4j]\nuri = "bolt://db:7687"\n[gateway]\nport = 9000\n[site]\npublish_text = true\n', encoding="utf-8"
    )
    cfg = load_config(
        env={"HANSA_HOME": str(tmp_path), "HANSA_NEO4J_URI": "bolt://other:1", "HANSA_GATEWAY_PORT": "9100",
             "HANSA_SITE_PUBLISH_TEXT": "false", "HANSA_GRAPH_BACKEND": "neo4j"}
    )
    assert cfg.neo4j.uri == "bolt://other:1"
    assert cfg.gateway.port == 9100
    assert cfg.site.publish_text is False
    assert cfg.graph.backend == "neo4j"


@pytest.mark.parametrize(
    "toml, env, message",
    [
        ("[nope]\na = 1\n", {}, "unknown section"),
        ("[neo4j]\nurl = 'x'\n", {}, "unknown key 'url'"),
        ("[neo4j\n", {}, "not valid TOML"),
        ("", {"HANSA_GATEWAY_PORT": "eighty"}, "not a valid"),
        ("", {"HANSA_GRAPH_BACKEND": "postgres"}, "graph.backend"),
    ],
)
def test_bad_config_is_a_clear_error(tmp_path: Path, toml: str, env: dict, message: str) -> None:
    (tmp_path / "hansa.toml").write_text(toml, encoding="utf-8")
    with pytest.raises(ConfigError, match=message):
        load_config(env={"HANSA_HOME": str(tmp_path), **env})


def test_explicit_missing_file_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(tmp_path / "absent.toml", env={"HANSA_HOME": str(tmp_path)})


def test_secrets_are_masked(tmp_path: Path) -> None:
    cfg = load_config(env={"HANSA_HOME": str(tmp_path), "HANSA_NEO4J_PASSWORD": "s3cret"})
    shown = as_dict(cfg)
    assert shown["neo4j"]["password"] == "***"
    assert "s3cret" not in repr(shown)
