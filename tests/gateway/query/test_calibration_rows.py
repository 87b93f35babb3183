"""The calibration rows committed under benchmarks/calibration-rows (written by `hansa gateway
calibrate --rows` over the months) load, and write back byte for byte: the rows file's shape must
not move when the code that reads and writes it does (issue 33 item 2)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from hansa.core.errors import InputError
from hansa.gateway.query.calibrate import read_rows, write_rows

REPO = Path(__file__).resolve().parents[3]
COMMITTED = sorted((REPO / "benchmarks" / "calibration-rows").glob("*.jsonl"))


def test_the_committed_rows_have_steps_and_sites() -> None:
    texts = [p.read_text(encoding="utf-8") for p in COMMITTED]
    assert len(COMMITTED) >= 10 and any('"step": ' in t for t in texts) and any('"site": ' in t for t in texts)


@pytest.mark.parametrize("path", COMMITTED, ids=lambda p: p.name)
def test_committed_rows_load_and_write_back_the_same_bytes(path: Path, tmp_path: Path) -> None:
    rows = read_rows(path)
    assert rows and all(isinstance(v, float) for r in rows[:50] for v in r.example.features.values())
    write_rows(tmp_path / path.name, rows)
    assert (tmp_path / path.name).read_bytes() == path.read_bytes()


GOOD = {"model": "gate", "origin": "govt", "question_id": "q1", "label": True, "features": {"coverage": 0.5}}


@pytest.mark.parametrize("change, named", [
    ({"model": "nope"}, "model"),
    ({"label": 1}, "label"),
    ({"features": {"coverage": "high"}}, "coverage"),
    ({"features": {"coverage": float("nan")}}, "coverage"),
    ({"model": "escalate", "step": 0}, "step"),
    ({"step": -1}, "step"),
    ({"step": True}, "step"),
    ({"model": "tiers", "features": {"ranked": 1.0}}, "gap"),
    ({"model": "reader", "features": {}}, "reader_best"),
])
def test_a_bad_row_is_refused_naming_the_line_and_field(change: dict[str, object], named: str, tmp_path: Path) -> None:
    path = tmp_path / "rows.jsonl"
    path.write_text(json.dumps(GOOD) + "\n" + json.dumps({**GOOD, **change}) + "\n", encoding="utf-8")
    with pytest.raises(InputError, match=f"{path}:2: ") as err:
        read_rows(path)
    assert named in str(err.value)
