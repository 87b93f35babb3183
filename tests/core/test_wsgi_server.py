"""The production server's options: what is refused before any worker starts, and the gunicorn
settings hansa relies on (workers open their own stores; TLS from the configured files)."""
from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from hansa.core.config import load_config
from hansa.core.errors import ConfigError
from hansa.core.wsgi_server import ServerOptions, gunicorn_settings, usable_cpus


@pytest.mark.parametrize("workers", [0, -1, 65, True, 1.5])
def test_nonsense_worker_counts_are_refused(workers: object) -> None:
    with pytest.raises(ConfigError, match="--workers"):
        ServerOptions(workers=workers).validate()  # type: ignore[arg-type]


def test_tls_needs_both_files_and_they_must_exist(tmp_path: Path) -> None:
    cert = tmp_path / "c.pem"
    cert.write_text("x")
    with pytest.raises(ConfigError, match="both tls_cert and tls_key"):
        ServerOptions(tls_cert=str(cert)).validate()
    with pytest.raises(ConfigError, match="tls_key: .* is not a readable file"):
        ServerOptions(tls_cert=str(cert), tls_key=str(tmp_path / "missing.pem")).validate()


def test_gunicorn_settings(tmp_path: Path) -> None:
    plain = gunicorn_settings(ServerOptions(host="::1", port=8701, workers=3))
    assert plain["bind"] == ["[::1]:8701"] and plain["workers"] == 3
    assert plain["preload_app"] is False, "each worker must open its own stores"
    assert "certfile" not in plain
    tls = gunicorn_settings(ServerOptions(tls_cert="/c.pem", tls_key="/k.pem"))
    assert (tls["certfile"], tls["keyfile"]) == ("/c.pem", "/k.pem")
    assert ServerOptions(tls_cert="/c.pem", tls_key="/k.pem").scheme == "https"


def test_compute_threads_split_the_cores_between_workers() -> None:
    cores = usable_cpus()
    assert ServerOptions(workers=1).compute_threads() == cores
    assert ServerOptions(workers=cores * 2).compute_threads() == 1
    assert ServerOptions(workers=4, threads_per_worker=3).compute_threads() == 3


def test_serving_keys_come_from_config_and_environment(tmp_path: Path) -> None:
    (tmp_path / "hansa.toml").write_text('[site]\nworkers = 2\ntls_cert = "/c.pem"\ntls_key = "/k.pem"\n')
    cfg = load_config(env={"HANSA_HOME": str(tmp_path), "HANSA_GATEWAY_WORKERS": "4", "HANSA_SITE_PROXY_HOPS": "1"})
    assert (cfg.site.workers, cfg.site.tls_cert, cfg.site.tls_key, cfg.site.proxy_hops) == (2, "/c.pem", "/k.pem", 1)
    assert cfg.gateway.workers == 4 and cfg.state_path == tmp_path / "state.sqlite"


def test_threads_pick_gunicorns_threaded_worker_and_nonsense_is_refused() -> None:
    """A gateway request mostly waits on sites (up to the per-site deadline when one hangs): with
    threads > 1 a worker serves that many at once instead of queueing them (scripts/bench_load.py)."""
    assert gunicorn_settings(ServerOptions())["worker_class"] == "sync"
    threaded = gunicorn_settings(ServerOptions(workers=2, threads=8))
    assert (threaded["worker_class"], threaded["threads"], threaded["workers"]) == ("gthread", 8, 2)
    for threads in (0, -3, 257, True, 2.5):
        with pytest.raises(ConfigError, match="threads"):
            ServerOptions(threads=threads).validate()  # type: ignore[arg-type]


def test_the_gateway_serves_several_requests_per_worker_and_the_site_one(tmp_path: Path) -> None:
    from hansa.gateway.http.serving import server_options as gateway_options
    from hansa.plugin.serving import server_options as site_options

    cfg = load_config(env={"HANSA_HOME": str(tmp_path)})
    assert gateway_options(cfg).threads == cfg.gateway.threads > 1
    assert site_options(cfg).threads == 1, "a site's retrieve is CPU-bound: it scales with processes"
    cfg = load_config(env={"HANSA_HOME": str(tmp_path), "HANSA_GATEWAY_THREADS": "3"})
    assert gunicorn_settings(gateway_options(cfg, workers=2))["threads"] == 3


@pytest.fixture
def restored_logging():  # type: ignore[no-untyped-def]
    """configure() rewires the process's "hansa" logger: put it back for the tests after this one."""
    from hansa.core import logs

    hansa = logging.getLogger("hansa")
    saved = (list(hansa.handlers), hansa.level, hansa.propagate, dict(logs._FORMAT))
    yield
    hansa.handlers[:], hansa.level, hansa.propagate = saved[0], saved[1], saved[2]
    logs._FORMAT.update(saved[3])


@pytest.mark.parametrize("as_json", [True, False])
def test_gunicorns_own_lines_come_in_the_process_log_format(as_json: bool, capsys: pytest.CaptureFixture[str],
                                                             restored_logging: None) -> None:
    from gunicorn.config import Config

    from hansa.core import logs

    logs.configure("info", as_json=as_json)
    cfg = Config()
    for key, value in gunicorn_settings(ServerOptions(workers=2)).items():
        cfg.set(key, value)
    logger = cfg.logger_class(cfg)
    logger.info("Booting worker with pid: %s", 4242)
    line = capsys.readouterr().err.strip().splitlines()[-1]
    if as_json:
        event = json.loads(line)
        assert (event["logger"], event["level"], event["event"]) == ("gunicorn.error", "info", "Booting worker with pid: 4242")
    else:
        assert line == "info    gunicorn.error: Booting worker with pid: 4242"
