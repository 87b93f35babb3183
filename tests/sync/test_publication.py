"""Publications: a round trip, deltas, and each way a publication can be forged, stale or
inconsistent (sync.publication, payload type v=2)."""
from __future__ import annotations

import base64
import hashlib
import json
import struct
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from typing import Any, Callable

import numpy as np
import pytest
from freezegun import freeze_time
from hypothesis import given, settings
from hypothesis import strategies as st

from hansa.core.errors import ConflictError, HansaError, InputError, VerificationError
from hansa.sync.dsse import sign_envelope
from hansa.sync.keys import SiteIdentity
from hansa.sync.publication import (
    PUBLICATION_TYPE_V2,
    PublicationHead,
    StaleBaseError,
    build_publication,
    carried_over,
    manifest_sha256,
    open_publication,
    parse_publication,
    summary_record_bytes,
    summary_sha256,
)
from hansa.sync.terms import TermSketch
from hansa.sync.vectors import decode_vector, encode_vector
from hansa.sync.wire import PUBLICATION_TYPE, EmbeddingSpace, Richness, SummaryRecord, canonical_json

SPACE = EmbeddingSpace(model_id="test-model", dim=8)
NOW = datetime(2025, 3, 1, 12, 0, 0, tzinfo=timezone.utc)
TTL = timedelta(hours=1)


@pytest.fixture(scope="module")
def site() -> SiteIdentity:
    return SiteIdentity.generate()


@pytest.fixture(scope="module")
def other() -> SiteIdentity:
    return SiteIdentity.generate()


def _record(i: int, vec: np.ndarray | None = None, text: str | None = None, version: int | None = None) -> SummaryRecord:
    rng = np.random.default_rng(i)
    v = rng.standard_normal(SPACE.dim).astype(np.float32) if vec is None else vec
    return SummaryRecord(summary_id=f"c{i}", version=i + 1 if version is None else version,
                         vector_b64=encode_vector(v), richness=Richness(entities=3 * i, chunks=i, documents=1),
                         level=i % 2, text=text)


RECORDS = (_record(0, text="caf\u00e9 summary"), _record(1), _record(2))


def _manifest(records: Any) -> dict[str, tuple[int, str]]:
    return {r.summary_id: (r.version, summary_sha256(r)) for r in records}


def _columns(records: Any) -> dict[str, Any]:
    return {
        "ids": [r.summary_id for r in records], "versions": [r.version for r in records],
        "levels": [r.level for r in records], "entities": [r.richness.entities for r in records],
        "chunks": [r.richness.chunks for r in records], "documents": [r.richness.documents for r in records],
        "texts": [r.text for r in records],
        "vectors": base64.b64encode(b"".join(base64.b64decode(r.vector_b64) for r in records)).decode(),
    }


def _obj(records: Any = RECORDS, manifest: Any = None, **changes: Any) -> dict[str, Any]:
    """A payload as a buggy or hostile site might sign it, bypassing build_publication's checks."""
    obj: dict[str, Any] = {
        "site_id": "site-a", "sequence": 7, "issued_at": "2025-03-01T12:00:00Z",
        "expires": "2025-03-01T13:00:00Z", "embedding": SPACE.to_json(), "base": None,
        "manifest": {k: list(v) for k, v in (_manifest(records) if manifest is None else manifest).items()},
        "summaries": _columns(records), "tombstones": [],
    }
    obj.update(changes)
    return obj


def _signed(site: SiteIdentity, obj: Any) -> dict[str, Any]:
    return sign_envelope(PUBLICATION_TYPE_V2, json.dumps(obj).encode(), site)


def _open(env: Any, site: SiteIdentity, claimed: str = "site-a", now: datetime = NOW):
    return open_publication(env, claimed, [site.public_key], SPACE, now=now)


def test_round_trip(site: SiteIdentity) -> None:
    env = build_publication(site, "site-a", 7, SPACE, RECORDS, TTL, now=NOW)
    assert env["payloadType"] == PUBLICATION_TYPE_V2
    got = _open(json.dumps(env).encode(), site)
    assert (got.site_id, got.sequence, got.base, got.tombstones) == ("site-a", 7, None, ())
    assert got.is_full and got.summaries == RECORDS
    assert got.issued_at == "2025-03-01T12:00:00Z" and got.expires == "2025-03-01T13:00:00Z"
    assert dict(got.manifest) == _manifest(RECORDS)
    assert got.manifest_sha256 == manifest_sha256(_manifest(RECORDS))
    assert got.payload_sha256 == hashlib.sha256(base64.b64decode(env["payload"])).hexdigest()
    for i, rec in enumerate(RECORDS):  # vectors arrive bit for bit, as one float32 matrix
        assert got.pieces.vectors[i].tobytes() == decode_vector(rec.vector_b64, SPACE.dim).tobytes()
    assert got.pieces.vectors.dtype == np.float32 and not got.pieces.vectors.flags.writeable


def test_empty_publication_withdraws_everything(site: SiteIdentity) -> None:
    got = _open(build_publication(site, "site-a", 8, SPACE, [], TTL, now=NOW), site)
    assert got.summaries == () and dict(got.manifest) == {} and got.pieces.vectors.shape == (0, SPACE.dim)


def test_default_now_is_the_current_time(site: SiteIdentity) -> None:
    with freeze_time(NOW):
        env = build_publication(site, "site-a", 1, SPACE, RECORDS, TTL)
        assert open_publication(env, "site-a", [site.public_key], SPACE).sequence == 1
    with freeze_time(NOW + TTL + timedelta(seconds=1)):
        with pytest.raises(VerificationError, match="expired"):
            open_publication(env, "site-a", [site.public_key], SPACE)


def test_record_bytes_are_canonical() -> None:
    rec = SummaryRecord("c:1", 2, "AACAPw==", Richness(entities=3, chunks=4, documents=5), level=1, text="caf\u00e9")
    assert summary_record_bytes(rec) == (
        b'{"id":"c:1","level":1,"richness":{"chunks":4,"documents":5,"entities":3},'
        b'"text":"caf\\u00e9","vector":"AACAPw==","version":2}'
    )
    assert summary_sha256(rec) == hashlib.sha256(summary_record_bytes(rec)).hexdigest()
    assert summary_sha256(rec) != summary_sha256(RECORDS[1])


@settings(max_examples=200, deadline=None)
@given(
    sid=st.one_of(st.from_regex(r"[A-Za-z0-9_.:-]{1,20}", fullmatch=True), st.text(max_size=8)),
    ints=st.lists(st.one_of(st.integers(0, 2**63 - 1), st.booleans()), min_size=5, max_size=5),
    text=st.one_of(st.none(), st.text()),
    vector=st.one_of(st.from_regex(r"[A-Za-z0-9+/]{0,12}={0,2}", fullmatch=True), st.text(max_size=6)),
)
def test_fast_record_bytes_equal_the_general_encoder(sid: str, ints: list[Any], text: str | None, vector: str) -> None:
    """summary_record_bytes writes canonical JSON out by hand for speed: always the same bytes."""
    rec = SummaryRecord(sid, ints[0], vector, Richness(ints[1], ints[2], ints[3]), level=ints[4], text=text)
    assert summary_record_bytes(rec) == canonical_json(rec.to_json())


def test_flipped_byte_anywhere_in_the_envelope_is_refused(site: SiteIdentity) -> None:
    env = build_publication(site, "site-a", 7, SPACE, RECORDS[:1], TTL, now=NOW)
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
                assert _open(bytes(bad), site).payload_sha256 == _open(raw, site).payload_sha256
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


def test_site_cannot_publish_into_another_namespace(site: SiteIdentity, other: SiteIdentity) -> None:
    env = build_publication(site, "site-a", 7, SPACE, RECORDS, TTL, now=NOW)
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
    (EmbeddingSpace(model_id="test-model", dim=8, model_sha256="ab" * 32), "abababababab"),  # int8 vs fp32 graph
])
def test_embedding_space_mismatch_names_both(site: SiteIdentity, space: EmbeddingSpace, named: str) -> None:
    env = build_publication(site, "site-a", 7, SPACE, RECORDS, TTL, now=NOW)
    with pytest.raises(InputError) as err:
        open_publication(env, "site-a", [site.public_key], space, now=NOW)
    assert "test-model" in str(err.value) and named in str(err.value) and "dim 8" in str(err.value)


def test_the_model_file_hash_travels_and_is_checked(site: SiteIdentity) -> None:
    mine = EmbeddingSpace(model_id="test-model", dim=8, model_sha256="cd" * 32)
    env = build_publication(site, "site-a", 7, mine, RECORDS, TTL, now=NOW)
    assert open_publication(env, "site-a", [site.public_key], mine, now=NOW).embedding == mine
    with pytest.raises(InputError) as err:  # a gateway on another file of the same model refuses it
        open_publication(env, "site-a", [site.public_key], replace(mine, model_sha256="ef" * 32), now=NOW)
    assert "cdcdcdcdcdcd" in str(err.value) and "efefefefefef" in str(err.value) and "hansa site reembed" in str(err.value)
    with pytest.raises(InputError, match="model_sha256"):
        EmbeddingSpace.from_json({**mine.to_json(), "model_sha256": "not-hex"})


def test_vectors_of_the_wrong_dimension_are_refused(site: SiteIdentity) -> None:
    short = _record(5, vec=np.ones(SPACE.dim - 1, dtype=np.float32))
    with pytest.raises(InputError, match="'c5'.*dimension 8"):
        build_publication(site, "site-a", 7, SPACE, RECORDS + (short,), TTL, now=NOW)
    obj = _obj()
    obj["summaries"]["vectors"] = base64.b64encode(base64.b64decode(obj["summaries"]["vectors"])[:-4]).decode()
    with pytest.raises(InputError, match="dimension 8"):
        _open(_signed(site, obj), site)


def test_nan_vector_is_refused(site: SiteIdentity) -> None:
    with pytest.raises(InputError, match="NaN"):
        _record(6, vec=np.array([np.nan] * SPACE.dim, dtype=np.float32))
    raw = struct.pack("<8f", 0, 0, 0, float("nan"), 0, 0, 0, 0)
    nan_rec = SummaryRecord("c6", 1, base64.b64encode(raw).decode(), Richness(1, 1, 1))
    with pytest.raises(InputError, match="NaN"):
        build_publication(site, "site-a", 7, SPACE, [nan_rec], TTL, now=NOW)
    with pytest.raises(InputError, match="NaN"):
        _open(_signed(site, _obj([nan_rec])), site)


def test_a_piece_must_equal_its_manifest_entry(site: SiteIdentity) -> None:
    good = _manifest(RECORDS)
    wrong_hash = dict(good, c1=(RECORDS[1].version, summary_sha256(RECORDS[2])))
    with pytest.raises(InputError, match="'c1' does not match its manifest sha256"):
        _open(_signed(site, _obj(manifest=wrong_hash)), site)
    wrong_version = dict(good, c1=(RECORDS[1].version + 1, good["c1"][1]))
    with pytest.raises(InputError, match="version 2 but the manifest says 3"):
        _open(_signed(site, _obj(manifest=wrong_version)), site)
    extra_entry = dict(good, c9=(1, "0" * 64))
    with pytest.raises(InputError, match="without a piece"):
        _open(_signed(site, _obj(manifest=extra_entry)), site)


def test_a_piece_not_in_the_manifest_is_refused(site: SiteIdentity) -> None:
    with pytest.raises(InputError, match="'c2' is not in the manifest"):
        _open(_signed(site, _obj(manifest=_manifest(RECORDS[:2]))), site)


def test_duplicate_or_unsorted_ids_are_refused(site: SiteIdentity) -> None:
    with pytest.raises(InputError, match="twice"):
        build_publication(site, "site-a", 7, SPACE, RECORDS + (RECORDS[0],), TTL, now=NOW)
    with pytest.raises(InputError, match="twice"):
        _open(_signed(site, _obj(RECORDS + (RECORDS[2],))), site)
    with pytest.raises(InputError, match="out of order"):
        _open(_signed(site, _obj(RECORDS[::-1])), site)


# -- deltas ---------------------------------------------------------------------------------------

def _head(records: Any, sequence: int = 7) -> PublicationHead:
    return PublicationHead(sequence, _manifest(records))


def test_a_delta_carries_only_changes_and_tombstones(site: SiteIdentity) -> None:
    base = _head(RECORDS)
    changed = _record(1, version=RECORDS[1].version + 1, text="new text")
    now_set = (RECORDS[0], changed, _record(3))  # c2 withdrawn, c1 changed, c3 new, c0 unchanged
    got = _open(build_publication(site, "site-a", 8, SPACE, now_set, TTL, now=NOW, base=base), site)
    assert got.base is not None and (got.base.sequence, got.base.manifest_sha256) == (7, base.manifest_sha256)
    assert got.pieces.ids == ("c1", "c3") and got.tombstones == ("c2",)
    assert dict(got.manifest) == _manifest(now_set)
    assert carried_over(got, base) == frozenset({"c0"})
    assert carried_over(got, _head(RECORDS)) == frozenset({"c0"})  # the same set, held elsewhere


def test_a_delta_on_another_base_is_stale(site: SiteIdentity) -> None:
    base = _head(RECORDS)
    got = _open(build_publication(site, "site-a", 8, SPACE, RECORDS[:2], TTL, now=NOW, base=base), site)
    for held in (None, _head(RECORDS, sequence=6), _head(RECORDS[:1])):
        with pytest.raises(StaleBaseError, match="send the whole set") as err:
            carried_over(got, held)
        assert err.value.http_status == 409
        assert err.value.current_sequence == (None if held is None else held.sequence)


def test_mix_and_match_against_the_held_set_is_refused(site: SiteIdentity) -> None:
    """A delta that does not resend a summary keeps the held piece: its entry must be exactly it."""
    held = _head(RECORDS)
    newer = _record(1, version=5)
    # signed with c1 v5 in the manifest but without its piece: the held c1 (v2) would be mixed in
    obj = _obj(RECORDS[:1], manifest=_manifest((RECORDS[0], newer, RECORDS[2])), sequence=8,
               base=held.as_base().to_json())
    with pytest.raises(InputError, match="'c1'.*no piece was sent"):
        carried_over(_open(_signed(site, obj), site), held)
    # a delta whose tombstones do not match what its manifest drops
    obj = _obj(RECORDS[:2], sequence=8, base=held.as_base().to_json(), tombstones=[])
    with pytest.raises(InputError, match="tombstones must be exactly"):
        carried_over(_open(_signed(site, obj), site), held)


def test_versions_never_go_back(site: SiteIdentity) -> None:
    held = _head(RECORDS)
    older = _record(1, version=RECORDS[1].version - 1)
    with pytest.raises(ConflictError, match="goes back"):
        build_publication(site, "site-a", 8, SPACE, (RECORDS[0], older, RECORDS[2]), TTL, now=NOW, base=held)
    full_older = _open(build_publication(site, "site-a", 8, SPACE, (RECORDS[0], older, RECORDS[2]), TTL, now=NOW), site)
    with pytest.raises(ConflictError, match="goes back"):
        carried_over(full_older, held)
    same_version = _record(1, vec=np.ones(SPACE.dim, dtype=np.float32))  # v2 again, other content
    full_same = _open(build_publication(site, "site-a", 8, SPACE, (RECORDS[0], same_version, RECORDS[2]), TTL, now=NOW), site)
    with pytest.raises(ConflictError, match="same version, different bytes"):
        carried_over(full_same, held)


def test_a_full_set_needs_no_base_and_cannot_withdraw(site: SiteIdentity) -> None:
    assert carried_over(_open(build_publication(site, "site-a", 8, SPACE, RECORDS, TTL, now=NOW), site), None) == frozenset()
    with pytest.raises(InputError, match="nothing to withdraw"):
        _open(_signed(site, _obj(tombstones=["c9"])), site)
    with pytest.raises(InputError, match="both withdrawn"):
        _open(_signed(site, _obj(base={"sequence": 6, "manifest_sha256": "0" * 64}, tombstones=["c1"])), site)


def test_parse_is_what_open_checks_without_key_or_clock(site: SiteIdentity) -> None:
    env = build_publication(site, "site-a", 7, SPACE, RECORDS, TTL, now=NOW)
    parsed = parse_publication(base64.b64decode(env["payload"]))
    assert parsed.payload_sha256 == _open(env, site).payload_sha256


# -- malformed ------------------------------------------------------------------------------------

@pytest.mark.parametrize("mutate", [
    lambda p: p.update(extra=1),
    lambda p: p.pop("manifest"),
    lambda p: p.pop("tombstones"),
    lambda p: p.update(sequence=-1),
    lambda p: p.update(sequence=True),
    lambda p: p.update(sequence=2**63),
    lambda p: p.update(site_id="Site-A"),
    lambda p: p.update(issued_at="2025-03-01 12:00:00"),
    lambda p: p.update(expires="2025-03-01T13:00:00+00:00"),
    lambda p: p.update(expires="2025-03-01T11:00:00Z"),  # before issued_at
    lambda p: p.update(expires="2025-02-30T13:00:00Z"),
    lambda p: p["embedding"].update(encoding="f16le-b64"),
    lambda p: p["embedding"].update(dim="8"),
    lambda p: p["embedding"].update(model_id=""),
    lambda p: p.update(base={"sequence": 7, "manifest_sha256": "0" * 64}),  # not below the sequence
    lambda p: p.update(base={"sequence": 1}),
    lambda p: p.update(base=[]),
    lambda p: p["summaries"]["ids"].__setitem__(0, "bad id/"),
    lambda p: p["summaries"].pop("texts"),
    lambda p: p["summaries"]["texts"].__setitem__(0, 3),
    lambda p: p["summaries"]["chunks"].__setitem__(0, -1),
    lambda p: p["summaries"]["levels"].__setitem__(0, True),
    lambda p: p["summaries"]["versions"].pop(),
    lambda p: p["summaries"].update(vectors=[0.0] * 8),
    lambda p: p["summaries"].update(vectors="AAAA AAAA"),
    lambda p: p.update(summaries=[]),
    lambda p: p.update(tombstones={}),
    lambda p: p["manifest"].update(c0=[1, "ABC"]),
    lambda p: p["manifest"].update(c0=[1]),
    lambda p: p["manifest"].update({"../x": [1, "0" * 64]}),
    lambda p: p.update(terms=[]),
    lambda p: p.update(terms={"documents": 1, "min_documents": 1, "count": 1, "data": "AAAA"}),
    lambda p: p.update(term_statistics={}),
])
def test_malformed_signed_payload_is_an_input_error(site: SiteIdentity, mutate: Callable[[Any], Any]) -> None:
    obj = _obj()
    mutate(obj)
    with pytest.raises(InputError):
        _open(_signed(site, obj), site)


@pytest.mark.parametrize("raw", [
    b"[" * 100_000, b"not json", b'{"site_id": "site-a", "site_id": "site-b"}',
    b'{"sequence": NaN}', b'{"sequence": ' + b"9" * 5000 + b"}", b"\xff\xfe",
])
def test_hostile_signed_bytes_are_input_errors_not_crashes(site: SiteIdentity, raw: bytes) -> None:
    with pytest.raises(InputError):
        _open(sign_envelope(PUBLICATION_TYPE_V2, raw, site), site)


def test_other_payload_types_are_refused(site: SiteIdentity) -> None:
    data = json.dumps(_obj()).encode()
    for payload_type in ("application/vnd.hansa.other+json; v=1", PUBLICATION_TYPE):  # v=1: full sets, retired
        with pytest.raises(VerificationError, match="not accepted"):
            _open(sign_envelope(payload_type, data, site), site)


def test_build_refuses_bad_arguments(site: SiteIdentity) -> None:
    for kwargs in ({"site_id": "../etc"}, {"sequence": -1}, {"ttl": timedelta(0)}, {"base": _head(RECORDS, sequence=1)}):
        args: dict[str, Any] = dict(identity=site, site_id="site-a", sequence=1, embedding=SPACE,
                                    summaries=RECORDS, ttl=TTL, now=NOW)
        args.update(kwargs)
        with pytest.raises(HansaError):
            build_publication(**args)


def test_term_statistics_travel_signed_and_whole(site: SiteIdentity) -> None:
    sketch = TermSketch.from_documents([("d1", "Normans in Normandy"), ("d2", "Normans again"), ("d3", "solo")], 2)
    full = _open(build_publication(site, "site-a", 7, SPACE, RECORDS, TTL, now=NOW, terms=sketch), site)
    assert full.terms is not None and full.terms.keys.tolist() == sketch.keys.tolist()
    assert full.terms.dfs.tolist() == [2] and full.terms.documents == 3
    # a delta carries the whole sketch again: the gateway routes by exactly what this payload signed
    delta = _open(build_publication(site, "site-a", 8, SPACE, RECORDS, TTL, now=NOW, base=_head(RECORDS), terms=sketch),
                  site)
    assert len(delta.pieces) == 0 and delta.terms is not None and len(delta.terms) == 1
    # without terms (a site that publishes none, or an older one) the field is simply absent
    plain = build_publication(site, "site-a", 9, SPACE, RECORDS, TTL, now=NOW)
    assert "terms" not in json.loads(base64.b64decode(plain["payload"]))
    assert _open(plain, site).terms is None


# -- the community hierarchy: parent links (plugin/hierarchy.py) ----------------------------------

PARENTED = (replace(RECORDS[0], parent="c1"), RECORDS[1], replace(RECORDS[2], parent="c1"))


def test_parents_travel_signed_and_old_records_keep_their_bytes(site: SiteIdentity) -> None:
    got = _open(build_publication(site, "site-a", 7, SPACE, PARENTED, TTL, now=NOW), site)
    assert got.summaries == PARENTED and got.pieces.parents == ("c1", None, "c1")
    assert b'"level":0,"parent":"c1","richness"' in summary_record_bytes(PARENTED[0])
    assert summary_record_bytes(PARENTED[0]) == canonical_json(PARENTED[0].to_json())
    # A record without a parent is spelled as before the hierarchy: an old publication still verifies.
    assert "parents" not in _columns(RECORDS) and _open(_signed(site, _obj()), site).pieces.parents is None
    assert summary_sha256(replace(RECORDS[0], parent=None)) == summary_sha256(RECORDS[0])


def test_a_tampered_parent_fails_verification(site: SiteIdentity) -> None:
    env = build_publication(site, "site-a", 7, SPACE, PARENTED, TTL, now=NOW)
    payload = json.loads(base64.b64decode(env["payload"]))
    payload["summaries"]["parents"][0] = "c2"
    forged = dict(env, payload=base64.b64encode(json.dumps(payload).encode()).decode())
    with pytest.raises(VerificationError):
        _open(forged, site)  # the signature covers the payload
    with pytest.raises(InputError, match="'c0' does not match its manifest sha256"):
        _open(_signed(site, payload), site)  # re-signed, the manifest digest still catches it


@pytest.mark.parametrize("parents, match", [
    (["c0", None, None], "another summary"),
    (["c9", None, None], "another summary"),
    ([7, None, None], "another summary"),
    ([None, None, None], "left out"),
    (["c1", None], "as long as"),
])
def test_bad_parent_columns_are_refused(site: SiteIdentity, parents: list[Any], match: str) -> None:
    obj = _obj()
    obj["summaries"]["parents"] = parents
    with pytest.raises(InputError, match=match):
        _open(_signed(site, obj), site)


def test_a_record_with_a_bad_parent_key_is_refused() -> None:
    good = PARENTED[0].to_json()
    assert SummaryRecord.from_json(good) == PARENTED[0]
    for bad in ("c0", "", 3, None):
        with pytest.raises(InputError, match="'parent'"):
            SummaryRecord.from_json(dict(good, parent=bad))
