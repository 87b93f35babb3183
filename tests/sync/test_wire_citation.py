"""Citation's optional page and source: absent keys parse (older peers), present ones round-trip,
and bad values are refused."""
from __future__ import annotations

import pytest

from hansa.core.errors import InputError
from hansa.sync.wire import Citation, PartialAnswer

BASE = {"site_id": "acme", "doc_id": "reports/q3.pdf", "title": "Q3", "score": 0.5}


def test_without_page_and_source_the_json_keeps_its_old_shape() -> None:
    citation = Citation.from_json(BASE)
    assert (citation.page, citation.source) == (None, None)
    assert citation.to_json() == BASE


def test_page_and_source_round_trip_inside_a_partial_answer() -> None:
    citation = Citation("acme", "reports/q3.pdf", "Q3", 0.5, page=12, source="reports:q3.pdf")
    answer = PartialAnswer("acme", "text", (citation,), 0.7)
    assert PartialAnswer.from_json(answer.to_json()).citations == (citation,)
    assert citation.to_json() == {**BASE, "page": 12, "source": "reports:q3.pdf"}
    assert Citation.from_json({**BASE, "page": None, "source": None}) == Citation.from_json(BASE)


@pytest.mark.parametrize("extra", [{"page": 0}, {"page": "3"}, {"page": 1.5}, {"page": True}, {"source": 5}, {"line": 3}])
def test_bad_page_or_source_is_refused(extra: dict) -> None:
    with pytest.raises(InputError):
        Citation.from_json({**BASE, **extra})
