"""Head files and term sketches written by the code before the model layer (issue 33 item 2) still
load to the same content and are written back to the same bytes.

`data/today/` was written by that code: `rivers.json` (format 2, with orphans and term statistics)
and `kitchen.json` (format 1, no rows) as DurableStore.write_head writes them, `terms.json` as
plugin.vocabulary writes a site's sketch."""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

from hansa.core.errors import InputError
from hansa.core.files import write_json_atomic
from hansa.core.jsonsafe import dumps, loads_strict
from hansa.gateway.index.durable import HeadFile, StoredHead, read_head
from hansa.sync.terms import TermSketch, read_sketch

DATA = Path(__file__).parent / "data" / "today"


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def load_head(name: str) -> StoredHead:
    return read_head(loads_strict((DATA / name).read_bytes()), name)


def head_bytes(head: StoredHead) -> bytes:
    return dumps(HeadFile.of(head).to_json())


def load_terms(obj: object) -> TermSketch:
    return read_sketch(obj, "terms.json")


def terms_json(sketch: TermSketch) -> object:
    return sketch.record().to_json()


def test_heads_written_before_load_to_the_same_content_and_bytes() -> None:
    rivers = load_head("rivers.json")
    assert (rivers.site_id, rivers.sequence, rivers.expires, rivers.legacy) == ("rivers", 7, "2030-01-01T00:00:00Z", False)
    assert (rivers.payload_sha256, rivers.manifest_sha256) == (sha("p"), sha("m"))
    assert rivers.rows == {"c1": (1, sha("c1"), 0, 2), "c2": (3, sha("c2"), 1, 9)}
    assert sorted(rivers.orphans) == ["rivers/a/1/def", "rivers/old/1/abc"]
    assert rivers.terms is not None and (rivers.terms.documents, rivers.terms.min_documents, len(rivers.terms)) == (3, 2, 3)
    kitchen = load_head("kitchen.json")
    assert kitchen.legacy and kitchen.rows == {} and kitchen.terms is None and kitchen.sequence == 0
    for name, head in (("rivers.json", rivers), ("kitchen.json", kitchen)):
        assert head_bytes(head) == (DATA / name).read_bytes()


def test_a_term_sketch_written_before_loads_and_writes_back_the_same_file(tmp_path: Path) -> None:
    obj = json.loads((DATA / "terms.json").read_text(encoding="utf-8"))
    sketch = load_terms(obj)
    assert sketch.documents == 3 and sketch.min_documents == 2 and len(sketch) == 3
    assert sketch.dfs.tolist() == [3, 2, 2] or sorted(sketch.dfs.tolist()) == [2, 2, 3]
    assert np.all(np.diff(sketch.keys.astype(np.int64)) > 0)
    write_json_atomic(tmp_path / "terms.json", terms_json(sketch))
    assert (tmp_path / "terms.json").read_bytes() == (DATA / "terms.json").read_bytes()


@pytest.mark.parametrize("change, named", [
    (lambda h: h.update(sequence=1.0), "sequence"),
    (lambda h: h.update(sequence=-1), "sequence"),
    (lambda h: h.update(expires="tomorrow"), "expires"),
    (lambda h: h.update(payload_sha256="ab"), "payload_sha256"),
    (lambda h: h["summaries"].update(c1=[1, "x", 0, 2]), "c1"),
    (lambda h: h["summaries"].update(c1=[1, sha("c1"), 0]), "c1"),
    (lambda h: h["summaries"].update({"bad id": [1, sha("c1"), 0, 2]}), "bad id"),
    (lambda h: h.update(orphans=[1]), "orphans"),
    (lambda h: h.update(site_id="../x"), "site"),
    (lambda h: h.update(extra=1), "extra"),
    (lambda h: h.pop("orphans"), "orphans"),
    (lambda h: h["terms"].update(count=4), "terms"),
    (lambda h: h["terms"].update(documents=True), "documents"),
])
def test_a_damaged_head_is_refused_naming_the_file_and_field(change, named: str) -> None:
    head = json.loads((DATA / "rivers.json").read_bytes())
    change(head)
    with pytest.raises(InputError, match="rivers.json") as err:
        read_head(head, "rivers.json")
    assert named in str(err.value)


def test_a_head_without_terms_from_before_term_statistics_loads() -> None:
    head = json.loads((DATA / "kitchen.json").read_bytes())
    del head["terms"]
    assert read_head(head, "kitchen.json") == load_head("kitchen.json")
