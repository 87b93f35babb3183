"""The reader's floors per kind (evaluation.reader_kinds): each fit on fit rows only, the lowest over
corpora, written into reader.json and the card without losing the rest of either."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

from hansa.adapters.reader.onnx import META, PACKAGED_DIR
from hansa.evaluation.reader_kinds import CARD_BEGIN, answered_table, card_section, fit_floors, write


def rows(dataset: str, kind: str, split: str, scores: list[float]) -> list[dict]:
    return [{"dataset": dataset, "split": split, "kind": kind, "answerable": True, "score": s} for s in scores]


def test_each_kind_answers_its_share_of_fit_questions_in_every_corpus() -> None:
    data = (rows("squad", "factoid", "fit", [0.9] * 9 + [0.5]) + rows("mtrag", "factoid", "fit", [0.8] * 9 + [0.3])
            + rows("mtrag", "descriptive", "fit", [0.2] * 49 + [0.01]) + rows("mtrag", "descriptive", "report", [0.0] * 5))
    floors = fit_floors(data, {"factoid": 0.9, "descriptive": 0.98})
    assert floors == {"factoid": 0.8, "descriptive": 0.2}  # mtrag's factoids sit lower; report rows count for nothing
    table = answered_table(data, floors, single=0.6)
    report = next(r for r in table if r["split"] == "report")
    assert report["answered_at_kind_floor"] == 0.0 and report["answerable"] == 5


def test_writing_keeps_the_single_floor_and_replaces_the_cards_section(tmp_path: Path) -> None:
    model = tmp_path / "model"
    model.mkdir()
    for name in (META, "README.md"):
        shutil.copy(PACKAGED_DIR / name, model / name)
    before = json.loads((model / META).read_text())["calibration"]["floor"]
    for floors in ({"factoid": 0.2, "descriptive": 0.05}, {"factoid": 0.3, "descriptive": 0.1}):
        write(model, floors, card_section(floors, before, []))
    calibration = json.loads((model / META).read_text())["calibration"]
    assert calibration["floor"] == before and calibration["floors"] == {"factoid": 0.3, "descriptive": 0.1}
    card = (model / "README.md").read_text()
    assert card.count(CARD_BEGIN) == 1 and "descriptive floor **0.100**" in card and "## Training" in card
    # replaced where it stood: the packaged card's section after it (abstention after reading) stays after it
    assert card.index(CARD_BEGIN) < card.index("## Abstention after reading")


def test_a_relative_share_chosen_on_the_fit_split_is_written_with_its_provenance(tmp_path: Path) -> None:
    model = tmp_path / "model"
    model.mkdir()
    for name in (META, "README.md"):
        shutil.copy(PACKAGED_DIR / name, model / name)
    floors = {"factoid": 0.2, "descriptive": 0.05}
    write(model, floors, card_section(floors, 0.3, [], 0.8), 0.8)
    calibration = json.loads((model / META).read_text())["calibration"]
    assert calibration["relative"] == 0.8 and "--split fit" in calibration["relative_fit"]
    assert "at least **0.8** of the best sentence's score" in (model / "README.md").read_text()
    write(model, floors, card_section(floors, 0.3, []))  # refitting floors alone keeps the share
    assert json.loads((model / META).read_text())["calibration"]["relative"] == 0.8
