"""A delta publication with term statistics, signed by the code before its base and terms moved onto
the model layer (issue 33 item 2), still opens, and what the models write back is what was signed.

`data/delta-publication.json`: sequence 8 building on sequence 7 (c1 changed, c2 withdrawn, c3 new),
with the site's public key, the moment it is checked at and the base's manifest digest."""
from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import pytest

from hansa.core.errors import InputError
from hansa.sync.dsse import sign_envelope, unverified_payload
from hansa.sync.keys import SiteIdentity, load_public_key
from hansa.sync.publication import PUBLICATION_TYPE_V2, PublicationBase, open_publication
from hansa.sync.wire import EmbeddingSpace, canonical_json

SPACE = EmbeddingSpace(model_id="test-model", dim=8)
FIXTURE = json.loads((Path(__file__).parent / "data" / "delta-publication.json").read_text(encoding="utf-8"))


def test_a_delta_signed_before_opens_and_its_models_write_back_the_signed_bytes() -> None:
    now = datetime.fromisoformat(FIXTURE["now"].replace("Z", "+00:00"))
    envelope = FIXTURE["envelope"]
    pub = open_publication(envelope, "site-a", [load_public_key(FIXTURE["public_key"])], SPACE, now=now)
    assert pub.base == PublicationBase(7, FIXTURE["base_manifest_sha256"])
    assert pub.pieces.ids == ("c1", "c3") and pub.tombstones == ("c2",)
    assert pub.terms is not None and (pub.terms.documents, pub.terms.min_documents, len(pub.terms)) == (3, 2, 3)

    signed = unverified_payload(envelope, PUBLICATION_TYPE_V2)
    payload = json.loads(signed)
    assert canonical_json(payload) == signed  # the payload is canonical JSON, so parts compare as values
    rewritten = {**payload, "base": pub.base.to_json(), "terms": pub.terms.record().to_json()}
    assert canonical_json(rewritten) == signed


@pytest.mark.parametrize("base, message", [
    ({"sequence": 7.0, "manifest_sha256": "a" * 64}, "publication: base: 'sequence' has the wrong type"),
    ({"sequence": 8, "manifest_sha256": "a" * 64}, "base.sequence must be below the publication's sequence 8"),
    ({"sequence": 7}, "publication: base: missing 'manifest_sha256'"),
    ({"sequence": 7, "manifest_sha256": "A" * 64}, "publication: base: 'manifest_sha256'"),
    ({"sequence": 7, "manifest_sha256": "a" * 64, "x": 1}, r"publication: base: unknown keys \['x'\]"),
    ([], "publication: base: expected an object"),
])
def test_a_bad_base_is_refused_naming_the_field(base: object, message: str) -> None:
    payload = json.loads(unverified_payload(FIXTURE["envelope"], PUBLICATION_TYPE_V2))
    me = SiteIdentity.generate()
    envelope = sign_envelope(PUBLICATION_TYPE_V2, canonical_json({**payload, "base": base}), me)
    now = datetime.fromisoformat(FIXTURE["now"].replace("Z", "+00:00"))
    with pytest.raises(InputError, match=message):
        open_publication(envelope, "site-a", [me.public_key], SPACE, now=now)
