"""Every benchmark's --smoke run, as CI runs it, so the scripts cannot rot.

Each script runs in its own process (as a person runs it) against the real components, and its
JSON document is checked for shape and sane values. No timing is asserted: speed targets are
judged by the full runs on a quiet machine, never by the test suite.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPTS = REPO / "scripts"
TOP_KEYS = {"benchmark", "schema_version", "smoke", "started_at", "wall_seconds", "machine", "params",
            "results", "ratios", "targets", "notes"}
MACHINE_KEYS = {"cpu_count", "cpu_model", "python", "libraries", "load_average_at_start", "mem_total_mib"}


def run_bench(name: str, tmp_path: Path, *extra: str, script: str = "") -> dict[str, Any]:
    out = tmp_path / f"{name}.json"
    script = script or f"bench_{name}.py"
    proc = subprocess.run(
        [sys.executable, str(SCRIPTS / script), "--smoke", "--out", str(out), *extra],
        cwd=REPO, capture_output=True, text=True, timeout=1200,
    )
    assert proc.returncode == 0, f"{script} --smoke failed ({proc.returncode}):\n{proc.stderr[-4000:]}"
    doc = json.loads(out.read_text(encoding="utf-8"))
    assert json.loads(proc.stdout) == doc, "stdout must carry exactly the document written to --out"
    assert TOP_KEYS <= set(doc), f"missing keys: {TOP_KEYS - set(doc)}"
    assert doc["benchmark"] == name and doc["smoke"] is True
    assert MACHINE_KEYS <= set(doc["machine"]), f"missing machine facts: {MACHINE_KEYS - set(doc['machine'])}"
    assert doc["machine"]["cpu_count"] >= 1 and doc["machine"]["libraries"]["hansa"]
    for key, value in doc["ratios"].items():
        assert value is None or value > 0, f"ratio {key} = {value}"
    for key, target in doc["targets"].items():
        assert set(target) == {"goal", "observed", "met"}, key
    return doc


def is_rate(value: Any) -> bool:
    return isinstance(value, (int, float)) and value > 0


ROUTING_VARIANTS = {
    "numpy_exact_f32", "numpy_exact_f16", "numpy_ivf", "faiss_flat", "faiss_flat_fp16", "faiss_ivf_flat",
    "faiss_ivf_fp16", "faiss_hnsw", "hansa_gateway_ann", "milvus_lite_flat", "milvus_lite_ivf_flat", "milvus_lite_hnsw",
}


def test_routing_smoke(tmp_path: Path) -> None:
    doc = run_bench("routing", tmp_path)
    sizes = doc["results"]["sizes"]
    assert list(sizes) == ["2000"]
    rows = sizes["2000"]["variants"]
    assert {r["variant"] for r in rows} == ROUTING_VARIANTS, "every variant runs (or says why it was skipped)"
    assert not [r for r in rows if "skipped" in r], "nothing is too slow to build at the smoke size"
    for r in rows:
        assert 0.0 <= r["recall_at_10"] <= 1.0, r
        assert r["latency"]["n"] >= 10 and 0 < r["latency"]["p50_ms"] <= r["latency"]["p99_ms"], r
        assert r["build_seconds"] >= 0, r
    exact = {r["variant"]: r["recall_at_10"] for r in rows if r["variant"] in ("numpy_exact_f32", "faiss_flat", "milvus_lite_flat")}
    assert all(v >= 0.99 for v in exact.values()), f"exact searches must agree with the ground truth: {exact}"
    data = sizes["2000"]["data"]
    assert 0 < data["cos_to_nearest_centre_mean"] < 1
    assert data["rank10_minus_rank100_mean"] > 0, "the top-10 must stand out from the rest"


def test_httpsig_smoke(tmp_path: Path) -> None:
    doc = run_bench("httpsig", tmp_path)
    variants = doc["results"]["variants"]
    assert {"request:hansa", "response:hansa", "crypto_floor", "parse:hansa", "request:http_message_signatures",
            "response:http_message_signatures", "parse:http_sf", "parse:http_sfv"} == set(variants)
    assert all(is_rate(v["per_s"]) and len(v["round_rates"]) == doc["params"]["rounds"] for v in variants.values())
    assert all(is_rate(doc["ratios"][k]) for k in ("request:hansa_vs_library", "response:hansa_vs_library",
                                                   "parse:hansa_vs_http_sf"))
    assert doc["params"]["signature_input"].startswith('hansa=("@method" "@target-uri"')

def test_models_smoke(tmp_path: Path) -> None:
    doc = run_bench("models", tmp_path)
    us = doc["results"]["microseconds_per_message"]
    variants = set(doc["params"]["variants"])
    assert {"legacy", "hansa", "pydantic_strict"} <= variants, "msgspec may be absent (then a note says so)"
    assert ("msgspec" in variants) or any("msgspec not installed" in n for n in doc["notes"])
    for variant in variants:
        for message in ("PartialAnswer", "SummaryBatch"):
            assert is_rate(us[f"decode:{message}:{variant}"]) and is_rate(us[f"encode:{message}:{variant}"])
    table = doc["results"]["strictness"]
    assert all(row["legacy"]["as_today"] for row in table), "the baseline is what today means"
    assert all(row["hansa"]["as_today"] for row in table), "the shipped parser refuses and accepts as before"
    assert all(row["hansa"]["input_error"] and row["hansa"]["names_field"] for row in table if row["today"] == "refuse")
    assert doc["targets"]["hansa refuses and accepts exactly as today"]["met"] is True


def test_publication_smoke(tmp_path: Path) -> None:
    doc = run_bench("publication", tmp_path)
    expected = doc["params"]["sites"] * doc["params"]["summaries_per_site"]
    passes = doc["results"]["passes"]
    assert {"signature_only", "verify_parse", "verify_index_milvus_lite", "verify_index_milvus_lite_republish",
            "gateway_http_milvus_lite"} <= set(passes)
    for name, res in passes.items():
        if name.startswith("durable_"):  # how long the write-behind copy took to catch up, not a rate
            assert res["seconds_after_last_accept"] >= 0, name
            continue
        assert res["summaries"] == expected, name
        assert is_rate(res["summaries_per_s"]), name
    assert is_rate(doc["targets"]["verify_and_index"]["observed"])


@pytest.mark.neo4j
def test_ingest_smoke(tmp_path: Path, neo4j_uri: str) -> None:
    doc = run_bench("ingest", tmp_path, "--neo4j-uri", neo4j_uri)
    ingest = doc["results"]["ingest"]
    assert set(ingest) == {"embedded", "neo4j"}
    for backend, res in ingest.items():
        e2e = res["end_to_end"]
        assert e2e["documents"] == doc["params"]["passages"], backend
        assert e2e["chunks"] >= e2e["documents"] and e2e["entities"] > 0, backend
        assert is_rate(e2e["chunks_per_s"]) and is_rate(e2e["entities_per_s"]), backend
        stages = res["stages"]
        assert stages["chunks"] == e2e["chunks"], f"{backend}: the staged run must see the same corpus"
        assert set(stages["seconds"]) == {"read", "chunk", "extract", "embed", "vector_write", "graph_write"}
        assert all(v > 0 for v in stages["seconds"].values()), stages
        assert abs(sum(stages["share"].values()) - 1.0) < 0.01
        assert stages["bottleneck"] in stages["seconds"]
        leiden = res["leiden_on_ingested_graph"]
        assert 1 <= leiden["communities_final_level"] <= leiden["communities_finest_level"]
    readers = doc["results"]["pdf"]["readers"]
    assert set(readers) == {"hansa_read_path_pypdfium2", "pypdfium2", "pypdf"}
    for name, r in readers.items():
        assert is_rate(r["pages_per_s"]) and r["chars"] > 1000, name


@pytest.mark.neo4j
def test_vector_write_smoke(tmp_path: Path) -> None:
    """Before (a git revision, exported) and after (this checkout), each in its own process; here
    both are this code, so their ingests must agree on what they stored."""
    doc = run_bench("vector_write", tmp_path, "--base", "HEAD")
    runs = doc["results"]["runs"]
    assert [len(runs["before"]), len(runs["after"])] == [1, 1]
    for variant in ("before", "after"):
        summary = doc["results"][variant]
        assert summary["chunks"] == runs["before"][0]["chunks"] > 0, variant
        assert summary["reingest_chunks"] > 0 and summary["process_cpu_seconds"] > 0, variant
        assert is_rate(summary["vector_write_chunks_per_s"]) and is_rate(summary["vector_write_chunks_per_cpu_s"]), variant
        assert summary["peak_rss_mib_after_close"] >= summary["peak_rss_mib"] > 0, variant
        [run] = runs[variant]
        assert set(run["stage_seconds"]) >= {"read", "build", "embed", "vector_write", "graph_write"}, variant
        assert run["reingest"]["documents_changed"] > 0 and run["reingest"]["documents_new"] == 0, variant
    assert doc["targets"]["vector_write_chunks_per_s"]["goal"] == ">= 1,000 chunks/s"


def test_build_smoke(tmp_path: Path) -> None:
    """install -> publish through the CLI on both backends (its own Neo4j: `site install` refuses a
    database another test's site holds)."""
    doc = run_bench("build", tmp_path)
    builds = doc["results"]["builds"]
    assert set(builds) == {"embedded", "neo4j"}
    for backend, res in builds.items():
        assert set(res["stages_seconds"]) == {"install", "ingest", "communities", "publish"}, backend
        assert all(v > 0 for v in res["stages_seconds"].values()), res["stages_seconds"]
        assert res["ingest_report"]["documents_new"] == doc["params"]["passages"], backend
        assert res["chunks"] >= doc["params"]["passages"] and res["communities_report"]["communities"] >= 1, backend
        assert res["publication_bytes"] > 1000, backend
    assert builds["neo4j"]["server"]["neo4j"] == "started"


@pytest.mark.neo4j
def test_ingest_graph_only_smoke(tmp_path: Path, neo4j_uri: str) -> None:
    doc = run_bench("ingest", tmp_path, "--graph-only", "--warmups", "2", "--neo4j-uri", neo4j_uri)
    runs = doc["results"]["graph_write"]
    assert set(runs) == {"embedded", "neo4j"}
    assert doc["params"]["graph_only"] is True and doc["params"]["warmups"] == 2 and "pdf" not in doc["results"]
    embedded, neo4j = runs["embedded"], runs["neo4j"]
    for key in ("chunks", "entities", "relations", "mentions"):
        assert embedded[key] == neo4j[key] > 0, f"both stores write the same graph: {key}"
    for backend, res in runs.items():
        assert len(res["seconds_all"]) == doc["params"]["repeats"], backend
        assert is_rate(res["chunks_per_s"]) and [w["seconds"] > 0 for w in res["warmup_runs"]] == [True, True], backend
    assert set(doc["targets"]) == {"graph_write_neo4j"}
    assert doc["ratios"]["neo4j_vs_embedded:graph_write_chunks_per_s"] > 0


@pytest.mark.neo4j
def test_relations_smoke(tmp_path: Path, neo4j_uri: str) -> None:
    doc = run_bench("relations", tmp_path, "--neo4j-uri", neo4j_uri)
    res = doc["results"]
    assert set(res["write"]) == {"v2_stored", "v3_derived"}
    assert set(res["projection"]) == {"v2_stored", "v3_sorted_pairs", "v3_derived"}
    assert res["expand"]["identical_results"] == res["expand"]["seed_sets"] > 0, "derived relations rank as stored ones"
    v2, sorted_pairs, v3 = (res["projection"][arm] for arm in ("v2_stored", "v3_sorted_pairs", "v3_derived"))
    assert v2["relationships"] == sorted_pairs["relationships"] == v3["relationships"] > 0, "the same weighted graph"
    assert sorted_pairs["nodes"] == v3["nodes"] > 0
    for arm, w in res["write"].items():
        assert is_rate(w["chunks_per_s"]), arm
    assert set(doc["targets"]) == {"graph_write_neo4j"} and doc["targets"]["graph_write_neo4j"]["met"] is None


def test_embedded_relations_smoke(tmp_path: Path) -> None:
    doc = run_bench("embedded_relations", tmp_path)
    res = doc["results"]
    assert set(res["write"]) == {"v2_stored", "v3_derived"}
    for arm, w in res["write"].items():
        assert is_rate(w["chunks_per_s"]), arm
    for key in ("expand", "relations_within", "leiden_input"):
        assert res[key]["identical_results"] == res[key]["calls"] > 0, f"derived relations read as stored ones: {key}"
    assert res["leiden_input"]["edges"] > 0
    assert set(doc["targets"]) == {"graph_write_embedded"} and doc["targets"]["graph_write_embedded"]["met"] is None


@pytest.mark.neo4j
def test_delete_smoke(tmp_path: Path, neo4j_uri: str) -> None:
    doc = run_bench("delete", tmp_path, "--neo4j-uri", neo4j_uri)
    res = doc["results"]["delete"]
    assert set(res) == {"embedded", "neo4j_by_id", "neo4j"}
    for arm, r in res.items():
        assert r["documents"] == doc["params"]["passages"] == 200, arm
        assert r["chunks"] == res["embedded"]["chunks"] > 0 and r["entities"] == res["embedded"]["entities"] > 0, arm
        assert r["left"] == {"documents": 0, "chunks": 0, "entities": 0}, arm
        assert is_rate(r["documents_deleted_per_s"]), arm
    assert doc["ratios"]["neo4j_vs_neo4j_by_id:delete_seconds"] > 0


@pytest.mark.neo4j
def test_leiden_smoke(tmp_path: Path, neo4j_uri: str) -> None:
    doc = run_bench("leiden", tmp_path, "--neo4j-uri", neo4j_uri)
    size = doc["results"]["sizes"]["2000"]
    assert size["gds"]["projected"]["nodes"] == 2000
    assert size["gds"]["projected"]["relationships"] == 2 * size["graph"]["edges"], "UNDIRECTED: each edge both ways"
    methods = size["methods"]
    assert set(methods) == {"gds_concurrency_1", "gds_concurrency_2", "leidenalg", "igraph_community_leiden"}
    reference = methods["leidenalg"]["modularity"]
    for name, m in methods.items():
        assert is_rate(m["leiden_seconds"]), name
        assert 1 <= m["communities"] <= 2000, name
        assert 0.0 <= m["nmi_vs_planted"] <= 1.0, name
        # A membership read back in the wrong node order would score near 0: results must agree.
        assert m["modularity"] >= 0.9 * reference, (name, m["modularity"], reference)
    gds = methods["gds_concurrency_1"]
    assert abs(gds["gds_reported_modularity"] - gds["modularity"]) < 1e-3, "igraph and GDS must score alike"


def test_embed_smoke(tmp_path: Path) -> None:
    doc = run_bench("embed", tmp_path)
    backends = doc["results"]["backends"]
    assert set(backends) == {"st_fp32", "st_bf16", "onnx_fp32", "onnx_fp32_1t", "onnx_int8"}
    for name, r in backends.items():
        assert "skipped" not in r, (name, r.get("skipped"))
        assert is_rate(r["chunks_per_s"]) and is_rate(r["startup_s"]) and r["rss_mib"] > 10, name
        assert r["question_ms"]["n"] >= 6 and r["question_ms"]["p50_ms"] <= r["question_ms"]["p95_ms"], name
        assert r["torch_imported"] == name.startswith("st_"), name
    assert backends["onnx_fp32"]["cosine_to_reference"]["min"] >= 0.999  # the same space as the reference
    assert backends["st_bf16"]["cosine_to_reference"]["min"] >= 0.999
    assert doc["results"]["fastest_question"] in doc["results"]["same_space"]
    assert "onnx_int8" not in doc["results"]["same_space"] or backends["onnx_int8"]["cosine_to_reference"]["min"] >= 0.999
    hit = backends["onnx_fp32"]["memo_hit_ms"]
    assert hit["n"] > 100 and hit["p50_ms"] > 0


def test_embedders_smoke(tmp_path: Path) -> None:
    doc = run_bench("embedders", tmp_path)
    assert doc["params"]["squad_question_source"] == "dev" and doc["params"]["split"] == "report"
    (name, row), = doc["results"].items()  # the smoke run measures the first model only
    assert name == "all-MiniLM-L6-v2" and len(row["model_sha256"]) == 64
    for corpus in ("squad_dev", "mtrag"):
        curve = row[corpus]["site_at_k"]
        assert len(curve) == 4 and all(0 <= a <= b <= 1 for a, b in zip(curve, curve[1:])), (corpus, curve)
    assert 0 <= row["squad_dev"]["r_at_1"] <= 1 and 0 <= row["mtrag"]["evidence_recall_at_10"] <= 1
    assert is_rate(row["chunks_per_s"]) and row["question_ms"]["n"] >= 1


def test_serving_smoke(tmp_path: Path) -> None:
    doc = run_bench("serving", tmp_path)
    runs = doc["results"]["runs"]
    assert {(r["server"], r["workers"]) for r in runs} == {("gunicorn", 1), ("waitress", 1)}
    assert doc["results"]["site"]["chunks"] >= doc["results"]["site"]["documents"] > 0
    for r in runs:
        assert r["concurrency"] == doc["params"]["concurrency"] == 8
        assert r["ok"] > 0 and is_rate(r["throughput_rps"]), r
        assert r["statuses"].get("200") == r["ok"] and sum(r["statuses"].values()) == r["requests"], r
        assert 0 < r["latency"]["p50_ms"] <= r["latency"]["p99_ms"], r
        assert r["rss_mib"] > 0 and r["boot_seconds"] > 0, r
        assert r["health"]["ok"] > 0 and r["health"]["latency"]["p99_ms"] > 0, r
    choice = doc["results"]["choice"]
    assert choice["server"] in ("gunicorn", "waitress") and choice["why"]


def test_conflicts_smoke(tmp_path: Path) -> None:
    doc = run_bench("conflicts", tmp_path)
    cases = doc["params"]["cases"]
    assert cases["changed"] >= 4 and cases["controls"] >= 1
    for name in ("no_history", "with_history"):
        res = doc["results"][name]
        assert res["all"]["cases"] == cases["changed"], name
        assert 0 <= res["all"]["detected"] <= res["all"]["cases"], name
        assert res["all"]["true_reported"] <= res["all"]["reported"], name
        assert {"honest", "distinct"} == set(res["controls"]), name
        assert {k for k in res["by"] if k.startswith("source=")} == {"source=squad", "source=mtrag"}, name
    assert doc["results"]["no_history"]["all"]["recall"] > 0, "copies with one value changed must be noticed"
    assert set(doc["results"]["with_history"]["reliability_after"]) <= {f"site-{i}" for i in range(8)}


# The smoke drill's p99 bound, as a correctness bound: the per-site deadline plus room for the
# gateway's own CPU on a busy CI machine. A gateway that queued questions behind a hung site (one
# request per worker) measured p50 12 s at this deadline; the tight bound (deadline +
# 100 ms) is judged by the full run's record, never here.
LOAD_SMOKE_MARGIN_MS = 4000.0


def test_load_smoke(tmp_path: Path) -> None:
    doc = run_bench("load", tmp_path)
    (record,) = doc["results"]["records"]
    assert {"drill", "questions", "concurrency", "workers", "well_formed_share", "p99_ms", "site_deadline_ms",
            "throughput_qps"} <= set(record)
    assert record["workers"] == 1 and record["concurrency"] == 8 and record["questions"] == doc["params"]["questions"]
    assert record["well_formed_share"] == 1.0 and record["malformed"] == {}, record["malformed"]
    assert record["pass"]["well_formed"] is True
    deadline = record["site_deadline_ms"]
    assert record["p99_ms"] <= deadline + LOAD_SMOKE_MARGIN_MS, record["latency"]
    assert record["call_p99_ms"] <= deadline + 1000.0, "a hung site must not hold the gateway past its deadline"
    assert 0.0 <= record["gateway_stages"]["finish_reserve"]["max_ms"] <= 200.0, "kept back: at most the default cap"
    calls = record["site_calls_by_kind"]
    assert set(calls) == {"real", "down", "hung", "garbage"}, "every kind of site must really be called"
    assert set(calls["down"]) == {"error"} and set(calls["hung"]) == {"timeout"}
    assert set(calls["garbage"]) <= {"invalid", "timeout"} and calls["real"].get("ok", 0) > 0
    assert all(isinstance(record["resources_growth"][k], int) for k in ("threads", "fds", "sockets"))
    assert (tmp_path / "load.png").stat().st_size > 1000


def test_query_smoke(tmp_path: Path) -> None:
    doc = run_bench("query", tmp_path)
    gateway, site = doc["results"]["gateway"], doc["results"]["site_retrieval"]
    for mode in ("routed", "all_sites"):
        for arm in ("before", "after", "after_repeat"):
            assert gateway[mode][arm]["gateway_overhead"]["n"] == doc["params"]["questions"]
        # the `after` arm verifies a subset of what `before` measures, never more
        assert gateway[mode]["after"]["sentences_measured_mean"] <= gateway[mode]["before"]["sentences_measured_mean"]
    assert site["calls"] == doc["params"]["questions"] * doc["params"]["sites"] and site["same_sentences_share"] == 1.0
    assert set(doc["targets"]) == {"gateway_overhead_p50_ms_routed", "gateway_overhead_p50_ms_all_sites"}


@pytest.mark.parametrize("param", ["site_prior", "answer_coverage"])
def test_fusion_sweep_smoke(tmp_path: Path, param: str) -> None:
    doc = run_bench(param, tmp_path, "--param", param, script="sweep_fusion.py")
    res = doc["results"]
    assert doc["params"]["split"] == "fit" and doc["params"]["questions"] >= 1 and doc["params"]["param"] == param
    for strategy in ("exhaustive", "hansa", "oracle"):  # oracle: the gold sites alone, the reference, at each weight
        assert set(res["evidence_recall_at_10"][strategy]) == {str(w) for w in doc["params"]["weights"]}
        assert all(0.0 <= v <= 1.0 for v in res["evidence_recall_at_10"][strategy].values())
        assert all(0.0 <= v <= 1.0 for v in res["mrr"][strategy].values())
    assert res["best_weight"] in doc["params"]["weights"]
    assert res["site_calls"]["replayed"] > 0  # the weights after the first reuse the sites' answers


def test_evidence_stages_smoke(tmp_path: Path) -> None:
    doc = run_bench("evidence_stages", tmp_path)
    [(model, res)] = doc["results"].items()  # smoke: the first model only
    assert model == doc["params"]["models"][0] and doc["params"]["questions"] >= 1
    for name in ("hansa", "oracle"):
        stage = res[name]
        assert all(0.0 <= stage[k] <= 1.0 for k in ("raw_union", "raw_merged10", "fused10", "fused_all", "rr"))
        # a cut never finds more than the whole: the answer's top 10 within its citations
        assert stage["fused10"] <= stage["fused_all"] and stage["raw_merged10"] <= stage["raw_union"]
    assert res["oracle"]["raw_union"] > 0  # the gold sites, asked, cite some gold


def test_abstention_smoke(tmp_path: Path) -> None:
    doc = run_bench("abstention", tmp_path)
    [(name, res)] = doc["results"].items()  # smoke: MTRAG 16's committed fit rows only
    assert name == "mtrag16_fit_v3" and res["answerable"] > 0 and res["unanswerable"] > 0
    assert set(res["arms"]) == {"hansa", "boosted_trees", "random_forest"}
    for arm in res["arms"].values():
        for view in ("in_sample", "out_of_fold"):
            assert 0.0 <= arm[view]["abstain_unanswerable"] <= 1.0 and 0.0 <= arm[view]["answered_answerable"] <= 1.0
        assert 0.0 <= arm["auroc_out_of_fold"] <= 1.0
    # the trees' thresholds keep the answered floor on the very scores they are judged on
    assert res["arms"]["random_forest"]["out_of_fold"]["answered_answerable"] >= doc["params"]["answered"]
    assert set(doc["targets"]) == {"abstain_unanswerable_mtrag16_fit_v3"}


def test_abstention_refuses_rows_without_both_labels(tmp_path: Path) -> None:
    rows = tmp_path / "rows.jsonl"
    rows.write_text('{"model": "abstain", "question_id": "q1", "label": true, "features": {"passages": 2.0}}\n',
                    encoding="utf-8")
    proc = subprocess.run([sys.executable, str(SCRIPTS / "bench_abstention.py"), "--rows", str(rows)],
                          cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2 and "abstain rows of each label" in proc.stderr and not proc.stdout


REFRESH_DRIFT_FIELDS = {"store", "round", "kind", "modularity", "modularity_full_rebuild", "largest_community",
                        "largest_community_full_rebuild", "communities", "communities_full_rebuild",
                        "refresh_seconds", "full_build_seconds", "fallback", "reference_changed"}


def test_refresh_drift_smoke(tmp_path: Path, neo4j_uri: str) -> None:
    from neo4j import GraphDatabase

    with GraphDatabase.driver(neo4j_uri, auth=None) as driver:  # a store left claimed by another test's site
        driver.execute_query("MATCH (n) WHERE any(l IN labels(n) WHERE l STARTS WITH 'Hansa') DETACH DELETE n",
                             database_="neo4j")
    doc = run_bench("refresh_drift", tmp_path, "--neo4j-uri", neo4j_uri)
    rows = doc["results"]["rounds"]
    rounds = doc["params"]["rounds"] + doc["params"]["unchanged_rounds"]
    assert [(r["store"], r["round"]) for r in rows] == [(s, n) for s in ("embedded", "neo4j") for n in range(1, rounds + 1)]
    for r in rows:
        assert REFRESH_DRIFT_FIELDS <= set(r), r
        assert r["communities"] > 0 and r["communities_full_rebuild"] > 0, r
        assert 0 < r["largest_community"] and 0 < r["largest_community_full_rebuild"], r
        assert r["modularity"] <= 1 and 0 < r["modularity_full_rebuild"] <= 1, r  # a drifted set can score below -1 at gamma 8
        assert r["refresh_seconds"] > 0 and r["full_build_seconds"] > 0, r
        assert (r["deleted"] > 0 and r["edited"] > 0) == (r["kind"] == "edit"), r
    for store in ("embedded", "neo4j"):
        assert set(doc["targets"]) >= {f"{store}:modularity", f"{store}:largest_community", f"{store}:refresh_seconds"}
        assert doc["results"]["initial_full_build"][f"{store}/local"]["communities"] > 0  # the default refresh: local


ADVERSARIAL_FIELDS = {"attack", "honest_sites", "questions", "honest_gold_site_recall", "honest_gold_site_recall_baseline",
                      "attacker_answer_share", "attacker_final_reliability_rank", "sites_ranked"}


def test_adversarial_smoke_with_the_learned_router_retrained_from_its_traffic(tmp_path: Path) -> None:
    doc = run_bench("adversarial", tmp_path, "--attacks", "echoer", "--learned-router", "--questions", "12")
    split = doc["params"]["learned_router"]
    assert split["warmup_questions"] + split["measured_questions"] == 12 and split["measured_questions"] >= 4
    for setting in (doc["results"]["baseline"], doc["results"]["records"][0]):
        learned = setting["learned_router"]  # a model was trained from the outcomes the gateway logged
        assert learned["warmup_questions"] == split["warmup_questions"] and learned["rows"] > 0
        assert set(learned["weights"]) and 0.0 <= learned["threshold"] <= 1.0
    echo = doc["results"]["records"][0]
    assert echo["questions"] == split["measured_questions"] and 0.0 <= echo["attacker_routed_share"] <= 1.0
    assert 0.0 <= echo["learned_router"]["attacker_routed_share_warmup"] <= 1.0


def test_adversarial_smoke(tmp_path: Path) -> None:
    doc = run_bench("adversarial", tmp_path)
    records = {r["attack"]: r for r in doc["results"]["records"]}
    assert set(records) == {"routing_hog", "question_hog", "echoer", "injector", "spammer", "contradictor", "colluders", "sleeper"}
    for attack, r in records.items():
        assert ADVERSARIAL_FIELDS <= set(r), attack
        assert r["questions"] == doc["params"]["questions"] >= 4 and r["honest_sites"] == doc["params"]["honest_sites"]
        assert r["honest_gold_site_recall_baseline"] == doc["results"]["baseline"]["honest_gold_site_recall"] > 0
        for key in ("honest_gold_site_recall", "attacker_answer_share", "attacker_routed_share"):
            assert 0.0 <= r[key] <= 1.0, (attack, key)
        attackers = 2 if attack == "colluders" else 1
        assert 1 <= r["attacker_final_reliability_rank"] <= r["sites_ranked"] == r["honest_sites"] + attackers, attack
        assert set(r["sites"]) == set(doc["results"]["baseline"]["sites"]) | ({"zz-attacker", "zz-attacker-2"}
                                                                               if attackers == 2 else {"zz-attacker"})
        assert 0.0 <= r["abstained_share"] <= 1.0 and 0.0 <= r["abstained_share_baseline"] <= 1.0
        assert 0.0 <= r["answer_f1"] <= 1.0 and 0.0 <= r["answered_share"] <= 1.0
        if attack in ("contradictor", "colluders", "sleeper"):  # each answer a liar reached, with its lie
            reached = r["attacker_reached"]
            assert len(reached) == round(r["attacker_answer_share"] * r["questions"]) and all(x["lies"] for x in reached)
        over_time = r["reliability_over_time"]  # read every 25 questions and after the last
        assert over_time[-1]["questions"] == r["questions"] and over_time[-1]["attacker"] == r["attacker_final_reliability"]
    assert records["sleeper"]["honest_calls"] > 0 and records["sleeper"]["questions_after_turning"] >= 0
    assert 0.0 <= records["injector"]["instruction_obeyed_share"] <= 1.0
    # The harness measures what the liars and the hog achieve; a defence may rightly bring any share to 0.
    # The hog's hand-made publication was built and the gateway answered it:
    hog = records["routing_hog"]["hog_publication"]
    assert hog["terms"] > 100 and hog["summaries"] > 20 and isinstance(hog["accepted"], bool)
    # What holds by construction, asserted on these real signed sites (issue 32's probes): the screen
    # keeps every echo of the question and every instruction out of every answer, second hops included,
    # and an echo costs its site (it ends below every honest site).
    echo, injector = records["echoer"], records["injector"]
    assert echo["attacker_routed_share"] > 0 and echo["attacker_answer_share"] == 0.0
    assert echo["attacker_below_every_honest_site"] is True
    assert injector["attacker_routed_share"] > 0
    assert injector["attacker_answer_share"] == 0.0 and injector["instruction_obeyed_share"] == 0.0
    # The newcomer whose summaries are the very questions does not keep them from the honest holders,
    # and its echoes never reach an answer.
    qhog = records["question_hog"]
    assert qhog["hog_publication"]["accepted"] and qhog["hog_publication"]["summaries"] == doc["params"]["questions"]
    assert qhog["attacker_routed_share"] > 0 and qhog["attacker_answer_share"] == 0.0
    assert qhog["honest_gold_site_recall"] >= 0.5 * qhog["honest_gold_site_recall_baseline"] > 0


def test_house_smoke(tmp_path: Path) -> None:
    """The query path is measured on a real (demo) federation: the engine and fusion are on it, and
    their complexity is read from their source."""
    doc = run_bench("house", tmp_path)
    results = doc["results"]
    assert {"gateway/query/engine.py", "gateway/query/fusion.py"} <= set(results["gateway_files"])
    assert results["query_gateway_files"] == len(results["gateway_files"])
    assert results["query_gateway_functions"] > results["query_gateway_files"]
    assert results["product_files"] > results["query_gateway_files"]  # sites answered in this process too
    assert results["query_path_max_cc"] == results["query_path_worst"][0]["cc"] >= 1
    assert set(doc["targets"]) == {"query_gateway_files", "query_gateway_functions", "query_path_max_cc"}


@pytest.mark.neo4j
def test_byograph_smoke(tmp_path: Path, neo4j_uri: str) -> None:
    """An organization graph mapped, communities built, published, queried and uninstalled; the script
    itself fails when the organization's graph changed, and this checks that it said so."""
    doc = run_bench("byograph", tmp_path, "--neo4j-uri", neo4j_uri)
    res = doc["results"]
    org = res["organization"]
    assert org["nodes"] > doc["params"]["paragraphs"] == 150 and org["relationships"] > org["nodes"]
    assert res["organization_unchanged"] == dict.fromkeys(["map", "communities", "publish", "retrieval", "uninstall"], True)
    steps = res["steps"]
    assert steps["map"]["documents_new"] == 150 and steps["map"]["chunks"] >= 150
    assert steps["map"]["entities"] > 0 and steps["map"]["relations_written"] > 0
    assert steps["remap"]["documents_unchanged"] == 150 and steps["remap"]["documents_new"] == 0
    assert steps["communities"]["communities"] > 0 and steps["publish"]["summaries"] == steps["communities"]["communities"]
    assert steps["retrieval"]["questions"] == 5 and steps["uninstall"]["hansa_nodes_removed"] > 0
    assert res["hansa_nodes_left"] == 0
    assert doc["targets"]["organization unchanged after map, communities, publish, retrieval, uninstall"]["met"] is True


def test_reading_smoke(tmp_path: Path) -> None:
    doc = run_bench("reading", tmp_path, "--cap", "64")
    rows = doc["results"]["variants"]
    batchings = ("padded", "micro_batches", "micro_batches_cap64")
    assert {(r["threads"], r["batching"], r["pool"]) for r in rows} == {
        (t, b, p) for t in ("ort_default_threads", "one_thread") for b in batchings for p in (8, 12)}
    assert all(r["n"] == 6 and r["p50_ms"] > 0 for r in rows)
    agreement = doc["results"]["agreement"]
    assert set(agreement) == {"padded_vs_micro_batches_pool_8", "padded_vs_micro_batches_pool_12",
                              "padded_pool8_vs_padded_pool_max"}
    assert all(a["pools"] == 6 and 0.0 <= a["same_span_share"] <= 1.0 for a in agreement.values())
    # the first 8 sentences of one question's pool read at pool 8 and at pool 12
    assert agreement["padded_pool8_vs_padded_pool_max"]["sentences"] == 6 * 8
    quality = doc["results"]["quality"]
    assert tuple(quality) == batchings and all(q["report"]["questions"] > 0 for q in quality.values())
    assert "against_padded" not in quality["padded"]
    assert 0.0 <= quality["micro_batches"]["against_padded"]["same_answer_span"] <= 1.0
    assert set(doc["targets"]) == {"reading_p50_ms_default_pool", "reading_p50_ms_max_pool"}


def test_storage_smoke(tmp_path: Path) -> None:
    """A 2-site SQuAD federation publishes to a real gateway; its bytes by part and routing from int8
    codes against float32 come back side by side, the codes checked against the published vectors."""
    doc = run_bench("storage", tmp_path)
    res = doc["results"]
    st = res["storage"]
    assert res["codes_checked_against_published_vectors"] == st["summaries"] > 0
    assert st["bytes"]["int8"]["vectors"] * 4 == st["bytes"]["float32"]["vectors"] > 0
    assert st["bytes"]["int8"]["head"] == st["bytes"]["float32"]["head"] > 0
    assert 0 < st["share_of_raw"]["int8"]["total"] < st["share_of_raw"]["float32"]["total"]
    assert 0 < st["milvus_lite_vector_disk_bytes"]["int8"] < st["milvus_lite_vector_disk_bytes"]["float32"]
    routing = res["routing"]
    assert routing["questions_with_gold"] > 0 and 0 <= routing["max_abs_summary_score_difference"] < 0.02
    assert set(routing["gold_site_recall_at_k"]) == {f"{r}_{v}" for r in ("summaries", "summary_vectors")
                                                     for v in ("float32", "int8")}
    assert all(0 <= a <= 1 for a in routing["top_k_site_agreement"].values())
    assert set(doc["targets"]) == {"gateway_storage_share_of_raw"}


def test_levels_smoke(tmp_path: Path) -> None:
    doc = run_bench("levels", tmp_path, "--workdir", str(tmp_path / "sites"))
    recall = doc["results"]["gold_site_recall_at_k"]
    assert {"level0", "level1", "max_levels", "descend", "fine_plus_coarse"} <= set(recall)
    for curve in recall.values():
        assert len(curve) == 8 and all(0.0 <= a <= b <= 1.0 for a, b in zip(curve, curve[1:])), curve
    storage = doc["results"]["storage"]
    assert storage["level0"]["summaries"] > storage["level1"]["summaries"] > 0
    assert doc["params"]["questions"] > 0 and doc["params"]["sites_built"] == 4
