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
