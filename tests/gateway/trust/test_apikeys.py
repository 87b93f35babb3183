"""API keys: shown once, stored only as salted hashes, checked in constant time, revocable, and
managed with `hansa gateway api-key create | list | revoke` on a real key file."""
from __future__ import annotations

import hashlib
import json
import threading
from pathlib import Path

import pytest
from click.testing import CliRunner

from hansa.core.config import Config
from hansa.core.errors import BackendError, ConflictError, InputError, NotFoundError, VerificationError
from hansa.gateway.trust.apikeys import API_KEYS_FILE, ApiKeyStore, Unauthenticated
from hansa.cli.gateway import gateway


def test_a_key_authenticates_its_name_and_only_a_salted_hash_is_stored(tmp_path: Path) -> None:
    store = ApiKeyStore(tmp_path / API_KEYS_FILE)
    key = store.create("alice")
    other = store.create("bob")
    assert key != other and key.startswith("hansa_")
    assert store.authenticate(f"Bearer {key}") == "alice"
    assert store.authenticate(f"bearer   {other} ") == "bob"
    raw = (tmp_path / API_KEYS_FILE).read_text()
    secret = key.split("_", 2)[2]  # hansa_<id>_<secret>; the secret itself may hold "_"
    assert key not in raw and secret not in raw
    recs = {r["name"]: r for r in json.loads(raw)["keys"]}
    assert recs["alice"]["salt"] != recs["bob"]["salt"]
    assert recs["alice"]["sha256"] == hashlib.sha256(bytes.fromhex(recs["alice"]["salt"]) + key.encode()).hexdigest()
    assert (tmp_path / API_KEYS_FILE).stat().st_mode & 0o077 == 0  # not readable by other users


@pytest.mark.parametrize("header", [None, "", "Bearer", "Bearer ", "Basic YWxpY2U6cHc=", "Token abc",
                                    "Bearer hansa_0000000000000000_" + "A" * 43, "Bearer " + "x" * 5000,
                                    "Bearer hansa_zz_zz"])
def test_missing_malformed_and_unknown_keys_are_401(tmp_path: Path, header: str | None) -> None:
    store = ApiKeyStore(tmp_path / API_KEYS_FILE)
    store.create("alice")
    with pytest.raises(Unauthenticated) as refused:
        store.authenticate(header)
    assert refused.value.http_status == 401
    assert refused.value.http_headers["WWW-Authenticate"].startswith("Bearer")


def test_a_known_key_id_with_the_wrong_secret_is_401(tmp_path: Path) -> None:
    store = ApiKeyStore(tmp_path / API_KEYS_FILE)
    key = store.create("alice")
    forged = key[:-4] + ("AAAA" if not key.endswith("AAAA") else "BBBB")
    with pytest.raises(Unauthenticated, match="invalid API key"):
        store.authenticate(f"Bearer {forged}")


def test_revocation_is_403_immediately_and_names_are_never_reused(tmp_path: Path) -> None:
    path = tmp_path / API_KEYS_FILE
    key = ApiKeyStore(path).create("alice")
    running_gateway = ApiKeyStore(path)  # another process' view of the same file
    assert running_gateway.authenticate(f"Bearer {key}") == "alice"
    rec = ApiKeyStore(path).revoke("alice")
    assert rec.revoked_at
    with pytest.raises(VerificationError, match="revoked") as refused:
        running_gateway.authenticate(f"Bearer {key}")
    assert refused.value.http_status == 403
    before = path.read_bytes()
    with pytest.raises(ConflictError):
        ApiKeyStore(path).create("alice")
    with pytest.raises(NotFoundError):
        ApiKeyStore(path).revoke("nobody")
    for bad in ("", "Alice", "../x", "a" * 65, "a b"):
        with pytest.raises(InputError):
            ApiKeyStore(path).create(bad)
    assert path.read_bytes() == before  # refusals wrote nothing


def test_a_damaged_key_file_is_refused_not_trusted(tmp_path: Path) -> None:
    path = tmp_path / API_KEYS_FILE
    key = ApiKeyStore(path).create("alice")
    data = json.loads(path.read_text())
    data["keys"][0]["sha256"] = "zz"
    path.write_text(json.dumps(data))
    with pytest.raises(BackendError, match="operator") as refused:
        ApiKeyStore(path).authenticate(f"Bearer {key}")
    assert str(tmp_path) not in str(refused.value)  # clients learn nothing about the gateway's files
    with pytest.raises(InputError, match=r"key #0: 'sha256': string should match pattern"):
        ApiKeyStore(path).list()


def test_concurrent_creators_lose_no_key(tmp_path: Path) -> None:
    path = tmp_path / API_KEYS_FILE
    keys: dict[str, str] = {}

    def create(name: str) -> None:
        keys[name] = ApiKeyStore(path).create(name)  # a store per thread: like separate CLI runs

    threads = [threading.Thread(target=create, args=(f"client-{i}",)) for i in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    store = ApiKeyStore(path)
    assert sorted(r.name for r in store.list()) == sorted(keys)
    assert all(store.authenticate(f"Bearer {k}") == n for n, k in keys.items())


def run(home: Path, *args: str):
    return CliRunner().invoke(gateway, ["api-key", *args], obj={"config": Config(home=home)})


def test_cli_prints_a_key_once_and_revokes_it(tmp_path: Path) -> None:
    res = run(tmp_path, "create", "alice")
    assert res.exit_code == 0, res.output
    key = res.stdout.strip()
    assert "\n" not in key and "not shown again" in res.stderr
    store = ApiKeyStore(tmp_path / "gateway" / API_KEYS_FILE)
    assert store.authenticate(f"Bearer {key}") == "alice"

    listing = run(tmp_path, "list", "--json")
    (view,) = json.loads(listing.stdout)["api_keys"]
    assert view["name"] == "alice" and view["revoked"] is False and key not in listing.stdout
    assert set(view) == {"name", "key_id", "created_at", "revoked", "revoked_at", "origins"}

    assert run(tmp_path, "revoke", "alice").exit_code == 0
    with pytest.raises(VerificationError):
        store.authenticate(f"Bearer {key}")
    assert "revoked" in run(tmp_path, "list").stdout

    again = run(tmp_path, "create", "alice")
    assert again.exit_code != 0 and "already exists" in again.output and "Traceback" not in again.output
    assert run(tmp_path, "revoke", "bob").exit_code != 0


def test_a_key_may_be_limited_to_origins_and_files_without_limits_still_load(tmp_path: Path) -> None:
    path = tmp_path / API_KEYS_FILE
    store = ApiKeyStore(path)
    store.create("anyone")
    before = path.read_bytes()
    assert b"origins" not in before  # a key without a limit is stored as it always was
    store.create("govt-desk", origins=["govt", "govt", "state-1"])
    assert store.allowed_origins("govt-desk") == {"govt", "state-1"}
    assert store.allowed_origins("anyone") is None and store.allowed_origins("in-process-caller") is None
    assert json.loads(path.read_bytes())["keys"][1]["origins"] == ["govt", "state-1"]
    with pytest.raises(InputError, match="site id"):
        store.create("bad-desk", origins=["Not A Site"])
    with pytest.raises(InputError, match="origins"):
        store.create("bad-desk", origins="govt")  # type: ignore[arg-type]
    res = run(tmp_path, "create", "cli-desk", "--origin", "govt")
    assert res.exit_code == 0, res.output
    (view,) = [v for v in json.loads(run(tmp_path, "list", "--json").stdout)["api_keys"] if v["name"] == "cli-desk"]
    assert view["origins"] == ["govt"]
