"""`hansa gateway enroll | revoke | sites` on a real registry file under a temporary home."""
from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from hansa.core.config import Config
from hansa.gateway.cli import gateway, open_registry
from hansa.sync.keys import SiteIdentity


def run(home: Path, *args: str):
    return CliRunner().invoke(gateway, list(args), obj={"config": Config(home=home)}, catch_exceptions=False)


def test_enroll_list_and_revoke(tmp_path: Path) -> None:
    key = SiteIdentity.generate().public_key_b64
    key_file = tmp_path / "site.pub"
    key_file.write_text(SiteIdentity.generate().public_key_b64 + "\n")
    res = run(tmp_path, "enroll", "--site-id", "site-a", "--url", "http://127.0.0.1:8701/",
              "--public-key", key, "--public-key", f"@{key_file}")
    assert res.exit_code == 0, res.output
    assert "enrolled site-a at http://127.0.0.1:8701 with 2 key(s)" in res.output
    assert (tmp_path / "gateway" / "registry.json").is_file()

    res = run(tmp_path, "sites", "--json")
    (site,) = json.loads(res.output)["sites"]
    assert site["site_id"] == "site-a" and site["status"] == "active" and site["routable"] is False

    res = run(tmp_path, "sites")
    assert res.output.splitlines()[0].split()[:3] == ["SITE", "STATUS", "ROUTABLE"]
    assert res.output.splitlines()[1].split()[:3] == ["site-a", "active", "no"]

    assert run(tmp_path, "revoke", "site-a").exit_code == 0
    assert open_registry(Config(home=tmp_path)).get("site-a").status == "revoked"


def test_errors_are_messages_not_tracebacks(tmp_path: Path) -> None:
    key = SiteIdentity.generate().public_key_b64
    res = run(tmp_path, "enroll", "--site-id", "../evil", "--url", "http://x.example", "--public-key", key)
    assert res.exit_code == 1 and "invalid site id" in res.output
    res = run(tmp_path, "enroll", "--site-id", "site-a", "--url", "ftp://x.example", "--public-key", key)
    assert res.exit_code == 1 and "only http" in res.output
    res = run(tmp_path, "enroll", "--site-id", "site-a", "--url", "http://x.example", "--public-key", "@/nonexistent/key")
    assert res.exit_code == 1 and "cannot read the public key file" in res.output
    res = run(tmp_path, "revoke", "nobody")
    assert res.exit_code == 1 and "not enrolled" in res.output
    assert "no sites enrolled" in run(tmp_path, "sites").output
