"""The reader on ONNX Runtime: the packaged model reads as its card says, its files are checked,
and the training command makes a usable model (a tiny one: the CI smoke of training)."""
from __future__ import annotations

import itertools
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from hansa.adapters.reader.onnx import (META, PACKAGED_DIR, PADDED_RUN_COST, OnnxReader, best_span, best_spans,
                                        load_files, plan_batches)
from hansa.core.errors import BackendError
from hansa.gateway.query.reading import open_reading

QUESTION = "What year was Casimir Pulaski born in Warsaw?"
# squad:Warsaw#000 and its question 5733a5f54776f41900660f48 (SQuAD v1.1 dev, CC BY-SA 4.0): a
# report-split question no training stage read (stage two reads fit questions of half the dev articles)
ANSWER = "Casimir Pulaski, a Polish general and hero of the American Revolutionary War, was born here in 1745."
NEAR = ("Though Chopin was born in the village of Żelazowa Wola, about 60 km (37 mi) from Warsaw, he moved to the "
        "city with his family when he was seven months old.")
FILLER = "The college also runs a bookstore and two dining halls."


def test_best_span_keeps_order_length_and_the_allowed_tokens() -> None:
    start = np.array([9.0, 1.0, 5.0, 0.0, 0.0])
    end = np.array([0.0, 0.0, 1.0, 4.0, 9.0])
    allowed = np.array([False, True, True, True, False])  # token 0 is the question, 4 the [SEP]
    assert best_span(start, end, allowed) == (2, 3)
    assert best_span(start, end, allowed, max_tokens=1) == (2, 2)
    assert best_span(start, end, np.zeros(5, dtype=bool)) == (-1, -1)


def _brute_force_span(start: np.ndarray, end: np.ndarray, allowed: np.ndarray, max_tokens: int) -> tuple[int, int]:
    best, at = -np.inf, (-1, -1)
    for i in range(len(start)):
        for j in range(i, min(len(start), i + max_tokens)):
            if allowed[i] and allowed[j] and start[i] + end[j] > best:  # strict: the first (i, j) keeps a tie
                best, at = start[i] + end[j], (i, j)
    return at


def test_best_spans_of_a_batch_are_the_brute_force_spans_of_each_row() -> None:
    rng = np.random.default_rng(30)
    for trial in range(200):
        rows, width, max_tokens = int(rng.integers(1, 6)), int(rng.integers(1, 50)), int(rng.integers(1, 40))
        # integer logits half the time: ties, which must go to the smallest start, then the smallest end
        draw = (lambda: rng.integers(-3, 4, (rows, width))) if trial % 2 else (lambda: rng.normal(size=(rows, width)))
        start, end = draw().astype(np.float32), draw().astype(np.float32)
        allowed = rng.random((rows, width)) < rng.random()
        got = best_spans(start, end, allowed, max_tokens)
        want = [_brute_force_span(start[r], end[r], allowed[r], max_tokens) for r in range(rows)]
        assert [tuple(map(int, g)) for g in got] == want


def _plan_cost(lengths: list[int], runs: list[list[int]], run_cost: int) -> int:
    return sum(run_cost + len(run) * max(lengths[i] for i in run) for run in runs)


def _cheapest_plan_cost(lengths: list[int], run_cost: int, max_batch: int) -> int:
    """Every way to cut the pairs, longest first, into consecutive runs."""
    ordered = sorted(lengths, reverse=True)
    n, best = len(ordered), None
    for cuts in itertools.product((False, True), repeat=max(0, n - 1)):
        bounds = [0] + [k + 1 for k, cut in enumerate(cuts) if cut] + [n]
        runs = [list(range(a, b)) for a, b in zip(bounds, bounds[1:])]
        if all(len(run) <= max_batch for run in runs):
            cost = _plan_cost(ordered, runs, run_cost)
            best = cost if best is None else min(best, cost)
    return best or 0


def test_plan_batches_reads_every_pair_once_at_the_least_cost() -> None:
    rng = np.random.default_rng(7)
    for _ in range(100):
        lengths = [int(x) for x in rng.integers(8, 97, int(rng.integers(1, 11)))]
        run_cost = int(rng.integers(0, 40))
        runs = plan_batches(lengths, run_cost, max_batch=4)
        assert sorted(i for run in runs for i in run) == list(range(len(lengths)))
        assert all(0 < len(run) <= 4 for run in runs)
        assert _plan_cost(lengths, runs, run_cost) == _cheapest_plan_cost(lengths, run_cost, 4)
    lengths = [20, 60, 21, 59, 58]
    assert plan_batches(lengths, 12) == [[1, 3, 4], [2, 0]]  # longest first; 20 and 21 padded together
    assert plan_batches(lengths, PADDED_RUN_COST) == [[1, 3, 4, 2, 0]]  # the one padded batch of before
    assert plan_batches(lengths, -1) == [[1], [3], [4], [2], [0]]  # each pair alone
    assert plan_batches([], 12) == []


def test_the_packaged_reader_finds_the_answer_and_its_words() -> None:
    reader = OnnxReader()
    floor = reader.calibration["floor"]
    answer, near, filler, empty = reader.read(QUESTION, [ANSWER, NEAR, FILLER, " "])
    assert answer.score >= floor > filler.score
    # the near miss (another person born near Warsaw) ranks below the answer, yet above the floor:
    # the reader's known weakness, reported in its card (SQuAD 2.0 AUROC)
    assert answer.score > near.score > filler.score
    assert answer.span == "1745" and ANSWER[answer.start:answer.end] == "1745"
    assert empty.score == 0.0 and empty.span == ""
    assert reader.read(QUESTION, []) == []
    stage = open_reading("packaged")
    assert stage is not None and stage.floor == floor and stage.reader.model_sha256 == load_files().sha256


def test_readings_come_back_in_the_order_of_their_sentences_whatever_runs_read_them() -> None:
    """Runs go longest first; each reading must still land at its own sentence's place."""
    pool = [FILLER, NEAR, "", ANSWER, FILLER + " " + NEAR, "Warsaw.", FILLER]
    for run_cost in (-1, 12, PADDED_RUN_COST):
        readings = OnnxReader(run_cost=run_cost).read(QUESTION, pool)
        assert len(readings) == len(pool) and readings[2].score == 0.0
        assert readings[3].span == "1745" and readings[3].score == max(r.score for r in readings)
        assert all(r.span == s[r.start:r.end] for r, s in zip(readings, pool) if r.span)
    alone = OnnxReader(run_cost=-1)
    assert alone.read(QUESTION, pool[::-1]) == alone.read(QUESTION, pool)[::-1]  # no company, no order


def _copy(tmp_path: Path) -> Path:
    target = tmp_path / "model"
    shutil.copytree(PACKAGED_DIR, target)
    return target


def test_a_corrupt_or_missing_file_is_refused_naming_it_and_the_command(tmp_path: Path) -> None:
    model = _copy(tmp_path)
    graph = model / json.loads((model / META).read_text())["graph"]["file"]
    data = bytearray(graph.read_bytes())
    data[len(data) // 2] ^= 0xFF
    graph.write_bytes(bytes(data))
    with pytest.raises(BackendError, match=rf"{graph.name}.*does not match.*hansa.evaluation.reader_train"):
        OnnxReader(model)
    graph.unlink()
    with pytest.raises(BackendError, match=rf"{graph.name} is missing.*hansa.evaluation.reader_train"):
        OnnxReader(model)
    (model / META).write_text("{not json")
    with pytest.raises(BackendError, match="not a reader description"):
        load_files(model)


def test_training_makes_a_model_the_gateway_can_read_with(tmp_path: Path, shared_dir: Path) -> None:
    from hansa.evaluation.reader_train import main as train
    from hansa.evaluation.reader import main as measure

    out = tmp_path / "tiny"
    squad = shared_dir / "datasets" / "squad"
    train(["--squad", str(squad), "--out", str(out), "--questions", "24", "--layers", "1", "--freeze-layers", "0",
           "--threads", "1"])
    assert json.loads((out / "train.json").read_text())["pairs"] > 24
    measure([str(out), "--squad", str(squad), "--limit", "40", "--write"])
    meta = json.loads((out / META).read_text())
    assert meta["graph"]["file"] in ("reader.onnx", "reader-int8.onnx") and 0.0 <= meta["calibration"]["floor"] <= 1.01
    card = (out / "README.md").read_text()
    assert meta["graph"]["sha256"] in card and "CC BY-SA 4.0" in card
    readings = OnnxReader(out).read(QUESTION, [ANSWER, FILLER])
    assert len(readings) == 2 and all(0.0 <= r.score <= 1.0 for r in readings)

    # stage two continues stage one's graph (contrast twins, SQuAD 2.0's fit unanswerables)
    second = tmp_path / "tiny2"
    train(["--squad", str(squad), "--out", str(second), "--stage", "contrast", "--init", str(out), "--questions", "16",
           "--dev-questions", "8", "--layers", "1", "--freeze-layers", "0", "--threads", "1", "--lr", "0"])
    info = json.loads((second / "train.json").read_text())
    assert info["init"]["args"]["stage"] == "base" and info["pairs"] > 16
    # lr 0: the continued graph holds stage one's weights, every one of them found in stage one's graph
    import onnxruntime as ort
    from transformers import AutoTokenizer

    feed = dict(AutoTokenizer.from_pretrained(_packaged())(["who built it?"], ["Eiffel built it in 1889."], return_tensors="np"))
    first, continued = (ort.InferenceSession(str(d / "reader.onnx")).run(None, feed) for d in (out, second))
    assert np.allclose(first[0], continued[0], atol=1e-4) and np.allclose(first[1], continued[1], atol=1e-3)
    measure([str(second), "--squad", str(squad), "--limit", "40", "--write"])
    assert "Stage two" in (second / "README.md").read_text()
    # the package ships only the int8 graph: a run continues it from its weights, dequantized
    (second / "reader.onnx").unlink()
    third = tmp_path / "tiny3"
    train(["--squad", str(squad), "--out", str(third), "--stage", "contrast", "--init", str(second), "--questions", "8",
           "--dev-questions", "4", "--off-topic", "1", "--layers", "1", "--freeze-layers", "0", "--threads", "1", "--lr", "0"])
    quantized, dequantized = (ort.InferenceSession(str(d)).run(None, feed)
                              for d in (second / "reader-int8.onnx", third / "reader.onnx"))
    assert np.allclose(quantized[0], dequantized[0], atol=0.1)
    # where the accelerator's Python cannot build pairs: pairs written here, trained on from the file, the weights
    # saved and the graphs exported here; lr 0 and the same seed, so the same graph as training from SQuAD directly
    pairs, run, exported = tmp_path / "pairs.json.gz", tmp_path / "run", tmp_path / "exported"
    train(["--squad", str(squad), "--questions", "24", "--write-pairs", str(pairs)])
    train(["--pairs", str(pairs), "--out", str(run), "--state-out", "--layers", "1", "--freeze-layers", "0", "--threads", "1",
           "--lr", "0"])
    assert sorted(p.name for p in run.iterdir()) == ["state-00.safetensors", "train.json"]
    train(["--export-state", str(run), "--out", str(exported)])
    direct = tmp_path / "direct"
    train(["--squad", str(squad), "--out", str(direct), "--questions", "24", "--layers", "1", "--freeze-layers", "0",
           "--threads", "1", "--lr", "0"])
    from_file, from_squad = (ort.InferenceSession(str(d / "reader.onnx")).run(None, feed) for d in (exported, direct))
    assert np.allclose(from_file[0], from_squad[0], atol=1e-5)
    assert json.loads((exported / "train.json").read_text())["pairs_files"] == [
        {"stage": "base", "questions": 24, "dev_questions": 0, "off_topic": 0, "seed": 13}]
    measure([str(exported), "--squad", str(squad), "--limit", "40", "--write"])
    card = (exported / "README.md").read_text()
    assert "--write-pairs PAIRS1 --questions 24" in card and "--export-state RUN" in card
    # a lost shard is refused, naming the directory, before any graph is written
    (run / "state-00.safetensors").rename(tmp_path / "elsewhere.safetensors")
    with pytest.raises(SystemExit, match=r"--export-state: .*run holds no train.json and state-NN"):
        train(["--export-state", str(run), "--out", str(tmp_path / "never")])
    assert not (tmp_path / "never").exists()
    # a time budget stops training and keeps what was learned
    short = tmp_path / "short"
    train(["--pairs", str(pairs), "--out", str(short), "--state-out", "--layers", "1", "--threads", "1", "--batch", "2",
           "--time-budget", "0.001"])
    assert json.loads((short / "train.json").read_text())["stopped_at_time_budget"] is True
    with pytest.raises(SystemExit, match="reader.onnx"):  # before SQuAD is read: no SQuAD is there to read
        train(["--squad", str(tmp_path / "no-squad"), "--out", str(tmp_path / "none"), "--stage", "contrast", "--init",
               str(tmp_path / "missing"), "--questions", "4", "--layers", "1", "--threads", "1"])


DESCRIBED_Q = "What does the Federal Emergency Management Agency do?"
# a heading of the demo federation's passages (cli/data/demo_passages.jsonl, MTRAG, Apache-2.0) that
# says what FEMA advises, in words the SQuAD-trained reader scores low (~0.17: under the single floor, over
# the descriptive one)
DESCRIBED_A = "FEMA: Assemble a Disaster Supplies Kit"


def test_a_descriptive_question_reads_at_its_own_lower_floor() -> None:
    stage = open_reading("packaged")
    assert stage is not None and set(stage.floors) == {"factoid", "descriptive"}
    assert 0.0 < stage.floors["descriptive"] < stage.floors["factoid"] < stage.floor
    (got,) = stage.reader.read(DESCRIBED_Q, [DESCRIBED_A])
    at = stage.for_question(DESCRIBED_Q)
    assert at.kind == "descriptive" and at.floor <= got.score < stage.floor  # the single floor refused it
    assert stage.for_question(QUESTION).floor == stage.floors["factoid"]
    fixed = open_reading("packaged", floor=0.3)
    assert fixed is not None and fixed.floors == {} and fixed.for_question(DESCRIBED_Q).floor == 0.3


def _packaged() -> str:
    from hansa.adapters.embedder.local_model import packaged_model_dir

    return str(packaged_model_dir())
