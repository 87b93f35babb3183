"""A site whose vectors live in a Milvus server (`milvus-lite server`, the session fixture), not in
an embedded Milvus Lite directory: the configuration docs/site-admin.md gives for a site whose API runs
while other jobs (ingest, communities, publish) use the same vectors from other processes."""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Callable

from hansa.core.config import Config
from hansa.plugin.retrieval import retrieve
from hansa.plugin.site import CHUNKS, SENTENCES, SUMMARIES, SiteContext
from hansa.sync.wire import RetrieveRequest
from tests.milvus_client import server_client


def test_a_site_on_a_milvus_server_ingests_answers_and_shares_it_with_another_process(
    tmp_path: Path, milvus_server_uri: str, make_config: Callable[..., Config], corpus: dict[str, str]
) -> None:
    from hansa.plugin.communities import build_communities
    from hansa.plugin.ingest import ingest_paths
    from hansa.plugin.install import install_site

    docs = tmp_path / "docs"
    docs.mkdir()
    for doc_id, text in corpus.items():  # ids are "docs/<file>": source "docs", the folder's name
        (docs / Path(doc_id).name).write_text(text, encoding="utf-8")
    cfg = make_config(tmp_path / "home", HANSA_MILVUS_URI=milvus_server_uri)
    assert cfg.milvus_uri == milvus_server_uri
    with SiteContext.open(cfg) as ctx:
        install_site(ctx)
        report = ingest_paths(ctx, [docs])
        build_communities(ctx)
        assert not (tmp_path / "home" / "milvus.db").exists(), "no embedded Milvus Lite directory was made"

        answer = retrieve(ctx, RetrieveRequest(question="Who designed the Brightwater Lighthouse?", top_k=3))
        assert answer.citations[0].doc_id == "docs/lighthouse.md"
        assert "Margaret Ellison" in answer.answer

        # While this process holds the site open, another process reads the same collections: with
        # Milvus Lite's directory lock this is exactly what failed.
        reader = textwrap.dedent(
            """
            import json, sys
            from hansa.adapters.vector.milvus import MilvusVectorStore
            with MilvusVectorStore(sys.argv[1], prefix=sys.argv[2]) as store:
                print(json.dumps({name: store.count(name) for name in sys.argv[3:]}))
            """
        )
        proc = subprocess.run(
            [sys.executable, "-c", reader, milvus_server_uri, cfg.milvus.collection_prefix, CHUNKS, SUMMARIES, SENTENCES],
            capture_output=True, text=True, timeout=120,
        )
        assert proc.returncode == 0, proc.stderr[-2000:]
        counts = json.loads(proc.stdout.strip().splitlines()[-1])
        assert counts[CHUNKS] == report.chunks == ctx.vectors.count(CHUNKS)
        assert counts[SUMMARIES] == ctx.vectors.count(SUMMARIES) >= 1
        assert counts[SENTENCES] == ctx.vectors.count(SENTENCES) > counts[CHUNKS]  # answer sentences, stored at ingest


def test_doctor_checks_the_collections_on_a_milvus_server(tmp_path: Path, milvus_server_uri: str) -> None:
    from click.testing import CliRunner

    from hansa.cli import main

    env = {"HANSA_SITE_SITE_ID": "acme", "HANSA_MILVUS_URI": milvus_server_uri, "HANSA_CONFIG": None,
           "HANSA_SITE_GATEWAY_URL": None}

    def site(*args: str):
        return CliRunner().invoke(main, ["--home", str(tmp_path / "home"), "site", *args], env=env)

    assert site("install").exit_code == 0
    found = {c["name"]: c for c in json.loads(site("doctor", "--json").stdout)["checks"]}
    assert found["vector store reachable"] == {"name": "vector store reachable", "status": "pass",
                                               "detail": f"Milvus server {milvus_server_uri}", "hint": ""}
    assert found["vector collections"]["detail"] == ("hansa_chunks (384-d, 0 rows), hansa_summaries (384-d, 0 rows), "
                                                  "hansa_sentences (384-d, 0 rows)")

    client = server_client(milvus_server_uri)
    try:
        client.drop_collection("hansa_chunks")
    finally:
        client.close()
    res = site("doctor")
    assert res.exit_code == 1
    assert f"FAIL  vector collections: collection(s) hansa_chunks missing in Milvus server {milvus_server_uri}" in res.stdout
