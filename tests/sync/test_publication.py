"""Publications: a round trip, and each way a publication can be forged, stale or inconsistent."""
from __future__ import annotations

import base64
import hashlib
import json
import struct
from datetime import datetime, timedelta, timezone
from typing import Any, Callable

import numpy as np
import pytest
from freezegun import freeze_time

from hansa.core.errors import HansaError, InputError, VerificationError
from hansa.sync.dsse import sign_envelope
from hansa.sync.keys import SiteIdentity
from hansa.sync.publication import (
    build_publication,
    open_publication,
    summary_record_bytes,
    summary_sha256,
)
from hansa.sync.vectors import decode_vector, encode_vector
from hansa.sync.wire import (
    PUBLICATION_TYPE,
    EmbeddingSpace,
    PublicationPayload,
    Richness,
    SummaryRecord,
)

SPACE = EmbeddingSpace(model_id="test-model", dim=8)
NOW = datetime(2025, 3, 1, 12, 0, 0, tzinfo=timezone.utc)
TTL = timedelta(hours=1)


@pytest.fixture(scope="module")
def site() -> SiteIdentity:
    return SiteIdentity.generate()


@pytest.fixture(scope="module")
def other() -> SiteIdentity:
    return SiteIdentity.generate()


def _record(i: int, vec: np.ndarray | None = None, text: str | None = None) -> SummaryRecord:
    rng = np.random.default_rng(i)
    v = rng.standard_normal(SPACE.dim).astype(np.float32) if vec is None else vec
    return SummaryRecord(summary_id=f"c{i}", version=i + 1, vector_b64=encode_vector(v),
                         richness=Richness(entities=3 * i, chunks=i, documents=1), level=i % 2,
                         text=text)


RECORDS = (_record(0, text="caf\u00e9 summary"), _record(1), _record(2))


def _signed(site: SiteIdentity, payload: PublicationPayload) -> dict[str, Any]:
    """Sign a payload directly, bypassing build_publication's checks (a buggy or hostile site)."""
    return sign_envelope(PUBLICATION_TYPE, payload.to_bytes(), site)


def _payload(**changes: Any) -> PublicationPayload:
    fields: dict[str, Any] = dict(
        site_id="site-a", sequence=7, issued_at="2025-03-01T12:00:00Z",
        expires="2025-03-01T13:00:00Z", embedding=SPACE, summaries=RECORDS,
        manifest={r.summary_id: (r.version, summary_sha256(r)) for r in RECORDS},
    )
    fields.update(changes)
    return PublicationPayload(**fields)


def _open(env: Any, site: SiteIdentity, claimed: str = "site-a",
          now: datetime = NOW) -> PublicationPayload:
    return open_publication(env, claimed, [site.public_key], SPACE, now=now)


def test_round_trip(site: SiteIdentity) -> None:
    env = build_publication(site, "site-a", 7, SPACE, RECORDS, TTL, now=NOW)
    assert env["payloadType"] == PUBLICATION_TYPE
    got = _open(json.dumps(env).encode(), site)
    assert got == _payload()
    assert got.summaries == RECORDS
    assert got.issued_at == "2025-03-01T12:00:00Z" and got.expires == "2025-03-01T13:00:00Z"
    assert dict(got.manifest) == {r.summary_id: (r.version, summary_sha256(r)) for r in RECORDS}
    for rec in got.summaries:
        original = next(r for r in RECORDS if r.summary_id == rec.summary_id)
        assert decode_vector(rec.vector_b64, SPACE.dim).tobytes() == \
            decode_vector(original.vector_b64, SPACE.dim).tobytes()


def test_empty_publication_withdraws_everything(site: SiteIdentity) -> None:
    env = build_publication(site, "site-a", 8, SPACE, [], TTL, now=NOW)
    got = _open(env, site)
    assert got.summaries == () and dict(got.manifest) == {}


def test_default_now_is_the_current_time(site: SiteIdentity) -> None:
    with freeze_time(NOW):
        env = build_publication(site, "site-a", 1, SPACE, RECORDS, TTL)
        assert open_publication(env, "site-a", [site.public_key], SPACE).sequence == 1
    with freeze_time(NOW + TTL + timedelta(seconds=1)):
        with pytest.raises(VerificationError, match="expired"):
            open_publication(env, "site-a", [site.public_key], SPACE)


def test_record_bytes_are_canonical() -> None:
    rec = SummaryRecord("c:1", 2, "AACAPw==", Richness(entities=3, chunks=4, documents=5),
                        level=1, text="caf\u00e9")
    assert summary_record_bytes(rec) == (
        b'{"id":"c:1","level":1,"richness":{"chunks":4,"documents":5,"entities":3},'
        b'"text":"caf\\u00e9","vector":"AACAPw==","version":2}'
    )
    assert summary_sha256(rec) == hashlib.sha256(summary_record_bytes(rec)).hexdigest()
    assert summary_sha256(rec) != summary_sha256(RECORDS[1])


def test_flipped_byte_anywhere_in_the_envelope_is_refused(site: SiteIdentity) -> None:
    env = build_publication(site, "site-a", 7, SPACE, RECORDS[:2], TTL, now=NOW)
    raw = json.dumps(env).encode()
    keyid_at = raw.index(env["signatures"][0]["keyid"].encode())
    hint = range(keyid_at, keyid_at + len(env["signatures"][0]["keyid"]))
    refused = 0
    for i in range(len(raw)):
        for mask in (0x01, 0x80):
            bad = bytearray(raw)
            bad[i] ^= mask
            if i in hint and mask == 0x01:
                # keyid is only a hint: changing it neither helps nor hurts a good signature
                assert _open(bytes(bad), site) == _open(raw, site)
                continue
            with pytest.raises(VerificationError):
                _open(bytes(bad), site)
            refused += 1
    assert refused > 2 * len(raw) - 40


def test_wrong_key_is_refused(site: SiteIdentity, other: SiteIdentity) -> None:
    env = build_publication(other, "site-a", 7, SPACE, RECORDS, TTL, now=NOW)
    with pytest.raises(VerificationError, match="signature"):
        _open(env, site)
    with pytest.raises(VerificationError, match="no enrolled keys"):
        open_publication(env, "site-a", [], SPACE, now=NOW)


def test_site_cannot_publish_into_another_namespace(site: SiteIdentity,
                                                    other: SiteIdentity) -> None:
    env = build_publication(site, "site-a", 7, SPACE, RECORDS, TTL, now=NOW)
    # Sent as site-b: site-b's keys do not verify it...
    with pytest.raises(VerificationError, match="signature"):
        open_publication(env, "site-b", [other.public_key], SPACE, now=NOW)
    # ...and even a key enrolled for both names cannot move a payload that names site-a.
    with pytest.raises(VerificationError, match="own namespace"):
        open_publication(env, "site-b", [site.public_key], SPACE, now=NOW)
    with pytest.raises(InputError, match="invalid site id"):
        open_publication(env, "../site-a", [site.public_key], SPACE, now=NOW)


def test_expired_publication_is_refused(site: SiteIdentity) -> None:
    env = build_publication(site, "site-a", 7, SPACE, RECORDS, TTL, now=NOW)
    assert _open(env, site, now=NOW + TTL - timedelta(seconds=1)).sequence == 7
    for late in (NOW + TTL, NOW + TTL + timedelta(days=30)):
        with pytest.raises(VerificationError, match="expired"):
            _open(env, site, now=late)


def test_publication_from_the_future_is_refused(site: SiteIdentity) -> None:
    env = build_publication(site, "site-a", 7, SPACE, RECORDS, TTL, now=NOW)
    assert _open(env, site, now=NOW - timedelta(minutes=4)).sequence == 7  # tolerated skew
    with pytest.raises(VerificationError, match="future"):
        _open(env, site, now=NOW - timedelta(minutes=6))


@pytest.mark.parametrize(("space", "named"), [
    (EmbeddingSpace(model_id="other-model", dim=8), "other-model"),
    (EmbeddingSpace(model_id="test-model", dim=16), "dim 16"),
])
def test_embedding_space_mismatch_names_both(site: SiteIdentity, space: EmbeddingSpace,
                                             named: str) -> None:
    env = build_publication(site, "site-a", 7, SPACE, RECORDS, TTL, now=NOW)
    with pytest.raises(InputError) as err:
        open_publication(env, "site-a", [site.public_key], space, now=NOW)
    assert "test-model" in str(err.value) and named in str(err.value)
    assert "dim 8" in str(err.value)


def test_vector_of_the_wrong_dimension_is_refused(site: SiteIdentity) -> None:
    short = _record(5, vec=np.ones(SPACE.dim - 1, dtype=np.float32))
    with pytest.raises(InputError, match="dimension 8"):
        build_publication(site, "site-a", 7, SPACE, RECORDS + (short,), TTL, now=NOW)
    recs = RECORDS + (short,)
    env = _signed(site, _payload(summaries=recs, manifest={
        r.summary_id: (r.version, summary_sha256(r)) for r in recs}))
    with pytest.raises(InputError, match="'c5'.*dimension 8"):
        _open(env, site)


def test_nan_vector_is_refused(site: SiteIdentity) -> None:
    with pytest.raises(InputError, match="NaN"):
        _record(6, vec=np.array([np.nan] * SPACE.dim, dtype=np.float32))
    raw = struct.pack("<8f", 0, 0, 0, float("nan"), 0, 0, 0, 0)
    nan_rec = SummaryRecord("c6", 1, base64.b64encode(raw).decode(), Richness(1, 1, 1))
    with pytest.raises(InputError, match="NaN"):
        build_publication(site, "site-a", 7, SPACE, [nan_rec], TTL, now=NOW)
    env = _signed(site, _payload(summaries=(nan_rec,),
                                 manifest={"c6": (1, summary_sha256(nan_rec))}))
    with pytest.raises(InputError, match="NaN"):
        _open(env, site)


def test_manifest_mismatch_is_refused(site: SiteIdentity) -> None:
    good = {r.summary_id: (r.version, summary_sha256(r)) for r in RECORDS}
    wrong_hash = dict(good, c1=(RECORDS[1].version, summary_sha256(RECORDS[2])))
    with pytest.raises(InputError, match="'c1' does not match its manifest sha256"):
        _open(_signed(site, _payload(manifest=wrong_hash)), site)
    wrong_version = dict(good, c1=(RECORDS[1].version + 1, good["c1"][1]))
    with pytest.raises(InputError, match="version 2 but the manifest says 3"):
        _open(_signed(site, _payload(manifest=wrong_version)), site)
    extra_entry = dict(good, c9=(1, "0" * 64))
    with pytest.raises(InputError, match="without a record"):
        _open(_signed(site, _payload(manifest=extra_entry)), site)


def test_record_not_in_manifest_is_refused(site: SiteIdentity) -> None:
    manifest = {r.summary_id: (r.version, summary_sha256(r)) for r in RECORDS[:2]}
    with pytest.raises(InputError, match="'c2' is not in the manifest"):
        _open(_signed(site, _payload(manifest=manifest)), site)


def test_duplicate_summary_ids_are_refused(site: SiteIdentity) -> None:
    with pytest.raises(InputError, match="twice"):
        build_publication(site, "site-a", 7, SPACE, RECORDS + (RECORDS[0],), TTL, now=NOW)
    env = _signed(site, _payload(summaries=RECORDS + (RECORDS[0],)))
    with pytest.raises(InputError, match="twice"):
        _open(env, site)


def _sign_json(site: SiteIdentity, obj: Any) -> dict[str, Any]:
    return sign_envelope(PUBLICATION_TYPE, json.dumps(obj).encode(), site)


@pytest.mark.parametrize("mutate", [
    lambda p: p.update(extra=1),
    lambda p: p.pop("manifest"),
    lambda p: p.update(sequence=-1),
    lambda p: p.update(sequence=True),
    lambda p: p.update(sequence=2**63),
    lambda p: p.update(site_id="Site-A"),
    lambda p: p.update(issued_at="2025-03-01 12:00:00"),
    lambda p: p.update(expires="2025-03-01T13:00:00+00:00"),
    lambda p: p.update(expires="2025-03-01T11:00:00Z"),  # before issued_at
    lambda p: p.update(expires="2025-02-30T13:00:00Z"),
    lambda p: p["embedding"].update(encoding="f16le-b64"),
    lambda p: p["embedding"].update(dim=8.0),
    lambda p: p["embedding"].update(model_id=""),
    lambda p: p["summaries"][0].update(id="bad id/"),
    lambda p: p["summaries"][0].pop("text"),
    lambda p: p["summaries"][0].update(text=3),
    lambda p: p["summaries"][0]["richness"].update(chunks=-1),
    lambda p: p["summaries"][0].update(vector=[0.0] * 8),
    lambda p: p.update(summaries={}),
    lambda p: p.update(summaries=[1]),
    lambda p: p["manifest"].update(c0=[1, "ABC"]),
    lambda p: p["manifest"].update(c0=[1]),
    lambda p: p["manifest"].update({"../x": [1, "0" * 64]}),
])
def test_malformed_signed_payload_is_an_input_error(site: SiteIdentity,
                                                    mutate: Callable[[Any], Any]) -> None:
    obj = _payload().to_json()
    mutate(obj)
    with pytest.raises(InputError):
        _open(_sign_json(site, obj), site)


@pytest.mark.parametrize("raw", [
    b"[" * 100_000, b"not json", b'{"site_id": "site-a", "site_id": "site-b"}',
    b'{"sequence": NaN}', b'{"sequence": ' + b"9" * 5000 + b"}", b"\xff\xfe",
])
def test_hostile_signed_bytes_are_input_errors_not_crashes(site: SiteIdentity,
                                                           raw: bytes) -> None:
    with pytest.raises(InputError):
        _open(sign_envelope(PUBLICATION_TYPE, raw, site), site)


def test_other_payload_types_are_refused(site: SiteIdentity) -> None:
    env = sign_envelope("application/vnd.hansa.other+json; v=1", _payload().to_bytes(), site)
    with pytest.raises(VerificationError, match="not accepted"):
        _open(env, site)


def test_build_refuses_bad_arguments(site: SiteIdentity) -> None:
    for kwargs in ({"site_id": "../etc"}, {"sequence": -1}, {"ttl": timedelta(0)}):
        args: dict[str, Any] = dict(identity=site, site_id="site-a", sequence=1, embedding=SPACE,
                                    summaries=RECORDS, ttl=TTL, now=NOW)
        args.update(kwargs)
        with pytest.raises(HansaError):
            build_publication(**args)
