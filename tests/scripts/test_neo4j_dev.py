"""scripts/neo4j-dev tells an admin how to point a site at it (issue 34: it printed only the tests'
variable, and the README never said how to start it)."""
from __future__ import annotations

import shlex
import sys
from pathlib import Path

from hansa.core.config import load_config

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
import neo4j_dev  # noqa: E402  (dev tooling lives in scripts/, not in the package)


def test_the_printed_exports_configure_a_site_for_that_server() -> None:
    env: dict[str, str] = {}
    for line in neo4j_dev.admin_exports("bolt://127.0.0.1:7687").splitlines():
        words = shlex.split(line)
        assert words[0] == "export", line
        env.update(word.split("=", 1) for word in words[1:])
    assert all(name.startswith("HANSA_") for name in env)
    cfg = load_config(None, env=env)  # unknown HANSA_<SECTION>_<KEY> names would be refused here
    assert cfg.graph.backend == "neo4j" and cfg.neo4j.uri == "bolt://127.0.0.1:7687"
    assert cfg.neo4j.database == "neo4j" and cfg.neo4j.user == "neo4j" and cfg.neo4j.password


def test_port_is_an_option_and_its_help_names_the_exports(capsys) -> None:
    try:
        neo4j_dev.main(["--help"])
    except SystemExit as exc:
        assert exc.code == 0
    out = capsys.readouterr().out
    assert "--port" in out and "export" in out
