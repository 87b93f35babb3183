"""The wire types on the model layer (core/model.py): the JSON they accept and refuse is today's,
the errors are InputErrors naming the document and the field, and the JSON Schema the OpenAPI
documents carry (generated from the same classes) accepts exactly what the parsers accept."""
from __future__ import annotations

from typing import Any, Callable

import jsonschema
import pytest

from hansa.core.errors import InputError
from hansa.core.model import json_schemas
from hansa.sync.wire import Citation, EmbeddingSpace, PartialAnswer, Richness, RetrieveRequest, SummaryRecord

CITATION = {"site_id": "acme", "doc_id": "reports/q3.pdf", "title": "Q3", "score": 0.5, "page": 3, "source": "r:q3.pdf"}
ANSWER = {"site_id": "acme", "answer": "Q3 grew.", "citations": [CITATION], "confidence": 0.7,
          "sentences": [["Q3 grew.", "reports/q3.pdf"], ["It did.", "reports/q3.pdf", 0.25]]}
RECORD = {"id": "c1", "version": 2, "vector": "AAAA", "richness": {"entities": 1, "chunks": 2, "documents": 3},
          "level": 1, "text": None, "parent": "c0"}
SPACE = {"model_id": "bge-small", "dim": 384, "encoding": "f32le-b64", "model_sha256": "ab" * 32}
REQUEST = {"question": "Which agency publishes the flood maps?", "top_k": 5, "mode": "global"}


def change(good: dict[str, Any], **values: Any) -> dict[str, Any]:
    return {**good, **values}


def without(good: dict[str, Any], key: str) -> dict[str, Any]:
    return {k: v for k, v in good.items() if k != key}


# (class, JSON object, accepted?, a word the error must contain)
CASES: list[tuple[type, dict[str, Any], bool, str]] = [
    (PartialAnswer, ANSWER, True, ""),
    (PartialAnswer, without(ANSWER, "sentences"), True, ""),
    (PartialAnswer, change(ANSWER, confidence=1), True, ""),
    (PartialAnswer, change(ANSWER, extra=1), False, "unknown keys ['extra']"),
    (PartialAnswer, without(ANSWER, "confidence"), False, "missing 'confidence'"),
    (PartialAnswer, change(ANSWER, confidence="0.5"), False, "'confidence' has the wrong type"),
    (PartialAnswer, change(ANSWER, confidence=True), False, "'confidence' has the wrong type"),
    (PartialAnswer, change(ANSWER, confidence=1.5), False, "'confidence'"),
    (PartialAnswer, change(ANSWER, site_id="Site_A"), False, "'site_id': invalid site id"),
    (PartialAnswer, change(ANSWER, sentences=[["a", "d", 1.5]]), False, "'sentences[0][2]'"),
    (PartialAnswer, change(ANSWER, sentences=[["a", "d", True]]), False, "'sentences[0][2]'"),
    (PartialAnswer, change(ANSWER, sentences=[["a"]]), False, "sentences[0]"),
    (PartialAnswer, change(ANSWER, sentences=[["a", "d", 0.1, 0.2]]), False, "sentences[0]"),
    (PartialAnswer, change(ANSWER, citations=[change(CITATION, page=5.0)]), True, ""),
    (PartialAnswer, change(ANSWER, citations=[change(CITATION, page=0)]), False, "'citations[0].page'"),
    (PartialAnswer, change(ANSWER, citations=[change(CITATION, page=True)]), False, "'citations[0].page'"),
    (PartialAnswer, change(ANSWER, citations=[change(CITATION, line=3)]), False, "unknown keys ['citations[0].line']"),
    (PartialAnswer, change(ANSWER, citations=[without(CITATION, "score")]), True, ""),
    (PartialAnswer, change(ANSWER, citations=[change(CITATION, page=None, source=None)]), True, ""),
    (RetrieveRequest, REQUEST, True, ""),
    (RetrieveRequest, {"question": "q"}, True, ""),
    (RetrieveRequest, change(REQUEST, top_k=5.0), True, ""),
    (RetrieveRequest, change(REQUEST, top_k=5.5), False, "'top_k' has the wrong type"),
    (RetrieveRequest, change(REQUEST, top_k=True), False, "'top_k' has the wrong type"),
    (RetrieveRequest, change(REQUEST, top_k="5"), False, "'top_k' has the wrong type"),
    (RetrieveRequest, change(REQUEST, top_k=101), False, "'top_k'"),
    (RetrieveRequest, change(REQUEST, top_k=0), False, "'top_k'"),
    (RetrieveRequest, change(REQUEST, mode="both"), False, "'mode'"),
    (RetrieveRequest, change(REQUEST, question=""), False, "'question'"),
    (RetrieveRequest, change(REQUEST, question="x" * 4001), False, "'question'"),
    (RetrieveRequest, change(REQUEST, question=7), False, "'question' has the wrong type"),
    (RetrieveRequest, change(REQUEST, question="  q  "), True, ""),
    (RetrieveRequest, change(REQUEST, question=" \t\u0085\u001f "), False, "'question'"),
    (RetrieveRequest, change(REQUEST, question="\ufeff"), False, "'question'"),  # blank to JSON Schema's \s
    (RetrieveRequest, change(REQUEST, question=" " * 5 + "x" * 3999), False, "'question'"),  # counted as sent
    (SummaryRecord, RECORD, True, ""),
    (SummaryRecord, without(RECORD, "parent"), True, ""),
    (SummaryRecord, change(RECORD, version=2.0, level=1.0), True, ""),
    (SummaryRecord, without(RECORD, "text"), False, "missing 'text'"),
    (SummaryRecord, without(RECORD, "level"), False, "missing 'level'"),
    (SummaryRecord, change(RECORD, level=1025), False, "'level'"),
    (SummaryRecord, change(RECORD, version=-1), False, "'version'"),
    (SummaryRecord, change(RECORD, id="a b"), False, "'id': invalid id"),
    (SummaryRecord, change(RECORD, parent=None), False, "'parent'"),
    (SummaryRecord, change(RECORD, richness={"entities": 1, "chunks": 2}), False, "missing 'richness.documents'"),
    (SummaryRecord, change(RECORD, richness={"entities": 1, "chunks": 2, "documents": 3.5}), False, "'richness.documents'"),
    (EmbeddingSpace, SPACE, True, ""),
    (EmbeddingSpace, without(SPACE, "model_sha256"), True, ""),
    (EmbeddingSpace, change(SPACE, dim=384.0), True, ""),
    (EmbeddingSpace, without(SPACE, "encoding"), False, "missing 'encoding'"),
    (EmbeddingSpace, change(SPACE, encoding="f16"), False, "'encoding': encoding 'f16' is not supported"),
    (EmbeddingSpace, change(SPACE, model_sha256="AB" * 32), False, "model_sha256"),
    (EmbeddingSpace, change(SPACE, model_id=""), False, "'model_id': string should have at least 1 character"),
    (EmbeddingSpace, change(SPACE, model_id="m" * 257), False, "'model_id'"),
    (EmbeddingSpace, change(SPACE, dim=0), False, "'dim'"),
]
IDS = [f"{cls.__name__}-{i}" for i, (cls, *_rest) in enumerate(CASES)]


@pytest.mark.parametrize("cls, obj, accepted, words", CASES, ids=IDS)
def test_the_parser_accepts_and_refuses_as_before_and_names_the_field(cls: type, obj: dict[str, Any],
                                                                        accepted: bool, words: str) -> None:
    if accepted:
        cls.from_json(obj)
        return
    with pytest.raises(InputError, match=r"^" + cls.WHERE + ": ") as err:
        cls.from_json(obj)
    assert words in str(err.value)


@pytest.fixture(scope="module")
def validators() -> dict[str, Callable[[Any], bool]]:
    components = json_schemas([RetrieveRequest, Citation, PartialAnswer, Richness, SummaryRecord, EmbeddingSpace],
                              "#/components/schemas/{model}")
    document = {"components": {"schemas": components}}

    def validator(name: str) -> Callable[[Any], bool]:
        schema = {**document, "$ref": f"#/components/schemas/{name}"}
        return jsonschema.Draft202012Validator(schema, format_checker=None).is_valid

    return {name: validator(name) for name in components}


@pytest.mark.parametrize("cls, obj, accepted, words", CASES, ids=IDS)
def test_the_generated_json_schema_accepts_exactly_what_the_parser_accepts(
        validators: dict[str, Callable[[Any], bool]], cls: type, obj: dict[str, Any], accepted: bool, words: str) -> None:
    assert validators[cls.__name__](obj) is accepted


def test_to_json_keeps_the_shapes_peers_and_digests_know() -> None:
    record = SummaryRecord.from_json(without(RECORD, "parent"))
    assert record.to_json() == without(RECORD, "parent")  # no "parent": null, "text": null stays
    assert SummaryRecord.from_json(RECORD).to_json() == RECORD
    assert Citation("acme", "d", "t", 0.5).to_json() == {"site_id": "acme", "doc_id": "d", "title": "t", "score": 0.5}
    answer = PartialAnswer.from_json(ANSWER)
    assert answer.to_json() == ANSWER and answer.sentences[1] == ("It did.", "reports/q3.pdf", 0.25)
    assert PartialAnswer.from_json(change(ANSWER, confidence=1)).confidence == 1.0
    assert RetrieveRequest.from_json(change(REQUEST, top_k=5.0, question="  q  ")) == RetrieveRequest("q", 5, "global")
    assert EmbeddingSpace.from_json(SPACE).to_json() == SPACE
    assert Richness(1, 2, 3).to_json() == {"entities": 1, "chunks": 2, "documents": 3}


def test_a_non_object_is_refused_by_name() -> None:
    for cls in (PartialAnswer, SummaryRecord, Richness, RetrieveRequest):
        with pytest.raises(InputError, match=f"^{cls.WHERE}: expected an object"):
            cls.from_json(["not", "an", "object"])  # type: ignore[arg-type]


ABSENT = object()
# Values each field of a retrieve request is tried with: good, boundary and wrong ones.
REQUEST_VALUES: dict[str, list[Any]] = {
    "question": ["q", "  q  ", "", " \t ", "\ufeff", "\u0085x", "x" * 4000, "x" * 4001, " " + "x" * 4000, 7, None, ["q"]],
    "top_k": [ABSENT, 1, 100, 0, 101, 5.0, 5.5, 1e300, True, "5", None],
    "mode": [ABSENT, "local", "global", "LOCAL", 1, None],
}


def test_schema_and_parser_agree_on_every_combination_of_request_values(
        validators: dict[str, Callable[[Any], bool]]) -> None:
    """The site API's request, every combination (792): the generated schema (what schemathesis
    fuzzes the site with) and the parser accept and refuse the same bodies."""
    disagreements = []
    for question in REQUEST_VALUES["question"]:
        for top_k in REQUEST_VALUES["top_k"]:
            for mode in REQUEST_VALUES["mode"]:
                obj = {k: v for k, v in (("question", question), ("top_k", top_k), ("mode", mode)) if v is not ABSENT}
                try:
                    RetrieveRequest.from_json(obj)
                    parsed = True
                except InputError:
                    parsed = False
                if parsed != validators["RetrieveRequest"](obj):
                    disagreements.append((obj, parsed))
    assert not disagreements, disagreements[:5]
