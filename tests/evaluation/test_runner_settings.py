"""`hansa eval --site-setting`: a sweep of how sites are built reaches every site's configuration."""
from __future__ import annotations

import pytest

from hansa.core.config import load_config
from hansa.core.errors import HansaError
from hansa.evaluation.runner import setting_env, site_env


def test_site_settings_become_the_sites_configuration() -> None:
    env = site_env([("chunks_per_summary", "32"), ("leiden_gamma", "2.5")])
    cfg = load_config(env=env)
    assert (cfg.site.chunks_per_summary, cfg.site.leiden_gamma) == (32, 2.5)


def test_an_unknown_site_setting_is_refused_by_name() -> None:
    with pytest.raises(HansaError, match="unknown \\[site\\] setting 'chunk_per_summary'"):
        site_env([("chunk_per_summary", "32")])


def test_gateway_settings_become_the_gateways_configuration_and_unknown_keys_are_refused() -> None:
    env = setting_env("gateway", [("lexical_weight", "2.5"), ("top_k_sites", "4")])
    cfg = load_config(env=env)
    assert (cfg.gateway.lexical_weight, cfg.gateway.top_k_sites) == (2.5, 4)
    with pytest.raises(HansaError, match="unknown \\[gateway\\] setting 'lexical_wieght'"):
        setting_env("gateway", [("lexical_wieght", "2")])


def test_embedder_settings_name_the_model_of_the_sites_and_the_gateway_and_unknown_keys_are_refused() -> None:
    env = setting_env("embedder", [("model", "bge-small-en-v1.5-q")])
    assert env == {"HANSA_EMBEDDER_MODEL": "bge-small-en-v1.5-q"}
    assert load_config(env=env).embedder.model == "bge-small-en-v1.5-q"
    with pytest.raises(HansaError, match="unknown \\[embedder\\] setting 'modle'"):
        setting_env("embedder", [("modle", "bge-small-en-v1.5-q")])


def test_a_document_sample_for_dev_questions_keeps_every_article_they_were_written_on() -> None:
    from hansa.evaluation.datasets import UNANSWERABLE, Dataset, Passage, Question, shard_by_document
    from hansa.evaluation.runner import sample_documents

    passages = tuple(Passage(f"squad:A{i}#000", f"A{i}", "text", f"squad:A{i}") for i in range(20))
    questions = (Question("d1", "q?", gold=("squad:A3#000",), answers=("x",), source="squad1.1-dev"),
                 Question("d2", "q?", gold=("squad:A17#000",), answers=("x",), source="squad1.1-dev+squad2.0-dev"),
                 Question("u1", "q?", kind=UNANSWERABLE, source="squad2.0-dev"),
                 Question("t1", "q?", gold=("squad:A5#000",), answers=("x",), source="squad1.1-train"))
    ds = Dataset("squad", passages, questions, "", shard_by_document)
    small = sample_documents(ds, 5, "dev")
    docs = {p.doc_id for p in small.passages}
    assert len(docs) == 5 and {"squad:A3", "squad:A17"} <= docs
    assert {q.id for q in small.questions} >= {"d1", "d2", "u1"}
    assert len({p.doc_id for p in sample_documents(ds, 5).passages}) == 5  # without a source: the hash sample alone
