"""The membership workflow through the real `hansa` root command: a site writes a join request, a
2-of-3 federation's admins approve it (in one go, or by passing a draft around), rotate its key,
revoke it, renew the registry and rotate their own keys. Refusals leave the registry unchanged."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from hansa.cli import main
from hansa.core.config import Config
from hansa.cli.gateway import open_registry
from hansa.sync.keys import SiteIdentity

GW = "https://gateway.example.org"


def hansa(home: Path, *args: str, site_id: str = "site-a") -> Result:
    env: dict[str, str | None] = {"HANSA_SITE_SITE_ID": site_id, "HANSA_CONFIG": None}
    return CliRunner().invoke(main, ["--home", str(home), *args], env=env, catch_exceptions=False)


@pytest.fixture
def homes(tmp_path: Path) -> tuple[Path, Path, list[str]]:
    """(gateway home with a 2-of-3 federation, an installed site's home, the federation keyids)."""
    gw, site = tmp_path / "gw", tmp_path / "site"
    res = hansa(gw, "gateway", "federation", "init", "--threshold", "2", "--keys", "3", "--gateway", GW)
    assert res.exit_code == 0, res.output
    assert "2 of 3 keys must sign" in res.output and "different admin" in res.output
    keyids = re.findall(r"key ([0-9a-f]{32})", res.output)
    assert len(keyids) == 3
    SiteIdentity.generate().save(Config(home=site).keys_dir)  # what `hansa site install` leaves
    return gw, site, keyids


def registry_files(gw: Path) -> dict[str, bytes]:
    folder = gw / "gateway"
    return {p.name: p.read_bytes() for p in sorted(folder.rglob("registry*")) if p.is_file() and not p.name.endswith(".lock")}


def test_a_site_joins_by_request_and_m_of_n_approval(homes, tmp_path: Path) -> None:
    gw, site, keys = homes
    for keyid in keys:
        pem = gw / "gateway" / "federation-keys" / keyid / "site-ed25519.pem"
        assert pem.stat().st_mode & 0o777 == 0o600
    request = tmp_path / "join.json"
    res = hansa(site, "site", "join-request", "--gateway", GW, "--url", "https://a.example.org", "--out", str(request))
    assert res.exit_code == 0, res.output
    assert json.loads(request.read_text())["payloadType"] == "application/vnd.hansa.join-request+json; v=1"
    again = hansa(site, "site", "join-request", "--gateway", GW, "--out", str(request))
    assert again.exit_code == 1 and "already exists" in again.output
    spoof = hansa(site, "site", "join-request", "--gateway", GW, "--out", str(tmp_path / "x.json"), site_id="../x")
    assert spoof.exit_code == 1 and "invalid site id" in spoof.output

    before = registry_files(gw)
    res = hansa(gw, "gateway", "approve", str(request))
    assert res.exit_code == 2 and "Missing option '--key'" in res.output
    res = hansa(gw, "gateway", "approve", str(request), "--key", keys[0])
    assert res.exit_code == 1 and "2 of 3 must sign" in res.output
    stranger = tmp_path / "stranger"
    SiteIdentity.generate().save(stranger)
    res = hansa(gw, "gateway", "approve", str(request), "--key", keys[0], "--key", str(stranger))
    assert res.exit_code == 1 and "not federation keys" in res.output
    assert registry_files(gw) == before

    res = hansa(gw, "gateway", "approve", str(request), "--key", keys[0], "--key", keys[2])
    assert res.exit_code == 0 and "registry version 2: site admitted" in res.output
    shown = json.loads(hansa(gw, "gateway", "sites", "--json").output)
    assert shown["registry"]["version"] == 2 and shown["registry"]["gateway_url"] == GW
    assert [(s["site_id"], s["url"], s["status"]) for s in shown["sites"]] == [("site-a", "https://a.example.org", "active")]


def test_admins_on_different_machines_pass_a_draft_around(homes, tmp_path: Path) -> None:
    gw, site, keys = homes
    request, draft = tmp_path / "join.json", tmp_path / "draft.json"
    assert hansa(site, "site", "join-request", "--gateway", GW, "--out", str(request)).exit_code == 0
    res = hansa(gw, "gateway", "approve", str(request), "--key", keys[1], "--out", str(draft))
    assert res.exit_code == 0 and "1 signature(s)" in res.output
    before = registry_files(gw)
    res = hansa(gw, "gateway", "federation", "submit", str(draft))
    assert res.exit_code == 1 and "1 of 2 required" in res.output
    assert registry_files(gw) == before
    res = hansa(gw, "gateway", "federation", "sign", str(draft), "--key", keys[1])  # the same admin again
    assert res.exit_code == 0 and "1 signature(s), 2 needed" in res.output
    res = hansa(gw, "gateway", "federation", "sign", str(draft), "--key", keys[2])
    assert res.exit_code == 0 and "signed registry version 2 (1 sites); 2 signature(s)" in res.output
    res = hansa(gw, "gateway", "federation", "submit", str(draft))
    assert res.exit_code == 0 and "registry version 2 in force" in res.output
    assert open_registry(Config(home=gw)).get("site-a").status == "active"


def test_rotate_revoke_renew_and_rotate_the_federation_keys(homes, tmp_path: Path) -> None:
    gw, site, keys = homes
    request, rotation = tmp_path / "join.json", tmp_path / "rotate.json"
    assert hansa(site, "site", "join-request", "--gateway", GW, "--out", str(request)).exit_code == 0
    assert hansa(gw, "gateway", "approve", str(request), "--key", keys[0], "--key", keys[1]).exit_code == 0

    res = hansa(site, "site", "rotate-request", "--new-key-dir", str(tmp_path / "new-key"), "--out", str(rotation))
    assert res.exit_code == 0, res.output
    new_key = SiteIdentity.load(tmp_path / "new-key").public_key_b64
    res = hansa(gw, "gateway", "rotate", "site-b", str(rotation), "--key", keys[0], "--key", keys[1])
    assert res.exit_code == 1  # a rotation for site-a cannot change site-b
    res = hansa(gw, "gateway", "rotate", "site-a", str(rotation), "--key", keys[0], "--key", keys[1])
    assert res.exit_code == 0 and "site-a key set version 2" in res.output
    assert open_registry(Config(home=gw)).get("site-a").public_keys == (new_key,)

    res = hansa(gw, "gateway", "revoke", "site-a", "--key", keys[2], "--key", keys[1])
    assert res.exit_code == 0 and "revoked site-a" in res.output
    res = hansa(gw, "gateway", "federation", "renew", "--key", keys[0], "--key", keys[2], "--days", "30")
    assert res.exit_code == 0 and "registry version 5 in force" in res.output

    before = registry_files(gw)
    res = hansa(gw, "gateway", "federation", "rotate-root", "--key", keys[0], "--new-keys", "2", "--threshold", "2")
    assert res.exit_code == 1 and "2 of 3 must sign" in res.output
    assert registry_files(gw) == before
    res = hansa(gw, "gateway", "federation", "rotate-root", "--key", keys[0], "--key", keys[1],
                "--new-keys", "2", "--threshold", "2")
    assert res.exit_code == 0 and "federation root version 2" in res.output
    new_keys = re.findall(r"key ([0-9a-f]{32})", res.output)
    res = hansa(gw, "gateway", "federation", "renew", "--key", keys[0], "--key", keys[1])
    assert res.exit_code == 1 and "not federation keys" in res.output  # the old keys lost their authority
    res = hansa(gw, "gateway", "federation", "renew", "--key", new_keys[0], "--key", new_keys[1])
    assert res.exit_code == 0
    lines = hansa(gw, "gateway", "sites").output.splitlines()
    assert lines[0].startswith("federation root v2: 2 of 2 keys") and lines[1].startswith("registry v7")
    assert lines[3].split()[:3] == ["site-a", "revoked", "v2"]


def test_admitting_a_site_the_gateway_will_not_call_says_so_at_once(homes, tmp_path: Path) -> None:
    """A loopback or private site URL is refused at call time unless the gateway allows private
    addresses; `approve` and `enroll` say so when the site is admitted, not as "No answer" later."""
    gw, site, keys = homes
    request = tmp_path / "join.json"
    res = hansa(site, "site", "join-request", "--gateway", GW, "--url", "http://127.0.0.1:8701", "--out", str(request))
    assert res.exit_code == 0, res.output
    res = hansa(gw, "gateway", "approve", str(request), "--key", keys[0], "--key", keys[1])
    assert res.exit_code == 0 and "site admitted" in res.stdout
    assert "warning: site-a's URL http://127.0.0.1:8701: 127.0.0.1 is 127.0.0.1, a private, loopback" in res.stderr
    assert "--allow-private-addresses" in res.stderr

    pub = SiteIdentity.load(Config(home=site).keys_dir).public_key_b64
    enroll = ("gateway", "enroll", "--site-id", "site-b", "--url", "http://10.1.2.3:8701", "--public-key", pub,
              "--key", keys[0], "--key", keys[1], "--json")
    res = hansa(gw, *enroll)
    assert res.exit_code == 0 and json.loads(res.stdout)["site_id"] == "site-b"  # stdout stays JSON
    assert "warning: site-b's URL http://10.1.2.3:8701: 10.1.2.3 is 10.1.2.3, a private" in res.stderr
    allowed = CliRunner().invoke(main, ["--home", str(gw), *enroll[:3], "site-c", *enroll[4:]],
                                 env={"HANSA_CONFIG": None, "HANSA_GATEWAY_ALLOW_PRIVATE_ADDRESSES": "true"})
    assert allowed.exit_code == 0 and "warning" not in allowed.stderr, allowed.stderr  # the gateway calls it
    public = hansa(gw, *enroll[:3], "site-d", "--url", "https://93.184.216.34", *enroll[6:])
    assert public.exit_code == 0 and "warning" not in public.stderr
