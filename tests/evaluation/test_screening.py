"""`python -m hansa.evaluation.screening`: how often the gateway's screen flags honest SQuAD text."""
from __future__ import annotations

from pathlib import Path

from hansa.evaluation.screening import main


def test_the_screen_flags_no_honest_sentence_among_the_first_questions(datasets_dir: Path, capsys) -> None:
    assert main(["--squad", str(datasets_dir / "squad"), "--limit", "300"]) == 0
    out = capsys.readouterr().out
    assert "echo: 0 of " in out and "over 300 questions" in out
    assert "instruction: 0 of " in out  # every corpus sentence
