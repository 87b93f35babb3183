"""`hansa eval` end to end on a small slice of MTRAG: every strategy, both federation sizes, real
sites and gateway over loopback HTTP. Asserts the report's shape and the invariants that must hold
whatever the numbers (the oracle asks exactly the gold sites; exhaustive asks every site)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from hansa.cli import main

pytestmark = pytest.mark.slow


def test_eval_smoke_writes_one_record_per_federation_and_strategy(tmp_path: Path, shared_dir: Path) -> None:
    out, plot = tmp_path / "eval.json", tmp_path / "eval.png"
    result = CliRunner().invoke(main, [
        "--home", str(tmp_path / "home"), "--log-level", "warning", "eval",
        "--data", str(shared_dir / "datasets" / "mtrag"), "--sites", "4,8", "--limit", "6",
        "--max-passages", "12", "--out", str(out), "--plot", str(plot), "--workdir", str(tmp_path / "work"),
    ])
    assert result.exit_code == 0, result.output
    doc = json.loads(out.read_text())
    assert plot.stat().st_size > 0 and "gold passages" in doc["caveat"]
    records = {(r["federation_sites"], r["strategy"]): r for r in doc["records"]}
    for n in (4, 8):
        for strategy in ("hansa", "exhaustive", "top1", "oracle", "full_information"):
            r = records[(n, strategy)]
            assert r["questions"] == 6
            assert 0.0 <= r["gold_site_recall"] <= 1.0 and 0.0 <= r["evidence_recall_at_10"] <= 1.0
            assert r["bytes_per_query"] > 0 and r["latency_ms_p50"] > 0
        assert records[(n, "oracle")]["gold_site_recall"] == 1.0
        assert records[(n, "exhaustive")]["gold_site_recall"] == 1.0
        built = len(doc["federations"][f"fed{n}"]["sites"])  # a hash split may leave a shard empty
        assert 4 <= built <= n
        assert records[(n, "exhaustive")]["sites_called_per_query"] == built
        assert records[(n, "top1")]["sites_called_per_query"] == 1.0
        curves = doc["federations"][f"fed{n}"]["routing_gold_site_recall_at_k"]
        assert set(curves) == {"summaries", "full_information", "centroid"}
    assert records[(1, "centralized")]["sites_called_per_query"] == 1.0
