"""The learned router's models committed under benchmarks/router-models (written by `hansa gateway
router train`) load and save back byte for byte, so their checksums and versions hold when the code
that reads and writes them moves onto the model layer (issue 33 item 2); a damaged file is not used."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from hansa.gateway.query.learned.model import _checksum, load_model

REPO = Path(__file__).resolve().parents[3]
COMMITTED = sorted((REPO / "benchmarks" / "router-models").glob("*/model.json"))


def test_there_are_committed_models() -> None:
    assert len(COMMITTED) >= 4


@pytest.mark.parametrize("path", COMMITTED, ids=lambda p: p.parent.name)
def test_committed_models_load_and_save_back_the_same_bytes(path: Path, tmp_path: Path) -> None:
    model = load_model(path)
    assert model is not None and len(model.weights) == len(model.feature_names)
    model.save(tmp_path / "model.json")
    assert (tmp_path / "model.json").read_bytes() == path.read_bytes()
    assert (tmp_path / "models" / f"{model.version}.json").read_bytes() == path.read_bytes()


@pytest.mark.parametrize("change", [
    lambda d: d.update(weights=d["weights"][:-1]),
    lambda d: d.update(scale=[0.0] * len(d["scale"])),
    lambda d: d.update(bias="high"),
    lambda d: d.update(extra=1),
    lambda d: d.pop("rows"),
    lambda d: d.update(format="other/1"),
])
def test_a_damaged_model_with_a_fresh_checksum_is_not_used(change, tmp_path: Path) -> None:
    doc = json.loads(COMMITTED[0].read_text(encoding="utf-8"))
    change(doc)
    doc["checksum"] = _checksum(doc)
    path = tmp_path / "model.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    assert load_model(path) is None
