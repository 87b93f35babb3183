"""`hansa gateway enroll | revoke | sites` (the local/demo flow) on a real registry under a temporary home."""
from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from hansa.core.config import Config
from hansa.cli.gateway import gateway, open_registry
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
    assert "enrolled site-a at http://127.0.0.1:8701 with 2 key(s) (registry version 2)" in res.output
    assert (tmp_path / "gateway" / "registry.json").is_file()
    (local_key,) = [p.name for p in (tmp_path / "gateway" / "federation-keys").iterdir()]  # a 1-of-1 demo federation

    res = run(tmp_path, "sites", "--json")
    shown = json.loads(res.stdout)
    assert shown["root"]["threshold"] == 1 and shown["registry"]["version"] == 2
    (site,) = shown["sites"]
    assert site["site_id"] == "site-a" and site["status"] == "active" and site["routable"] is False

    lines = run(tmp_path, "sites").output.splitlines()
    assert lines[0].startswith("federation root v1: 1 of 1 keys") and lines[1].startswith("registry v2")
    assert lines[2].split()[:4] == ["SITE", "STATUS", "KEYS", "ROUTABLE"]
    assert lines[3].split()[:4] == ["site-a", "active", "v1", "no"]

    res = CliRunner().invoke(gateway, ["revoke", "site-a"], obj={"config": Config(home=tmp_path)})
    assert res.exit_code == 2 and "Missing option '--key'" in res.output  # revocation needs federation authority
    assert open_registry(Config(home=tmp_path)).get("site-a").status == "active"
    res = run(tmp_path, "revoke", "site-a", "--key", local_key)
    assert res.exit_code == 0 and "registry version 3: revoked site-a" in res.output
    assert open_registry(Config(home=tmp_path)).get("site-a").status == "revoked"


def test_errors_are_messages_not_tracebacks(tmp_path: Path) -> None:
    assert "no federation yet" in run(tmp_path, "sites").output
    key = SiteIdentity.generate().public_key_b64
    res = run(tmp_path, "enroll", "--site-id", "../evil", "--url", "http://x.example", "--public-key", key)
    assert res.exit_code == 1 and "invalid site id" in res.output
    res = run(tmp_path, "enroll", "--site-id", "site-a", "--url", "ftp://x.example", "--public-key", key)
    assert res.exit_code == 1 and "only http" in res.output
    res = run(tmp_path, "enroll", "--site-id", "site-a", "--url", "http://x.example", "--public-key", "@/nonexistent/key")
    assert res.exit_code == 1 and "cannot read the public key file" in res.output
    assert run(tmp_path, "enroll", "--site-id", "site-b", "--url", "http://x.example", "--public-key", key).exit_code == 0
    (local_key,) = [p.name for p in (tmp_path / "gateway" / "federation-keys").iterdir()]
    res = run(tmp_path, "revoke", "nobody", "--key", local_key)
    assert res.exit_code == 1 and "not in the registry" in res.output
    res = run(tmp_path, "revoke", "site-b", "--key", "0" * 32)
    assert res.exit_code == 1 and "no federation key" in res.output
    assert "no sites enrolled" not in run(tmp_path, "sites").output


def test_identity_prints_a_stable_gateway_key(tmp_path) -> None:
    """Sites configure this key as `[site] gateway_public_key`: it must not change between calls."""
    import base64

    from click.testing import CliRunner

    from hansa.cli import main

    runner = CliRunner()
    first = runner.invoke(main, ["--home", str(tmp_path), "gateway", "identity"])
    second = runner.invoke(main, ["--home", str(tmp_path), "gateway", "identity"])
    assert first.exit_code == 0, first.output
    assert first.stdout == second.stdout
    assert len(base64.b64decode(first.stdout.strip())) == 32


def test_quarantine_a_site_and_read_its_record_in_sites(tmp_path: Path) -> None:
    from hansa.gateway.query.conduct import SiteConduct
    from hansa.gateway.query.reliability import LOST, Observation, SiteReliability

    key = SiteIdentity.generate().public_key_b64
    assert run(tmp_path, "enroll", "--site-id", "site-a", "--url", "http://x.example", "--public-key", key).exit_code == 0
    assert not (tmp_path / "gateway" / "conduct.sqlite").exists()
    run(tmp_path, "sites")  # a read creates no file
    assert not (tmp_path / "gateway" / "conduct.sqlite").exists()
    res = CliRunner().invoke(gateway, ["quarantine", "site-a"], obj={"config": Config(home=tmp_path)})
    assert res.exit_code == 1 and "--reason is required" in res.output
    res = CliRunner().invoke(gateway, ["quarantine", "nobody", "--reason", "x"], obj={"config": Config(home=tmp_path)})
    assert res.exit_code == 1 and "not enrolled" in res.output
    res = run(tmp_path, "quarantine", "site-a", "--reason", "echoes questions")
    assert res.exit_code == 0 and "site-a: quarantined (echoes questions)" in res.output
    rel = SiteReliability.open(tmp_path / "gateway")  # what a serving gateway learned
    rel.observe({"site-a": Observation(successes=1.0, failures=2.0, why=((LOST, 2.0),))})
    rel.close()
    (site,) = json.loads(run(tmp_path, "sites", "--json").output)["sites"]
    assert site["conduct"]["quarantined"] == "echoes questions"
    assert site["reliability"]["failures_by_kind"] == {LOST: 2.0}
    row = run(tmp_path, "sites").output.splitlines()[3]
    assert "quarantined" in row and "(+1/-2)" in row
    conduct = SiteConduct.open(tmp_path / "gateway")
    assert conduct.quarantined() == {"site-a": "echoes questions"}  # what a serving gateway reads
    for asked in (["site-a"], ["site-b"], ["site-a", "site-b"], ["site-b"]):  # what serving workers routed
        conduct.observe(asked, {}, {})
    conduct.record_disputes([("site-a", other) for other in ("site-b", "site-c", "site-d")])  # contradicted three
    conduct.close()
    (site,) = json.loads(run(tmp_path, "sites", "--json").output)["sites"]
    assert site["conduct"]["routing_share"] == 0.5
    assert site["conduct"]["disputed_with"] == ["site-b", "site-c", "site-d"] and site["conduct"]["broadly_disputed"]
    assert run(tmp_path, "sites").output.splitlines()[2].split()[-3:-1] == ["ROUTED", "DISPUTED"]
    assert "50%" in run(tmp_path, "sites").output.splitlines()[3]
    assert "3 (broad)" in run(tmp_path, "sites").output.splitlines()[3]
    assert "quarantine lifted" in run(tmp_path, "quarantine", "site-a", "--release").output
    assert "was not quarantined" in run(tmp_path, "quarantine", "site-a", "--release").output
