"""The abstention model the reader's card ships (evaluation/reader_abstain.py)."""
from __future__ import annotations

import json
import shutil

import pytest

from hansa.core.errors import InputError
from hansa.evaluation.reader_abstain import CARD_BEGIN, fit, main
from hansa.gateway.query.calibrate import Row, reader_abstain_threshold, write_rows
from hansa.gateway.query.calibration import SCALE_FREE_FEATURES, Example

SHA = "a" * 64


def _row(i: int, best: float, relevance: float, answerable: bool, sites: float = 1.0, sha: str = SHA) -> Row:
    features = {"best_relevance": relevance, "margin": 0.1, "coverage": 0.5, "agreement": 0.1, "passages": 3.0,
                "sites_answered": sites, "reader_best": best, "answered": 1.0}
    return Row("reader", Example(features, answerable, f"q{i}"), site=sha)


def _data() -> dict[str, list[Row]]:
    # one data set reads high, the other low: one threshold over both pooled would refuse most of
    # the low one's answerable questions
    high = [_row(i, 0.6 + 0.03 * i, 0.7, True, sites=5.0) for i in range(10)] + \
        [_row(20 + i, 0.1 + 0.02 * i, 0.3, False, sites=5.0) for i in range(6)]
    low = [_row(40 + i, 0.3 + 0.02 * i, 0.5, True) for i in range(10)] + \
        [_row(60 + i, 0.05 + 0.02 * i, 0.2, False) for i in range(6)]
    return {"high": high, "low": low}


def test_the_packaged_model_weighs_scale_free_features_and_answers_the_share_in_every_data_set() -> None:
    data = _data()
    model = fit(data, SHA, 0.8)
    assert model.features == SCALE_FREE_FEATURES + ("reader_best",)  # not sites_answered, passages, ...
    assert model.fit["model_sha256"] == SHA and model.fit["data"] == ["high", "low"]
    for rows in data.values():
        answerable = [r.example for r in rows if r.example.label]
        kept = sum(model.score(e.features) >= model.threshold for e in answerable)
        assert kept >= 0.8 * len(answerable)
    assert model.threshold == min(reader_abstain_threshold(model, rows, 0.8) for rows in data.values())


def test_rows_of_another_reader_are_refused() -> None:
    data = _data()
    data["low"] = [Row(r.model, r.example, site="b" * 64) for r in data["low"]]
    with pytest.raises(InputError, match="collect them again"):
        fit(data, SHA, 0.8)


def test_write_puts_the_model_in_the_card_and_the_gateway_reads_it(tmp_path) -> None:
    from hansa.adapters.reader.onnx import META, PACKAGED_DIR
    from hansa.gateway.query.reading import open_reading

    model_dir = tmp_path / "model"
    shutil.copytree(PACKAGED_DIR, model_dir)
    sha = json.loads((model_dir / META).read_text())["graph"]["sha256"]
    paths = []
    for name, rows in _data().items():
        path = tmp_path / f"{name}.jsonl"
        write_rows(path, [Row(r.model, r.example, site=sha) for r in rows])
        paths += ["--data", str(path)]
    main([str(model_dir), *paths, "--min-answered", "0.8", "--write"])
    stage = open_reading(str(model_dir))
    assert stage is not None and stage.abstain is not None and stage.abstain.fit["data"] == ["high", "low"]
    card = (model_dir / "README.md").read_text()
    main([str(model_dir), *paths, "--min-answered", "0.8", "--write"])  # a refit replaces its section
    assert (model_dir / "README.md").read_text().count(CARD_BEGIN) == 1 and CARD_BEGIN in card
