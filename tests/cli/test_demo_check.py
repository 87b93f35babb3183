"""`hansa demo`'s self-check tests the answer, not only which sites it cites."""
from __future__ import annotations

from hansa.cli.demo import answer_check, bundled_sample


def _case(i: int) -> tuple[str, list[str]]:
    passages, questions = bundled_sample()
    texts = {p["id"]: p["text"] for p in passages}
    q = questions[i]
    return q["question"], [texts[g] for g in q["gold"]]


def test_an_answer_quoting_the_gold_answer_sentence_passes() -> None:
    question, gold = _case(0)
    check = answer_check("nothing yet", question, gold)
    assert check["ok"] is False and check["gold_sentence"]
    quoted = answer_check(f"{check['gold_sentence']} [1]", question, gold)
    assert quoted["ok"] is True and quoted["shared_words"]


def test_an_off_topic_answer_citing_anything_fails() -> None:
    question, gold = _case(1)  # the flu-vaccine question the demo once "passed" with safe rooms
    check = answer_check("Keep water and a radio in a safe room [1]. Egg donation is paid [2].", question, gold)
    assert check["ok"] is False


def test_without_a_gold_passage_there_is_nothing_to_check() -> None:
    assert answer_check("anything", "a question", [])["ok"] is None


def test_the_demo_prints_only_the_citations_the_answer_uses(capsys, tmp_path) -> None:
    from hansa.cli.demo import DemoResult, _print_human

    answer = {"question": "q?", "answer": "The Rhone meets the Saone at Lyon. [1]", "gold_site": "rivers",
              "gold_site_cited": True, "client_latency_ms": 12.0,
              "answer_check": {"ok": True, "gold_sentence": "x", "shared_words": ["lyon", "saone"]},
              "citations": [{"n": 1, "site_id": "rivers", "doc_id": "rhone", "title": "The Rhone", "score": 0.9,
                             "used": True, "snippet": "The Rhone meets the Saone at Lyon.", "page": 3,
                             "source": "atlas:rhone.pdf"},
                            {"n": 2, "site_id": "kitchen", "doc_id": "soup", "title": "Onion soup", "score": 0.1,
                             "used": False}],
              "sites": {"total": 2, "successful": 2, "skipped": 0, "failed": 0, "timed_out": 0, "partial": False},
              "trace": {"sites_considered": [], "per_site": [], "total_ms": 10.0}}
    _print_human(DemoResult(tmp_path, 1.0, {}, [answer]))
    out = capsys.readouterr().out
    assert "The Rhone — rivers, atlas:rhone.pdf, p. 3" in out and '"The Rhone meets the Saone at Lyon."' in out
    assert "Onion soup" not in out
    assert "answer matches the gold passage: yes (shares lyon, saone)" in out
