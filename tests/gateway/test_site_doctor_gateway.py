"""`hansa site doctor` on a site of the session federation: the gateway it published to routes to
it (a pass naming the sequence), and the same publication, seen after its expiry, fails."""
from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

from click.testing import CliRunner

from hansa.cli import main
from hansa.federation.local import LocalFederation
from hansa.plugin.doctor import diagnose, failed


def test_the_gateway_routes_to_a_published_site(federation: LocalFederation) -> None:
    handle = federation.sites["govt"]
    env = {"HANSA_SITE_SITE_ID": "govt", "HANSA_CONFIG": None, "HANSA_SITE_GATEWAY_URL": federation.gateway_url}
    res = CliRunner().invoke(main, ["--home", str(handle.ctx.cfg.home), "site", "doctor", "--json"], env=env)
    assert res.exit_code == 0, res.output
    found = {c["name"]: c for c in json.loads(res.stdout)["checks"]}
    assert found["gateway"]["status"] == "pass"
    assert found["gateway"]["detail"].startswith(f"routable at {federation.gateway_url}: sequence 1, ")
    assert found["publication"]["detail"].startswith("sequence 1 accepted, expires ")


def test_an_expired_publication_fails_with_the_fix(federation: LocalFederation) -> None:
    cfg = federation.sites["clapnq"].ctx.cfg
    later = datetime.now(timezone.utc) + timedelta(hours=cfg.site.publication_ttl_hours + 1)
    checks = {c.name: c for c in diagnose(cfg, None, "test", now=later)}
    assert failed(list(checks.values()))
    assert checks["publication"].status == "fail" and "expired at" in checks["publication"].detail
    assert "hansa site serve" in checks["publication"].hint
