"""The calibration file as a model of core/model.py (gateway.query.calibration.CalibrationFile): every
calibration committed under benchmarks/ (written by the hand-written writer before the model layer)
still loads to the same content, and a malformed file is refused naming the field."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from hansa.core.errors import InputError
from hansa.gateway.query.calibration import Calibration, read_calibration

BENCHMARKS = Path(__file__).resolve().parents[3] / "benchmarks"
COMMITTED = sorted([*BENCHMARKS.glob("calibration-*.json"), *BENCHMARKS.glob("gate-calibration*.json")])


def test_the_committed_calibrations_are_found() -> None:
    kinds = {key for path in COMMITTED for key in json.loads(path.read_text())}
    assert len(COMMITTED) >= 15 and {"gate", "abstain", "escalate", "escalate_schedule", "tiers"} <= kinds


@pytest.mark.parametrize("path", COMMITTED, ids=lambda p: p.name)
def test_a_committed_calibration_loads_and_writes_back_what_it_read(path: Path, tmp_path: Path) -> None:
    raw = json.loads(path.read_text())
    cal = read_calibration(path)
    assert cal.to_json() == raw
    cal.save(tmp_path / "again.json")
    assert read_calibration(tmp_path / "again.json").to_json() == raw


def test_the_calibration_inside_a_benchmark_result_loads() -> None:
    raw = json.loads((BENCHMARKS / "gate_calibration.json").read_text())["calibration"]
    assert Calibration.from_json(raw).to_json() == raw


@pytest.fixture(scope="module")
def full() -> dict:
    """Every model and the tiers, from two committed calibrations (none holds all of them)."""
    tiers = json.loads((BENCHMARKS / "calibration-mtrag16-tiers.json").read_text())["tiers"]
    return {**json.loads((BENCHMARKS / "calibration-mtrag16-escalation.json").read_text()), "tiers": tiers}


@pytest.mark.parametrize("change, message", [
    (lambda c: c["gate"].update(threshold=2), "calibration: 'gate.threshold': input should be less than or equal to 1"),
    (lambda c: c["gate"].update(coefficients=[1, 2]), "calibration: 'gate': 'coefficients' must hold one number per feature"),
    (lambda c: c["gate"].update(features=["shoe_size"] * len(c["gate"]["features"])), "'gate.features[0]': input should be"),
    (lambda c: c["abstain"].update(intercept="1"), "'abstain.intercept' has the wrong type"),
    (lambda c: c["abstain"]["scale"].__setitem__(0, 0), "'abstain.scale[0]': input should be greater than 0"),
    (lambda c: c["escalate"].update(fit=[]), "'escalate.fit' has the wrong type"),
    (lambda c: c.update(version=2), "calibration: 'version': input should be 1"),
    (lambda c: c.update(extra=1), "calibration: unknown keys ['extra']"),
    (lambda c: c["tiers"].update(high_gap=0.9), "'tiers': tier cut-offs must satisfy"),
    (lambda c: c["tiers"].pop("potential_gap"), "calibration: missing 'tiers.potential_gap'"),
    (lambda c: c["tiers"].update(gap=0.1), "unknown keys ['tiers.gap']"),
    (lambda c: c.update(reader={"floor": 2.0}), "'reader.floor': input should be less than or equal to 1"),
    (lambda c: c.update(escalate_schedule=[1, True]), "'escalate_schedule[1]' has the wrong type"),
    (lambda c: c.update(escalate_schedule=[2, 2]), "an escalation schedule is 1 to"),
])
def test_a_malformed_calibration_is_refused_naming_the_field(full: dict, change, message: str) -> None:
    bad = json.loads(json.dumps(full))
    change(bad)
    with pytest.raises(InputError) as refused:
        Calibration.from_json(bad)
    assert message in str(refused.value)


def test_non_finite_numbers_are_refused(full: dict, tmp_path: Path) -> None:
    path = tmp_path / "cal.json"
    n = len(full["gate"]["mean"])
    path.write_text(json.dumps({**full, "gate": {**full["gate"], "mean": [float("nan")] * n}}))
    with pytest.raises(InputError, match=rf"calibration {path} is unusable: calibration: 'gate.mean\[0\]': input should be a finite"):
        read_calibration(path)


def test_absent_parts_are_left_out_and_a_null_reads_as_absent(full: dict) -> None:
    cal = Calibration.from_json({"version": 1, "gate": full["gate"], "abstain": None, "tiers": None})
    assert cal.abstain is None and cal.escalate is None and cal.escalate_schedule == () and cal.tiers is None
    assert cal.to_json() == {"version": 1, "gate": full["gate"]}


def test_every_part_round_trips(full: dict) -> None:
    cal = Calibration.from_json(full)
    assert None not in (cal.gate, cal.abstain, cal.escalate, cal.tiers) and cal.to_json() == full
