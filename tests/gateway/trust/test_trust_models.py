"""The trust documents and records as models of core/model.py: what the code before them wrote still
loads and re-serializes to the same bytes, and bad input is refused naming the field.

data/today/ is a gateway's trust store written by the hand-written parsers (commit 57aa0ab, before
this conversion): a 2-of-3 federation at 2030-06-01T12:00Z, site-a admitted from a join request
with a policy and one publication recorded, site-b enrolled and revoked, and an API key file with
a revoked key and one limited to origins. data/today-records.json is what that code's
`SiteRecord.to_json` said of the sites."""
from __future__ import annotations

import json
import shutil
from datetime import datetime, timezone
from pathlib import Path

import pytest

from hansa.core.errors import InputError
from hansa.core.jsonsafe import dumps, loads_strict
from hansa.gateway.trust.apikeys import ApiKeyRecord, ApiKeyStore
from hansa.gateway.trust.documents import REGISTRY_TYPE, ROOT_TYPE, Registry, Root, SitePolicy
from hansa.gateway.trust.registry import SiteRegistry, StoredState
from hansa.gateway.trust.state import Publication
from hansa.sync.dsse import unverified_payload

DATA = Path(__file__).parent / "data"
T0 = datetime(2030, 6, 1, 12, tzinfo=timezone.utc)
EXPIRES = "2030-09-01T00:00:00Z"
KEY = "2Rot8k/Wf2DC2QshjaNggzi8bPblaloasXqw8EqoUg8="  # site-a's first key in data/today


@pytest.fixture
def today(tmp_path: Path) -> Path:
    return Path(shutil.copytree(DATA / "today", tmp_path / "gateway"))


def site(**changes: object) -> dict[str, object]:
    entry = {"site_id": "site-a", "url": "https://a.example.org", "public_keys": [KEY], "keys_version": 1,
             "status": "active", "admitted_at": "2030-06-01T12:00:00Z", "policy": {"max_summaries": 10}}
    return {**entry, **changes}


def registry(**changes: object) -> bytes:
    doc = {"version": 2, "expires": EXPIRES, "gateway_url": None, "sites": [site()]}
    return json.dumps({**doc, **changes}).encode()


# -- what today's code wrote ------------------------------------------------------------------------
def test_a_store_written_before_the_models_loads_as_it_did(today: Path) -> None:
    store = SiteRegistry(today / "registry.json", keys_dir=today / "no-keys", clock=lambda: T0)
    records = [r.to_json() for r in store.list()]
    assert records == json.loads((DATA / "today-records.json").read_text())
    assert [r.site_id for r in store.list() if r.is_routable(T0)] == ["site-a"]
    state = loads_strict((today / "registry.state.json").read_bytes())
    floors = store.refresh().publications
    assert {sid: p.to_json() for sid, p in floors.items()} == state["publications"]


def test_signed_documents_written_before_the_models_reserialize_to_the_signed_bytes(today: Path) -> None:
    history = sorted((today / "registry.history").iterdir())
    assert [p.name for p in history][-1] == "root-00000001.json" and len(history) == 5
    for path in history:
        kind, cls = (ROOT_TYPE, Root) if path.name.startswith("root") else (REGISTRY_TYPE, Registry)
        payload = unverified_payload(loads_strict(path.read_bytes()), kind)
        assert cls.from_bytes(payload).to_bytes() == payload, path.name


def test_an_api_key_file_written_before_the_models_loads_and_is_rewritten_byte_for_byte(today: Path) -> None:
    path = today / "api-keys.json"
    before = path.read_bytes()
    store = ApiKeyStore(path)
    keys = {r.name: r for r in store.list()}
    assert keys["front-end"].origins == ("site-a", "site-b") and keys["batch"].origins is None
    assert keys["batch"].revoked_at is not None
    store._save({r.name: r for r in store.list()})
    assert path.read_bytes() == before


# -- refusals name the field ------------------------------------------------------------------------
@pytest.mark.parametrize("data, message", [
    (registry(sites=[site(policy={})]), "registry: 'sites[0].policy': missing 'max_summaries'"),
    (registry(sites=[{k: v for k, v in site().items() if k != "policy"}]), "registry: 'sites[0]': missing 'policy'"),
    (registry(sites=[site(status="paused")]), "'sites[0].status'"),
    (registry(sites=[site(keys_version=1.0)]), "'sites[0].keys_version' has the wrong type"),
    (registry(sites=[site(keys_version=0)]), "'sites[0].keys_version'"),
    (registry(sites=[site(site_id="Site-A")]), "'sites[0].site_id': invalid site id"),
    (registry(sites=[site(url="ftp://a.example.org")]), "only http:// and https://"),
    (registry(sites=[site(public_keys=KEY)]), "'sites[0].public_keys' has the wrong type"),
    (registry(sites=[site(extra=1)]), "unknown keys ['sites[0].extra']"),
    (registry(version=1.0), "registry: 'version' has the wrong type"),
    (registry(expires="2030-09-01"), "registry: 'expires': timestamp '2030-09-01' must be RFC 3339 UTC"),
    (registry(sites=[site(), site()]), "sorted by id and each id listed once"),
    (json.dumps({"version": 2, "expires": EXPIRES, "sites": []}).encode(), "registry: missing 'gateway_url'"),
    (b"[1]", "registry: expected an object"),
    (b"{", "invalid JSON"),
])
def test_a_bad_registry_is_refused_naming_the_field(data: bytes, message: str) -> None:
    with pytest.raises(InputError) as refused:
        Registry.from_bytes(data)
    assert message in str(refused.value)


def test_a_bad_root_is_refused_naming_the_field() -> None:
    good = {"version": 1, "expires": EXPIRES, "keys": [KEY], "threshold": 1}
    for changes, message in (({"threshold": 2}, "threshold must be between 1 and the number of keys (1)"),
                             ({"threshold": True}, "'threshold' has the wrong type"),
                             ({"keys": ["not a key"]}, "public key: not valid standard base64"),
                             ({"keys": [KEY, KEY]}, "distinct")):
        with pytest.raises(InputError) as refused:
            Root.from_bytes(json.dumps({**good, **changes}).encode())
        assert message in str(refused.value)
    assert Root.from_bytes(json.dumps(good).encode()).to_json() == good


def test_documents_hansa_builds_are_validated_too() -> None:
    with pytest.raises(InputError, match="threshold"):
        Root(1, EXPIRES, (KEY,), 0)
    with pytest.raises(InputError, match="max_summaries"):
        SitePolicy(0)


def test_the_state_file_written_before_the_models_is_rewritten_byte_for_byte(today: Path) -> None:
    data = (today / "registry.state.json").read_bytes()
    assert dumps(StoredState.from_json(loads_strict(data)).to_json()) == data


@pytest.mark.parametrize("change, message", [
    (lambda s: s.update(format=1), "not a hansa registry state (format 2)"),
    (lambda s: s.update(extra=None), "registry.state.json: unknown keys ['extra']"),
    (lambda s: s["registry"].update(sha256="00"), "'registry.sha256': string should match pattern"),
    (lambda s: s["root"].update(version="1"), "'root.version' has the wrong type"),
    (lambda s: s.update(root=None), "a registry without a root"),
    (lambda s: s["publications"].update({"Site-A": s["publications"]["site-a"]}), "invalid site id 'Site-A'"),
    (lambda s: s.pop("publications"), "registry.state.json: missing 'publications'"),
])
def test_a_bad_state_file_is_refused_naming_the_field(today: Path, change, message) -> None:
    path = today / "registry.state.json"
    state = loads_strict(path.read_bytes())
    change(state)
    path.write_text(json.dumps(state))
    with pytest.raises(InputError) as refused:
        SiteRegistry(today / "registry.json", clock=lambda: T0)._load()
    assert message in str(refused.value)


@pytest.mark.parametrize("changes, message", [
    ({"last_sequence": -1}, "registry.state.json: 'publications.site-a.last_sequence': input should be greater"),
    ({"summary_count": "3"}, "'publications.site-a.summary_count' has the wrong type"),
    ({"expires": "tomorrow"}, "'publications.site-a.expires': timestamp 'tomorrow'"),
    ({"published_at": None, "extra": 1}, "unknown keys ['publications.site-a.extra']"),
])
def test_a_bad_publication_floor_on_disk_is_refused_naming_the_file_and_field(today: Path, changes, message) -> None:
    path = today / "registry.state.json"
    state = loads_strict(path.read_bytes())
    state["publications"]["site-a"].update(changes)
    path.write_text(json.dumps(state))
    with pytest.raises(InputError) as refused:
        SiteRegistry(today / "registry.json", clock=lambda: T0)._load()
    assert message in str(refused.value)
    del state["publications"]["site-a"]["summary_count"]
    with pytest.raises(InputError, match="missing 'summary_count'"):
        Publication.from_json(state["publications"]["site-a"])


@pytest.mark.parametrize("changes, message", [
    ({"salt": "00"}, "key #0: 'salt': string should match pattern"),
    ({"origins": ["site-a", "../x"]}, "'origins[1]': invalid site id '../x'"),
    ({"origins": None}, "'origins' has the wrong type"),
    ({"revoked_at": 5}, "'revoked_at' has the wrong type"),
    ({"secret": "x"}, "unknown keys ['secret']"),
])
def test_a_bad_api_key_record_is_refused_naming_the_field(today: Path, changes, message) -> None:
    path = today / "api-keys.json"
    data = loads_strict(path.read_bytes())
    data["keys"][0].update(changes)
    path.write_text(json.dumps(data))
    with pytest.raises(InputError) as refused:
        ApiKeyStore(path).list()
    assert message in str(refused.value)


def test_an_api_key_record_requires_revoked_at_and_keeps_origins_absent_when_unlimited() -> None:
    record = {"name": "a", "key_id": "0" * 16, "salt": "0" * 32, "sha256": "0" * 64, "created_at": "x"}
    with pytest.raises(InputError, match="missing 'revoked_at'"):
        ApiKeyRecord.from_json(record)
    assert ApiKeyRecord.from_json({**record, "revoked_at": None}).to_json() == {**record, "revoked_at": None}
    limited = ApiKeyRecord.from_json({**record, "revoked_at": None, "origins": ["b", "a", "b"]})
    assert limited.origins == ("b", "a") and limited.to_json()["origins"] == ["b", "a"]
