"""The dataset loaders on the real files, sharding, and the --data / HANSA_EVAL_DATA rule."""
from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from hansa.core.errors import InputError
from hansa.evaluation.datasets import UNANSWERABLE, UNDERSPECIFIED, load_dataset, resolve_data_dir


def test_squad_loads_every_passage_and_question_and_shards_whole_articles(datasets_dir: Path) -> None:
    ds = load_dataset("squad", datasets_dir / "squad")
    assert len(ds.passages) == 20958 and len({p.doc_id for p in ds.passages}) == 490
    kinds = Counter(q.kind for q in ds.questions)
    assert kinds == {"answerable": 98169, UNANSWERABLE: 5945}
    assert all(q.answers and q.gold for q in ds.questions if q.answerable)
    for n in (16, 64):
        sites = ds.sites(n)
        assert len(sites) == n  # 490 articles fill every shard
        owner = {}
        for site, ps in sites.items():
            for p in ps:
                assert owner.setdefault(p.doc_id, site) == site  # an article never spans sites
        assert sum(len(ps) for ps in sites.values()) == 20958
    assert ds.sites(16) == ds.sites(16)


def test_mtrag_has_answerable_rewrites_and_the_abstention_tasks(datasets_dir: Path) -> None:
    ds = load_dataset("mtrag", datasets_dir / "mtrag")
    kinds = Counter(q.kind for q in ds.questions)
    assert kinds[UNANSWERABLE] == 97 and kinds[UNDERSPECIFIED] == 78
    assert sum(q.answerable for q in ds.questions) == 511  # 332 MTRAG-UN with qrels + 179 rewrites
    assert all(q.references for q in ds.questions if q.source == "mtragun")
    assert sorted(ds.sites(4)) == ["clapnq", "cloud", "fiqa", "govt"]
    with pytest.raises(InputError, match="multiple of 4"):
        ds.sites(6)


def test_data_dir_comes_from_the_option_or_the_environment_never_the_install(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="HANSA_EVAL_DATA"):
        resolve_data_dir("squad", None, env={})
    (tmp_path / "squad").mkdir()
    assert resolve_data_dir("squad", None, env={"HANSA_EVAL_DATA": str(tmp_path)}) == tmp_path / "squad"
    assert resolve_data_dir("squad", tmp_path / "squad", env={}) == tmp_path / "squad"
    with pytest.raises(InputError, match="not a directory"):
        resolve_data_dir("mtrag", tmp_path / "nope", env={})


def test_out_of_scope_questions_are_the_other_datasets_report_questions_and_count_only_apart(datasets_dir: Path,
                                                                                             tmp_path: Path) -> None:
    from hansa.core.errors import InputError
    from hansa.evaluation.datasets import OUT_OF_SCOPE
    from hansa.evaluation.report import summarize
    from hansa.evaluation.runner import Outcome, out_of_scope_questions
    from hansa.evaluation.split import split_of

    to_squad = out_of_scope_questions("squad", datasets_dir / "squad", "report", 20)
    to_mtrag = out_of_scope_questions("mtrag", datasets_dir / "mtrag", "report", 20)
    assert len(to_squad) == len(to_mtrag) == 20
    for asked in (to_squad, to_mtrag):
        assert all(q.kind == OUT_OF_SCOPE and not q.answerable and not q.gold for q in asked)
        assert all(split_of(q.id.removeprefix("out-of-scope:")) == "report" for q in asked)
    assert all(q.source.startswith("mtrag:") and "clapnq" not in q.source for q in to_squad)  # no Wikipedia for SQuAD
    assert all(q.source.startswith("squad:") and "dev" in q.source for q in to_mtrag)
    assert out_of_scope_questions("mtrag", datasets_dir / "mtrag", "report", 20) == to_mtrag  # a stable sample
    with pytest.raises(InputError, match="squad.*missing"):
        out_of_scope_questions("mtrag", tmp_path / "mtrag", "report", 5)

    def outcome(q, abstained: bool) -> Outcome:
        return Outcome(strategy="hansa", question=q, gold_sites=[], asked_sites=["a"], ranked_docs=[], answer="x",
                       abstained=abstained, confidence=0.5, bytes=10, gateway_ms=1.0, e2e_ms=2.0)

    from hansa.evaluation.datasets import Question

    unanswerable = Question("u1", "what?", kind="unanswerable")
    record = summarize("mtrag", "report", 4, [outcome(unanswerable, False), outcome(to_mtrag[0], True),
                                              outcome(to_mtrag[1], False)], passages_total=4)
    assert record["out_of_scope_questions"] == 2 and record["abstain_out_of_scope"] == 0.5
    assert record["abstain_unanswerable"] == 0.0 and record["questions"] == 1  # counted apart only
