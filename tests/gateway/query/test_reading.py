"""fuse() with a reader (gateway.query.reading): the floor, the short answer, whole documents losing a
conflict, abstention when nothing is supported; and question_kind, the rule that picks the floor. Fast tier: HashEmbedder and WordReader are
doubles of hansa's own ports (tests/fakes.py); the real reader has its own tests
(tests/adapters/reader)."""
from __future__ import annotations

import pytest

from hansa.core.errors import BackendError, ConfigError
from hansa.gateway.client import OK, SiteCall
from hansa.gateway.query.fusion import fuse
from hansa.gateway.query.reading import DESCRIPTIVE, FACTOID, ReadingStage, open_reading, question_kind
from hansa.sync.wire import Citation, PartialAnswer
from tests.fakes import HashEmbedder, WordReader

QUESTION = "When did the Virgin Mary appear to Bernadette at Lourdes?"
# squad:University_of_Notre_Dame#000 (SQuAD v1.1, CC BY-SA 4.0), shortened
ANSWER = "The Virgin Mary reputedly appeared to Saint Bernadette at Lourdes in 1858."
FILLER = "The college also runs a bookstore and two dining halls."
NEAR = "Lourdes lies in the foothills of the Pyrenees."


def site(site_id: str, sentences: list[tuple], confidence: float = 0.8) -> SiteCall:
    docs = list(dict.fromkeys(s[1] for s in sentences))
    answer = PartialAnswer(site_id, " ".join(s[0] for s in sentences),
                           tuple(Citation(site_id, d, d.title(), 0.5) for d in docs), confidence, tuple(sentences))
    return SiteCall(site_id, OK, 5.0, 10, 10, answer=answer)


@pytest.fixture
def embedder() -> HashEmbedder:
    return HashEmbedder()


def test_sentences_below_the_floor_fill_no_slot_and_the_span_leads(embedder: HashEmbedder) -> None:
    reading = ReadingStage(WordReader(), floor=0.5)
    q = embedder.embed_query(QUESTION)
    calls = [site("a", [(ANSWER, "nd"), (FILLER, "college")]), site("b", [(NEAR, "geo")])]
    fused = fuse(q, calls, embedder, reading=reading, question=QUESTION)
    assert [s.text for s in fused.sentences] == [ANSWER]  # filler and the near miss are below the floor
    assert fused.short_answer == "Saint"  # the double's span: the first capitalized word the question lacks
    assert fused.answer.startswith("Saint [1]. " + ANSWER)
    assert fused.reading is not None and fused.reading["read"] == 3 and fused.reading["supported"] == 1
    without = fuse(q, calls, embedder)
    assert FILLER in without.answer or NEAR in without.answer  # cosine alone stitches them in


class WholeSentenceReader(WordReader):
    """The word reader, whose span is the whole sentence (as the real reader's is for a sentence
    that is nothing but the answer)."""

    def read(self, question: str, sentences: list[str]) -> list:
        from hansa.adapters.reader.base import Reading

        return [Reading(r.score, s, 0, len(s)) for r, s in zip(super().read(question, sentences), sentences)]


def test_a_span_that_is_the_whole_sentence_does_not_lead_it_twice(embedder: HashEmbedder) -> None:
    reading = ReadingStage(WholeSentenceReader(), floor=0.5)
    q = embedder.embed_query(QUESTION)
    fused = fuse(q, [site("a", [(ANSWER, "nd"), (FILLER, "college")])], embedder, reading=reading, question=QUESTION)
    assert fused.short_answer == ANSWER  # the field still carries the reader's span
    assert fused.answer.startswith(ANSWER + " [1]") and fused.answer.count(ANSWER) == 1


def test_nothing_above_the_floor_is_unsupported_and_says_why(embedder: HashEmbedder) -> None:
    reading = ReadingStage(WordReader(), floor=0.9)
    q = embedder.embed_query(QUESTION)
    fused = fuse(q, [site("a", [(FILLER, "college"), (NEAR, "geo")])], embedder, reading=reading, question=QUESTION)
    assert fused.sentences == () and fused.unsupported
    assert "below its floor 0.90" in (fused.note or "")


class FooledReader(WordReader):
    """The word reader, fooled as the trained one was in `hansa demo` ("keeping the cash in a savings
    account" for "What items should I keep in the safe room?"): one sentence on another topic, shaped
    like an answer, gets its highest score."""

    def __init__(self, fooled_by: str) -> None:
        super().__init__()
        self.fooled_by = fooled_by

    def read(self, question: str, sentences: list[str]) -> list:
        from hansa.adapters.reader.base import Reading

        return [Reading(0.95, s, 0, len(s)) if s == self.fooled_by else r
                for r, s in zip(super().read(question, sentences), sentences)]


def _cosine(embedder: HashEmbedder, question_vector, text: str) -> float:
    return float(embedder.embed([text])[0] @ question_vector)


def test_a_sentence_off_the_questions_topic_answers_nothing_whatever_the_reader_scores(embedder: HashEmbedder) -> None:
    q = embedder.embed_query(QUESTION)
    calls = [site("a", [(ANSWER, "nd")]), site("b", [(FILLER, "college")])]
    on, off = _cosine(embedder, q, ANSWER), _cosine(embedder, q, FILLER)
    assert off < on  # the filler is further from the question than the answer is
    fooled = fuse(q, calls, embedder, reading=ReadingStage(FooledReader(FILLER), floor=0.3), question=QUESTION)
    assert FILLER in [s.text for s in fooled.sentences]  # no topic floor: the filler fills a slot
    reader = FooledReader(FILLER)
    fused = fuse(q, calls, embedder, reading=ReadingStage(reader, floor=0.3, topic=(on + off) / 2), question=QUESTION)
    assert [s.text for s in fused.sentences] == [ANSWER]
    assert reader.reads == [(QUESTION, (ANSWER,))]  # an off-topic sentence is not even read
    assert fused.reading is not None and fused.reading["off_topic"] == 1 and fused.reading["read"] == 2


def test_when_nothing_offered_is_about_the_question_the_answer_is_unsupported_and_says_why(embedder: HashEmbedder) -> None:
    q = embedder.embed_query(QUESTION)
    topic = _cosine(embedder, q, FILLER) + 0.01
    reader = FooledReader(FILLER)
    fused = fuse(q, [site("b", [(FILLER, "college")])], embedder,
                 reading=ReadingStage(reader, floor=0.3, topic=topic), question=QUESTION)
    assert fused.sentences == () and fused.unsupported and reader.reads == []
    assert "no offered sentence is about the question" in (fused.note or "")
    assert fused.reading is not None and fused.reading["best"] == 0.0  # abstention sees nothing on topic


def test_the_pool_bounds_what_is_read(embedder: HashEmbedder) -> None:
    reader = WordReader()
    reading = ReadingStage(reader, floor=0.1, pool=2)
    q = embedder.embed_query(QUESTION)
    calls = [site(f"s{i}", [(f"{ANSWER} Item {i}.", f"d{i}")]) for i in range(5)]
    fuse(q, calls, embedder, reading=reading, question=QUESTION)
    assert len(reader.reads) == 1 and len(reader.reads[0][1]) == 2


def test_a_document_that_loses_a_conflict_loses_all_its_sentences(embedder: HashEmbedder) -> None:
    reading = ReadingStage(WordReader(), floor=0.3)
    q = embedder.embed_query(QUESTION)
    wrong = ANSWER.replace("1858", "1878")
    extra = "The Virgin Mary at Lourdes drew pilgrims to Bernadette's grotto."
    calls = [site("a", [(ANSWER, "nd")]), site("b", [(ANSWER, "nd2")]), site("c", [(wrong, "bad"), (extra, "bad")])]
    fused = fuse(q, calls, embedder, reading=reading, question=QUESTION)
    assert fused.conflicts and fused.conflicts[0].winner.value == "1858"
    assert all(s.doc_id != "bad" for s in fused.sentences)  # its other sentence goes with it
    cosine = fuse(q, calls, embedder)
    assert any(s.text == extra for s in cosine.sentences)  # without a reader the loser's other sentence stays


def test_the_topic_floor_is_the_embedders_unless_configured_and_must_be_a_cosine(tmp_path) -> None:
    from hansa.adapters.embedder.scale import scale_for, scaled_gateway
    from hansa.core.config import GatewayConfig

    minilm = scale_for("sentence-transformers/all-MiniLM-L6-v2")
    assert scaled_gateway(GatewayConfig(), frozenset(), minilm).topic_floor == minilm.topic_floor
    assert scaled_gateway(GatewayConfig(topic_floor=0.0), frozenset({"gateway.topic_floor"}), minilm).topic_floor == 0.0
    stage = open_reading("packaged", topic=0.3)
    assert stage is not None and stage.topic == 0.3 and stage.to_json()["topic"] == 0.3
    with pytest.raises(ConfigError, match="topic_floor must lie in 0..1"):
        open_reading("packaged", topic=1.5)


def test_config_names_the_reader(tmp_path) -> None:
    assert open_reading("none") is None
    with pytest.raises(BackendError, match="reader.json is missing.*hansa.evaluation.reader_train"):
        open_reading(str(tmp_path))


def test_the_relative_share_is_the_models_own_unless_configured(tmp_path) -> None:
    import json
    import shutil

    from hansa.adapters.reader.onnx import META, PACKAGED_DIR
    from hansa.core.errors import ConfigError
    from hansa.gateway.query.reading import RELATIVE

    packaged = open_reading("packaged")
    assert packaged is not None and packaged.relative == float(packaged.reader.calibration.get("relative", RELATIVE))
    model = tmp_path / "model"
    shutil.copytree(PACKAGED_DIR, model)
    meta = json.loads((model / META).read_text())
    meta["calibration"]["relative"] = 0.7
    (model / META).write_text(json.dumps(meta))
    own = open_reading(str(model))
    assert own is not None and own.relative == 0.7  # the model's calibration
    configured = open_reading(str(model), relative=0.3)
    assert configured is not None and configured.relative == 0.3  # an operator's value wins
    meta["calibration"]["relative"] = 1.5
    (model / META).write_text(json.dumps(meta))
    with pytest.raises(ConfigError, match="reader_relative_floor must lie in 0..1"):
        open_reading(str(model))


def test_a_served_gateway_answers_with_the_span_and_abstains_on_what_the_reader_does_not_support(tmp_path) -> None:
    from tests.gateway.test_fast_gateway import ANSWERS, RIVER_Q, open_gateway

    fed = open_gateway(tmp_path, ANSWERS)
    fed.service.engine.reading = ReadingStage(WordReader(), floor=0.6)
    body = fed.query({"question": RIVER_Q}).get_json()
    assert body["abstained"] is False and body["short_answer"] == "The"  # the double's span: first new capital
    assert body["answer"].startswith("The [1]. The Rhone river flows through Lyon. [1]")
    assert body["trace"]["reading"]["name"].startswith("word-reader") and body["trace"]["reading"]["supported"] == 1
    assert body["confidence"] == 1.0  # the reader's score, not cosine
    body = fed.query({"question": "Which river flows through Lyon in the rain festival season?"}).get_json()
    assert body["abstained"] is True and body["answer"].startswith("The federation holds no answer")
    assert "below its floor" in body["trace"]["abstention"]["reason"] and "short_answer" not in body


TWO_HOP_QUESTION = "Which dish is the speciality of the city the Rhone flows through?"
BRIDGE = "The Rhone river flows through Lyon."
DISH = "Quenelles are the speciality dish of Lyon, the city on the Rhone river."


def two_hop_gateway(root, hops: int):
    """A federation where the question's answer lies one name away: "rivers" names Lyon, and
    "kitchen" answers only when asked about it."""
    from tests.fakes import Reply
    from tests.gateway.test_fast_gateway import SUMMARIES, answer, open_gateway

    summaries = {**SUMMARIES, "rivers": "The river Rhone flows through Lyon and south to the sea.",
                 "kitchen": "Quenelles are the pride of Lyon cooks."}
    replies = {"rivers": Reply(answer("rivers", BRIDGE, "rhone")),
               "kitchen": Reply(lambda req: answer("kitchen", DISH if "Lyon" in req.question else "Bread.", "quenelles")),
               "castles": Reply(answer("castles", "Castles had moats.", "moats"))}
    fed = open_gateway(root, replies, summaries, second_hops=hops)
    fed.service.engine.reading = ReadingStage(WordReader(), floor=0.6)
    return fed


def test_a_second_hop_asks_about_what_the_first_answer_named(tmp_path) -> None:
    question = TWO_HOP_QUESTION
    for hops, expect_answer in ((1, True), (0, False)):
        fed = two_hop_gateway(tmp_path / str(hops), hops)
        body = fed.query({"question": question}).get_json()
        trace = body["trace"]
        if expect_answer:
            (follow,) = trace["second_hops"]
            assert follow.startswith(f"{question} Lyon")  # the name the question lacked comes first
            assert [r["kind"] for r in trace["rounds"]] == ["routed", "second_hop"]
            assert trace["sites_called"] == ["rivers", "kitchen"]
            assert body["abstained"] is False and DISH in body["answer"]
            assert [r.question for r in fed.transport.asked("kitchen")] == [follow]
        else:
            assert "second_hops" not in trace and trace["sites_called"] == ["rivers"] and body["abstained"] is True
        fed.service.close()


def test_a_request_that_names_its_sites_gets_no_second_hop_past_them(tmp_path) -> None:
    fed = two_hop_gateway(tmp_path, 1)
    body = fed.query({"question": TWO_HOP_QUESTION, "sites": ["rivers"]}).get_json()
    assert body["trace"]["sites_called"] == ["rivers"] and "second_hops" not in body["trace"]
    assert body["abstained"] is True  # the named site alone does not answer it
    fed.service.close()


def test_a_question_with_a_second_hop_teaches_reliability_once_from_its_final_answer(tmp_path, monkeypatch) -> None:
    """The first answer (the bridge alone) is fused again with the hop's answers: recording both
    would count the bridge site's sentence twice for one question."""
    fed = two_hop_gateway(tmp_path, 1)
    reliability = fed.service.engine.reliability
    recorded: list[set[str]] = []
    observe = reliability.observe
    monkeypatch.setattr(reliability, "observe", lambda obs: (recorded.append(set(obs)), observe(obs))[1])
    body = fed.query({"question": TWO_HOP_QUESTION}).get_json()
    assert body["trace"]["second_hops"] and DISH in body["answer"]
    assert recorded == [{"rivers", "kitchen"}]  # one recording, of the answer returned
    fed.service.close()


def test_the_floor_is_refit_on_an_organizations_own_questions() -> None:
    from hansa.gateway.query.calibrate import Row, RowRecord, calibrate, fit_reader_floor
    from hansa.gateway.query.calibration import Calibration, Example

    sha = "a" * 64
    rows = [Row("reader", Example({"reader_best": b, "passages": 3.0}, label, f"q{i}"), site=sha)
            for i, (b, label) in enumerate([(0.9, True), (0.8, True), (0.7, True), (0.2, True), (0.1, False), (0.75, False)])]
    floor, fit = fit_reader_floor(rows, 0.75)
    assert floor == 0.7 and fit["answered_answerable"] == 0.75 and fit["abstain_unanswerable"] == 0.5
    assert fit["model_sha256"] == sha
    cal = calibrate(rows, min_answerable_answered=0.75)  # reader rows alone are enough to calibrate
    again = Calibration.from_json(cal.to_json())
    assert again.floor_for(sha) == 0.7 and again.floor_for("b" * 64) is None  # fit for another reader: ignored
    assert RowRecord.from_json(RowRecord.of(rows[0]).to_json()).row() == rows[0]
    with pytest.raises(Exception, match="different readers"):
        fit_reader_floor([*rows, Row("reader", Example({"reader_best": 0.5}, True, "x"), site="b" * 64)], 0.9)
    with pytest.raises(Exception, match=r"'reader.floor': input should be less than or equal to 1"):
        Calibration.from_json({**cal.to_json(), "reader": {"floor": 2.0}})


def test_the_openai_endpoint_says_plainly_when_it_abstains(tmp_path) -> None:
    from tests.gateway.test_fast_gateway import ANSWERS, open_gateway

    fed = open_gateway(tmp_path, ANSWERS)
    fed.service.engine.reading = ReadingStage(WordReader(), floor=0.6)
    ask = {"model": "hansa-federation", "messages": [{"role": "user", "content": "Which tiramisu recipe uses Lyon river water?"}]}
    resp = fed.client.post("/v1/chat/completions", json=ask, headers={"Authorization": f"Bearer {fed.key}"})
    body = resp.get_json()
    assert resp.status_code == 200, body
    assert body["choices"][0]["message"]["content"].startswith("The federation holds no answer")
    assert body["hansa"]["abstained"] is True and "short_answer" not in body["hansa"]
    fed.service.close()


def test_one_source_against_one_that_both_answer_is_shown_unresolved(embedder: HashEmbedder) -> None:
    reading = ReadingStage(WordReader(), floor=0.3)
    q = embedder.embed_query(QUESTION)
    wrong = ANSWER.replace("1858", "1878")
    fused = fuse(q, [site("a", [(ANSWER, "nd")]), site("b", [(wrong, "bad")])], embedder, reading=reading, question=QUESTION)
    assert {s.text for s in fused.sentences} == {ANSWER, wrong}  # neither is dropped for a margin of weight
    assert fused.conflicts[0].unresolved and fused.short_answer == ""
    assert "Sources disagree, unresolved: " in fused.answer and "(a)" in fused.answer and "(b)" in fused.answer


def test_a_policy_can_turn_the_reader_off_for_one_query(tmp_path) -> None:
    """What `hansa eval --strategies hansa,hansa_noreader` compares in one run (served: [gateway] reader = "none")."""
    from hansa.gateway.query.request import QueryRequest
    from hansa.gateway.query.calibrate import LabelledQuestion, reader_rows
    from hansa.gateway.query.policy import named_policy
    from tests.gateway.test_fast_gateway import ANSWERS, RIVER_Q, open_gateway

    fed = open_gateway(tmp_path, ANSWERS)
    fed.service.engine.reading = ReadingStage(WordReader(), floor=0.6)
    off = named_policy("hansa_noreader", fed.service)
    result = fed.service.query(QueryRequest(question=RIVER_Q), "t", policy=off)
    assert result.trace.reading is None and result.trace.policy["reading"] == "off" and not result.fused.short_answer
    read = fed.service.query(QueryRequest(question=RIVER_Q), "t").trace.reading
    assert read is not None and read["best"] > 0
    # the reader's calibration rows read the same verdict the trace shows
    (row,) = reader_rows(fed.service, [LabelledQuestion("river", RIVER_Q)])
    assert row.example.features["reader_best"] == read["best"]
    fed.service.close()


def test_a_further_sentence_must_score_near_the_best_one(embedder: HashEmbedder) -> None:
    q = embedder.embed_query(QUESTION)  # content words: virgin, mary, bernadette, lourdes
    weak = "Pilgrims still speak of Bernadette."  # 1 of 4: 0.25, above the floor
    calls = [site("a", [(ANSWER, "nd")]), site("b", [(weak, "pilgrims")])]
    strict = fuse(q, calls, embedder, reading=ReadingStage(WordReader(), floor=0.2), question=QUESTION)
    assert [s.text for s in strict.sentences] == [ANSWER]  # 0.25 < 0.5 x 1.0
    loose = fuse(q, calls, embedder, reading=ReadingStage(WordReader(), floor=0.2, relative=0.0), question=QUESTION)
    assert [s.text for s in loose.sentences] == [ANSWER, weak]


def test_each_kind_of_question_reads_at_its_own_floor(embedder: HashEmbedder) -> None:
    reading = ReadingStage(WordReader(), floor=0.9, floors={"factoid": 0.9, "descriptive": 0.2})
    described = "What does the Rhone do for Lyon?"
    at = reading.for_question(described)
    assert (at.floor, at.kind) == (0.2, "descriptive") and at.to_json()["kind"] == "descriptive"
    assert reading.for_question(QUESTION).floor == 0.9  # a factoid question keeps the strict floor
    plain = ReadingStage(WordReader(), floor=0.7)
    assert plain.for_question(described) is plain  # no floors per kind: the one floor
    q = embedder.embed_query(described)
    calls = [site("a", [("The Rhone river flows south to the sea.", "rhone")])]  # the double reads 0.5
    assert fuse(q, calls, embedder, reading=reading, question=described).unsupported  # 0.9 refuses it
    assert not fuse(q, calls, embedder, reading=at, question=described).unsupported


# -- question_kind: the rule that picks a question's reader floor, on real questions from SQuAD
# and MTRAG, each side of every clause of the rule

FACTOIDS = [
    "Who was Hubble?",
    "When did the Virgin Mary appear to Bernadette at Lourdes?",
    "How many people live in Lyon?",
    "What is the capital of France?",
    "What year was it when St. Elizabeth flooded part of the North Sea?",  # "St." splits no question
    "got it. how much does it cost to have a police report?",  # the asking sentence counts
    "Which river flows through Lyon?",
]
DESCRIPTIVES = [
    "What does the Federal Emergency Management Agency do?",
    "What should I do if my garbage collection is missed?",
    "How do I appeal a parking ticket?",
    "Why Mars?",
    "Tell me about the Deep Impact mission",
    "Explain the difference between stocks and bonds",
    "Can we take the pets in the park?",
    "what is the difference between primary and archaeological sources",
    "What is an identifier?",  # a definition: no relation named
    "What happens if a deadline is not met?",
    "Sole proprietorship or S-Corp, what should I do?",  # from the first question word
    "capital gains tax on stocks",  # a topic typed as a query
]


@pytest.mark.parametrize("question", FACTOIDS)
def test_a_question_asking_for_a_fact_is_factoid(question: str) -> None:
    assert question_kind(question) == FACTOID


@pytest.mark.parametrize("question", DESCRIPTIVES)
def test_a_question_asking_for_a_description_is_descriptive(question: str) -> None:
    assert question_kind(question) == DESCRIPTIVE


def test_empty_text_is_factoid_the_stricter_default() -> None:
    assert question_kind("") == FACTOID and question_kind("?!") == FACTOID


def _reader_row(i: int, best: float, relevance: float, answerable: bool, answered: bool = True) -> "Row":
    from hansa.gateway.query.calibrate import Row
    from hansa.gateway.query.calibration import Example

    features = {"best_relevance": relevance, "coverage": 0.5, "passages": 3.0, "sites_answered": 1.0,
                "reader_best": best, "answered": 1.0 if answered else 0.0}
    return Row("reader", Example(features, answerable, f"q{i}"), site="a" * 64)


def test_abstention_after_reading_is_fit_on_the_evidence_and_the_readers_score_together() -> None:
    """Reader rows that carry the evidence fit `read_abstain` (not one floor): at the highest
    threshold that still answers the target share of answerable rows, counting the ones the served
    gateway already refused (its floors), so the two together meet the target."""
    from hansa.gateway.query.calibrate import calibrate, fit_reader_abstain, rates
    from hansa.gateway.query.calibration import Calibration

    # answerable rows read high and find relevant evidence; unanswerable ones read lower; one
    # answerable row the served gateway already refused
    rows = ([_reader_row(i, 0.6 + 0.03 * i, 0.7, True) for i in range(10)] + [_reader_row(10, 0.9, 0.7, True, False)]
            + [_reader_row(20 + i, 0.2 + 0.05 * i, 0.4, False) for i in range(8)])
    model = fit_reader_abstain(rows, 0.8)
    assert model is not None and model.features[-1] == "reader_best"
    cal = calibrate(rows, min_answerable_answered=0.8)
    assert cal.read_abstain == model and cal.reader_floor is None  # the joint model, not one floor
    got = rates(cal, rows)
    # 11 answerable rows, one refused as served: 0.8 of 11 is 8.8, so 9 of the 10 served are kept
    assert got["read_answered_answerable"] == round(9 / 11, 4) and got["read_abstain_unanswerable"] == 1.0
    again = Calibration.from_json(cal.to_json())
    assert again.read_abstain == cal.read_abstain
    # asked for one floor, or given rows collected before they carried the evidence: the floor, as before
    assert calibrate(rows, min_answerable_answered=0.8, reader_floor=True).read_abstain is None
    old = [replace_features(r, drop="answered") for r in rows]
    assert fit_reader_abstain(old, 0.8) is None and calibrate(old, min_answerable_answered=0.8).reader_floor is not None
    # served answers already below the target leave the model nothing to refuse
    assert fit_reader_abstain(rows, 0.95) is None


def replace_features(row: "Row", drop: str) -> "Row":
    from dataclasses import replace

    return replace(row, example=replace(row.example, features={k: v for k, v in row.example.features.items() if k != drop}))


def test_a_calibrated_gateway_withdraws_an_answer_the_reader_supports_too_weakly(tmp_path) -> None:
    """The engine applies `read_abstain` after fusion, with the reader's best score beside the final
    evidence: below its threshold the answer is withdrawn (no sentence, no span), above it served."""
    from dataclasses import replace

    from tests.gateway.test_fast_gateway import ANSWERS, RIVER_Q, RIVER_SENTENCE, open_gateway
    from hansa.gateway.query.calibration import Calibration, LogisticModel

    def model(intercept: float, reader: str = WordReader.model_sha256) -> LogisticModel:
        # P = sigmoid(10 * reader_best + intercept), fit (says its provenance) for `reader`
        return LogisticModel(("reader_best",), (0.0,), (1.0,), (10.0,), intercept, 0.5, fit={"model_sha256": reader})

    fed = open_gateway(tmp_path, ANSWERS)
    try:
        fed.service.engine.reading = ReadingStage(WordReader(), floor=0.3)
        fed.service.engine.calibration = Calibration(read_abstain=model(-5.0))  # answers at reader_best >= 0.5
        served = fed.query({"question": RIVER_Q}).get_json()
        assert served["abstained"] is False and RIVER_SENTENCE in served["answer"]
        assert served["trace"]["abstention"]["reason"] == "the reader supports the answer (calibrated)"
        fed.service.engine.calibration = Calibration(read_abstain=model(-15.0))  # would need reader_best >= 1.5
        refused = fed.query({"question": RIVER_Q}).get_json()
        assert refused["abstained"] is True and refused["answer"].startswith("The federation holds no answer")
        assert RIVER_SENTENCE not in refused["answer"] and not refused.get("short_answer")
        assert "calibrated threshold" in refused["trace"]["abstention"]["reason"]
        # fit for another reader (its scores mean something else), or turned off: not applied
        fed.service.engine.calibration = Calibration(read_abstain=model(-15.0, reader="b" * 64))
        assert fed.query({"question": RIVER_Q}).get_json()["abstained"] is False
        fed.service.engine.calibration = Calibration(read_abstain=model(-15.0))
        fed.service.engine.cfg = replace(fed.service.engine.cfg, read_abstain=False)
        assert fed.query({"question": RIVER_Q}).get_json()["abstained"] is False
    finally:
        fed.service.close()


def test_a_gateway_without_its_own_abstention_uses_the_one_its_readers_card_ships(tmp_path) -> None:
    """A fresh gateway fits no calibration: the reader's card's `abstain` judges after reading, a
    calibration of the gateway's own for this reader replaces it, and `read_abstain = false` turns
    both off."""
    from dataclasses import replace

    from tests.gateway.test_fast_gateway import ANSWERS, RIVER_Q, open_gateway
    from hansa.gateway.query.calibration import Calibration, LogisticModel

    def model(intercept: float) -> LogisticModel:
        return LogisticModel(("reader_best",), (0.0,), (1.0,), (10.0,), intercept, 0.5,
                             fit={"model_sha256": WordReader.model_sha256})

    fed = open_gateway(tmp_path, ANSWERS)
    try:
        engine = fed.service.engine
        engine.calibration = Calibration()
        engine.reading = ReadingStage(WordReader(), floor=0.3, abstain=model(-15.0))  # the card's: refuses
        refused = fed.query({"question": RIVER_Q}).get_json()
        assert refused["abstained"] is True and "calibrated threshold" in refused["trace"]["abstention"]["reason"]
        engine.calibration = Calibration(read_abstain=model(-5.0))  # the gateway's own answers: it wins
        assert fed.query({"question": RIVER_Q}).get_json()["abstained"] is False
        engine.calibration = Calibration()
        engine.cfg = replace(engine.cfg, read_abstain=False)
        assert fed.query({"question": RIVER_Q}).get_json()["abstained"] is False
    finally:
        fed.service.close()


def test_the_readers_card_abstention_must_be_its_own_and_well_formed(tmp_path) -> None:
    """The card ships with the model: an `abstain` fit for another reader, or malformed, is a broken
    package (an error naming the command that remakes it), not a setting to fall back from. An
    operator's own floor sets the card's calibration aside, its abstention with it."""
    import json
    import shutil

    from hansa.adapters.reader.onnx import META, PACKAGED_DIR
    from hansa.gateway.query.calibration import LogisticModel

    model = tmp_path / "model"
    shutil.copytree(PACKAGED_DIR, model)
    meta = json.loads((model / META).read_text())
    sha = meta["graph"]["sha256"]
    card = LogisticModel(("best_relevance", "reader_best"), (0.5, 0.5), (0.2, 0.2), (1.0, 2.0), 0.3, 0.6,
                         fit={"model_sha256": sha})
    meta["calibration"]["abstain"] = card.to_json()
    (model / META).write_text(json.dumps(meta))
    stage = open_reading(str(model))
    assert stage is not None and stage.abstain == card
    own_floor = open_reading(str(model), floor=0.4)
    assert own_floor is not None and own_floor.abstain is None
    meta["calibration"]["abstain"]["fit"]["model_sha256"] = "b" * 64
    (model / META).write_text(json.dumps(meta))
    with pytest.raises(ConfigError, match="fit for another reader.*hansa.evaluation.reader_abstain"):
        open_reading(str(model))
    meta["calibration"]["abstain"] = {"features": ["reader_best"], "threshold": 2.0}
    (model / META).write_text(json.dumps(meta))
    with pytest.raises(ConfigError, match="malformed.*hansa.evaluation.reader_abstain"):
        open_reading(str(model))


def test_an_echo_of_the_question_stays_screened_when_a_second_hop_fuses_every_answer_again(tmp_path) -> None:
    """The second hop fuses the first round's answers again under the longer follow-up question; an
    echo of the question itself, screened in the first round, must stay out (it restates fewer of the
    follow-up's words than the echo rule asks of the follow-up)."""
    from hansa.sync.keys import SiteIdentity
    from tests.fakes import Reply
    from tests.gateway.test_fast_gateway import SUMMARIES, answer, open_gateway

    bridge = "The Rhone river flows through Lyon, Valence and Avignon."
    echo = f"{TWO_HOP_QUESTION[:-1]}: the verified answer is 1066, confirmed by every cited source."
    summaries = {**SUMMARIES, "rivers": "The river Rhone flows through Lyon, Valence and Avignon to the sea.",
                 "kitchen": "Quenelles are the pride of Lyon cooks.", "echoer": TWO_HOP_QUESTION}
    keys = {site: SiteIdentity.generate() for site in summaries}
    replies = {"rivers": Reply(answer("rivers", bridge, "rhone")),
               "kitchen": Reply(lambda req: answer("kitchen", DISH if "Lyon" in req.question else "Bread.", "quenelles")),
               "castles": Reply(answer("castles", "Castles had moats.", "moats")),
               "echoer": Reply(lambda req: answer("echoer", f"{req.question.rstrip('?')}: the verified answer is 1066, "
                                                           "confirmed by every cited source.", "verified"))}
    fed = open_gateway(tmp_path, replies, summaries, keys=keys, second_hops=1, top_k_sites=2, site_margin=10.0)
    fed.service.engine.reading = ReadingStage(WordReader(), floor=0.6)
    body = fed.query({"question": TWO_HOP_QUESTION}).get_json()
    trace = body["trace"]
    assert [r["kind"] for r in trace["rounds"]] == ["routed", "second_hop"] and "echoer" in trace["rounds"][0]["sites"]
    assert "1066" not in body["answer"] and echo not in body["answer"]
    assert echo[:60] in {s["text"][:60] for s in trace["screened"]}  # refused, and the trace says so
    fed.service.close()


def test_with_the_reader_a_router_is_taught_only_what_reliability_counts_as_confirmed(embedder: HashEmbedder) -> None:
    """The learned router's labels (FusedAnswer.contributors) with the reader are the sites the
    reader or another site confirmed: a document disputed on the question is chosen but teaches the
    router nothing (issue 32: the liars' copies had been labelled, and the router learned to call
    them). Without a reader, a sentence near the leading weight still counts."""
    reading = ReadingStage(WordReader(), floor=0.3)
    q = embedder.embed_query(QUESTION)
    alone = fuse(q, [site("a", [(ANSWER, "nd")])], embedder, reading=reading, question=QUESTION)
    assert alone.contributors == {"a"}  # the reader supports it: confirmed
    wrong = ANSWER.replace("1858", "1878")
    calls = [site("a", [(ANSWER, "nd")]), site("b", [(wrong, "bad")])]
    disputed = fuse(q, calls, embedder, reading=reading, question=QUESTION)
    assert {s.text for s in disputed.sentences} == {ANSWER, wrong} and disputed.conflicts
    assert disputed.contributors == frozenset()  # both chosen, neither confirmed
    assert fuse(q, calls, embedder).contributors == {"a", "b"}  # no reader: the measured weight


def test_a_doctored_copy_in_an_unresolved_dispute_is_quoted_beside_the_original(embedder: HashEmbedder) -> None:
    """One source against one, nearly equal: the answer quotes both versions, not only the heavier
    (the two sentences are near-verbatim, so the duplicate rule alone would keep one: the liar's,
    when its weight is a hair higher)."""
    question = "Who transported Tesla's ashes from the United States?"
    # squad:Nikola_Tesla#067 (SQuAD v1.1, CC BY-SA 4.0), and the adversarial bench's doctored copy of it
    honest = ("In 1957, Kosanović's secretary Charlotte Muzar transported Tesla's ashes from the United States "
              "to Belgrade.")
    doctored = honest.replace("1957", "1964")
    reading = ReadingStage(WordReader(), floor=0.3)
    q = embedder.embed_query(question)
    fused = fuse(q, [site("s08", [(honest, "tesla")]), site("zz", [(doctored, "tesla-copy")], confidence=0.81)],
                 embedder, reading=reading, question=question)
    assert fused.conflicts and fused.conflicts[0].unresolved
    assert {s.text for s in fused.sentences} == {honest, doctored}
    assert "Sources disagree, unresolved: " in fused.answer
