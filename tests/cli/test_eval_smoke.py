"""`hansa eval --smoke` end to end on both datasets: real sites and gateway over loopback HTTP,
every strategy. Asserts the record fields, that every metric is in range, and the invariants that
hold whatever the numbers (the oracle asks exactly the gold sites; exhaustive asks every site)."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from hansa.cli import main

RECORD_FIELDS = {
    "dataset", "federation_sites", "strategy", "split", "questions", "passages_total", "gold_site_recall",
    "evidence_recall_at_10", "mrr", "answer_contains", "answer_f1", "abstain_unanswerable", "answered_answerable",
    "sites_called_per_query", "bytes_per_query", "gateway_overhead_ms_p50", "latency_ms_p50", "latency_ms_p95",
    "all_gold_sites_called", "answer_rouge_l", "gateway_storage_bytes", "raw_corpus_bytes",
}
SHARES = ("gold_site_recall", "all_gold_sites_called", "evidence_recall_at_10", "mrr", "answer_contains", "answer_f1",
          "answer_em", "answer_rouge_l", "abstain_unanswerable", "answered_answerable", "abstention_auroc")


@pytest.fixture(scope="module")
def datasets_dir(request: pytest.FixtureRequest) -> Path:
    env = os.environ.get("HANSA_EVAL_DATA")
    return Path(env) if env else request.getfixturevalue("shared_dir") / "datasets"


def test_eval_without_data_says_where_to_point_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HANSA_EVAL_DATA", raising=False)
    result = CliRunner().invoke(main, ["--home", str(tmp_path), "eval", "--dataset", "squad", "--smoke"])
    assert result.exit_code == 2 and "--data" in result.output and "HANSA_EVAL_DATA" in result.output


@pytest.mark.slow
@pytest.mark.parametrize("dataset", ["mtrag", "squad"])
def test_eval_smoke_writes_one_record_per_federation_and_strategy(dataset: str, tmp_path: Path, datasets_dir: Path) -> None:
    out = tmp_path / f"eval_{dataset}.json"
    result = CliRunner().invoke(main, [
        "--home", str(tmp_path / "home"), "--log-level", "warning", "eval", "--dataset", dataset,
        "--data", str(datasets_dir / dataset), "--smoke", "--out", str(out), "--cache", str(tmp_path / "cache"),
        "--workdir", str(tmp_path / "work"),
        *(["--share-site-calls"] if dataset == "squad" else []),
    ])
    assert result.exit_code == 0, result.output
    doc = json.loads(out.read_text())
    assert out.with_suffix(".png").stat().st_size > 0 and (tmp_path / f"eval_{dataset}_routing.png").stat().st_size > 0
    assert doc["dataset"] == dataset and doc["split"] == "report" and "fit" in doc["split_rule"]
    assert doc["questions"]["answerable"] == 6 and doc["questions"]["total"] == 8
    records = {(r["federation_sites"], r["strategy"]): r for r in doc["records"]}
    assert set(records) == {(4, s) for s in ("hansa", "exhaustive", "top1", "oracle", "full_information")} | {(1, "centralized")}
    for r in records.values():
        assert RECORD_FIELDS <= set(r), RECORD_FIELDS - set(r)
        assert r["dataset"] == dataset and r["split"] == "report"
        assert r["embedder"]["model_id"] == "sentence-transformers/all-MiniLM-L6-v2" and len(r["embedder"]["model_sha256"]) == 64
        assert set(r["question_source"].split("+")) <= ({"dev", "train"} if dataset == "squad" else {"mtragun", "mtrag"})
        for name in SHARES:
            assert r[name] is None or 0.0 <= r[name] <= 1.0, (name, r[name])
        assert r["bytes_per_query"] > 0 and 0 < r["latency_ms_p50"] <= r["latency_ms_p95"]
        assert r["gateway_storage_bytes"] > 0 and r["raw_corpus_bytes"] > 0
        assert r["answer_f1"] is not None and r["answered_answerable"] is not None
        assert (r["answer_contains"] is not None) == (dataset == "squad")
        assert (r["answer_rouge_l"] is not None) == (dataset == "mtrag")
    assert records[(4, "oracle")]["gold_site_recall"] == 1.0 and records[(4, "oracle")]["questions"] == 6
    assert records[(4, "oracle")]["abstain_unanswerable"] is None  # no gold site to ask
    assert records[(4, "exhaustive")]["gold_site_recall"] == 1.0
    assert records[(4, "hansa")]["abstain_unanswerable"] is not None
    built = len(doc["federations"]["fed4"]["sites"])
    assert records[(4, "exhaustive")]["sites_called_per_query"] == built
    assert records[(4, "top1")]["sites_called_per_query"] == 1.0
    meta = doc["federations"]["fed4"]
    # the configured router's selection, measured without asking a site: the gateway's own margin and weight
    chosen = meta["routing_selection"]
    assert (chosen["site_margin"], chosen["lexical_weight"], chosen["top_k_sites"]) == (0.4, 0.3, 5)
    assert 0.0 <= chosen["gold_site_recall"] <= 1.0 and 1.0 <= chosen["sites_called_per_query"] <= min(5, built)
    # the gateway holds float32 vectors plus per-site heads: more than the bare vectors, less
    # than the base64 JSON publications that carried them
    assert meta["gateway_vector_bytes"] < meta["gateway_storage_bytes"] < meta["publication_bytes"]
    assert records[(4, "hansa")]["gateway_storage_share_of_raw"] == meta["gateway_storage_share_of_raw"] > 0
    curves = doc["federations"]["fed4"]["routing_gold_site_recall_at_k"]
    assert set(curves) == {"summaries", "summary_vectors", "terms", "full_information", "centroid"}
    # the sites published term statistics and the gateway holds them with each site's set
    assert meta["published_terms"] > 0 and 0 < meta["gateway_terms_bytes"] < meta["gateway_storage_bytes"]
    assert all(0.0 <= v <= 1.0 for c in curves.values() for v in c.values())
    # SQuAD's run shares site calls: top1, oracle and full_information ask pairs exhaustive asked
    shared = meta.get("site_calls")
    assert (shared is not None) == (dataset == "squad") and doc["settings"]["share_site_calls"] == (dataset == "squad")
    if shared is not None:
        assert shared["replayed"] > 0 and shared["asked"] >= built * doc["questions"]["total"]

    again = CliRunner().invoke(main, [
        "--home", str(tmp_path / "home"), "--log-level", "warning", "eval", "--dataset", dataset,
        "--data", str(datasets_dir / dataset), "--smoke", "--out", str(out), "--cache", str(tmp_path / "cache"),
        "--strategies", "hansa,oracle", "--conversation", "--routing-only",
    ])
    assert again.exit_code == 0, again.output
    rerun = json.loads(out.read_text())
    assert rerun["federations"]["fed4"]["sites_built"] == 0  # every site came from the cache
    assert rerun["federations"]["fed4"]["sites_reused"] == built
    assert rerun["records"] == []  # routing only: no site was asked
    ways = rerun["federations"]["fed4"]["conversation_routing"]
    assert {"last_turn", "all_turns_joined", "carry=8,decay=0.5"} <= set(ways)
    assert all(set(c) == set(curves) for c in ways.values())


def test_eval_llm_needs_an_endpoint(tmp_path: Path, datasets_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HANSA_LLM_BASE_URL", raising=False)
    result = CliRunner().invoke(main, ["--home", str(tmp_path), "eval", "--dataset", "squad", "--smoke", "--llm",
                                       "--data", str(datasets_dir / "squad")])
    assert result.exit_code == 2 and "HANSA_LLM_BASE_URL" in result.output


@pytest.mark.slow
@pytest.mark.llm
def test_eval_with_an_llm_scores_the_written_and_the_extractive_answer_of_each_query(
        tmp_path: Path, datasets_dir: Path, llm_base_url: str, llm_model: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HANSA_LLM_BASE_URL", llm_base_url + "/v1")
    monkeypatch.setenv("HANSA_LLM_MODEL", llm_model)
    out = tmp_path / "eval_llm.json"
    result = CliRunner().invoke(main, [
        "--home", str(tmp_path / "home"), "--log-level", "warning", "eval", "--dataset", "mtrag",
        "--data", str(datasets_dir / "mtrag"), "--smoke", "--strategies", "hansa", "--llm", "--limit-unanswerable", "-1",
        "--out", str(out), "--cache", str(tmp_path / "cache"), "--sites", "4",
    ])
    assert result.exit_code == 0, result.output
    doc = json.loads(out.read_text())
    assert doc["settings"]["llm_base_url"] and "llm_api_key" not in doc["settings"]
    (record,) = [r for r in doc["records"] if r["strategy"] == "hansa"]
    for name in ("extractive_answer_f1", "extractive_answer_rouge_l", "llm_answer_share"):
        assert record[name] is not None and 0.0 <= record[name] <= 1.0, (name, record[name])
    assert record["llm_tokens_per_query"] > 0  # the server's usage counts
    rows = doc["answers_per_question"]
    assert len(rows) == doc["questions"]["answerable"] == 6
    for row in rows:
        assert row["synthesis"] in {"llm", "extractive"} and set(row["answer"]) == set(row["extractive"])
        if row["synthesis"] == "extractive":  # the check kept nothing: the gateway gave the extractive answer
            assert row["answer"] == row["extractive"]
