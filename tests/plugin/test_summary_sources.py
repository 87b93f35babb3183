"""Which stored summary a community a local refresh clustered again may keep
(`[site] summary_keep_overlap`): pure logic over the stored and the new memberships."""
from __future__ import annotations

import pytest

from hansa.adapters.records import Community
from hansa.core.errors import ConfigError
from hansa.plugin.communities import _summary_sources


def _stored(cid: str, members: str, docs: str) -> Community:
    return Community(id=cid, level=0, entity_ids=tuple(members), summary=f"summary of {cid}", chunk_ids=(),
                     doc_ids=tuple(docs), rank=0.0)


def test_a_touched_community_keeps_the_summary_it_nearly_equals_unless_its_documents_changed() -> None:
    touched = [_stored("A", "abcde", "xy"), _stored("B", "fghij", "z"), _stored("C", "klmno", "w")]
    finest = {"n1": frozenset("abcdq"),   # 4 of A's 5, one new: Jaccard 4/6
              "n2": frozenset("fghij"),   # B's members, but B's document z changed
              "n3": frozenset("klm"),     # 3 of C's 5: Jaccard 3/5
              "n4": frozenset("pq")}      # nothing stored
    assert _summary_sources(touched, {"z"}, finest, 0.6) == {"n1": touched[0], "n3": touched[2]}
    assert _summary_sources(touched, {"z"}, finest, 0.65) == {"n1": touched[0]}
    assert _summary_sources(touched, set(), finest, 1.0) == {"n2": touched[1]}
    assert _summary_sources(touched, set(), finest, 0.0) == {}
    for bad in (0.5, 1.2, -0.1):
        with pytest.raises(ConfigError, match="summary_keep_overlap"):
            _summary_sources(touched, set(), finest, bad)
