"""The learned router's own tier: features, model, outcome log and selection on synthetic summary
hits (no site, no embedder: the router only ever sees hits, so these are its real inputs)."""
from __future__ import annotations

import json
import logging
import random
from pathlib import Path

import numpy as np
import pytest

from hansa.gateway.query.route import SummaryRouter
from hansa.gateway.index.summaries import SummaryHit
from hansa.gateway.query.learned.features import FEATURE_NAMES, site_features
from hansa.gateway.query.learned.router import LearnedRouter
from hansa.gateway.query.learned.outcomes import OutcomeLog
from hansa.gateway.query.learned.model import fit, load_model
from hansa.gateway.query.learned.outcomes import LOG_FILE, OLD_LOG_FILE
from hansa.gateway.query.learned.router import MODEL_FILE, LearnedScore
from hansa.gateway.query.learned.train import train_router

SITES = [f"site-{i}" for i in range(12)]
PUBLISHED = {s: (20 + 3 * i, 200 + 10 * i) for i, s in enumerate(SITES)}


def published(site_id: str) -> tuple[int, int]:
    return PUBLISHED.get(site_id, (25, 250))


def question(rng: random.Random, relevant: list[str], sites: list[str] = SITES, m: int = 48) -> list[SummaryHit]:
    """Top-m hits where the relevant sites' summaries match better (with noise): the pattern a
    router must learn. Each site has a few summaries; the index returns the best m overall."""
    hits = []
    for s in sites:
        base = 0.55 if s in relevant else 0.3
        for j in range(6):
            hits.append(SummaryHit(s, f"{s}/c{j}", base + rng.gauss(0, 0.08) - 0.02 * j, rng.randint(1, 40)))
    hits.sort(key=lambda h: -h.score)
    return hits[:m]


def synthetic_log(log: OutcomeLog, n: int, seed: int = 7) -> None:
    """n questions routed by summary matching with every site called (labels for all)."""
    rng = random.Random(seed)
    router = LearnedRouter.from_model(None, published)
    for q in range(n):
        relevant = rng.sample(SITES, rng.choice([1, 1, 2]))
        ranked = router.rank(np.zeros(3), question(rng, relevant), set(SITES))
        log.append(f"question {q}", None, [{"features": s.features, "called": True, "explored": False,
                                           "contributed": s.site_id in relevant} for s in ranked])


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, object]:
    home = tmp_path_factory.mktemp("router")
    synthetic_log(OutcomeLog(home), 300)
    model, path = train_router(home)
    return home, model


# -- features ---------------------------------------------------------------------------------------

def test_features_never_name_a_site() -> None:
    rng = random.Random(1)
    hits = question(rng, ["site-3"])
    renamed = {s: f"other-{i}" for i, s in enumerate(reversed(SITES))}
    moved = [h._replace(site_id=renamed[h.site_id]) for h in hits]
    pub_renamed = {renamed[s]: v for s, v in PUBLISHED.items()}
    a = {f.score.site_id: f.vector for f in site_features(hits, set(SITES), published)}
    b = {f.score.site_id: f.vector for f in site_features(moved, set(renamed.values()), pub_renamed.__getitem__)}
    assert len(a) == len(SITES) and all(len(v) == len(FEATURE_NAMES) for v in a.values())
    for s, v in a.items():  # same evidence under another name: the very same features
        np.testing.assert_array_equal(v, b[renamed[s]])
    assert not any("site" in n or "id" == n for n in FEATURE_NAMES)


def test_features_describe_rank_and_gap() -> None:
    hits = [SummaryHit("a", "a1", 0.8, 5), SummaryHit("b", "b1", 0.6, 9), SummaryHit("a", "a2", 0.5, 3),
            SummaryHit("b", "b2", 0.1, 1)]
    f = {x.score.site_id: dict(zip(FEATURE_NAMES, x.vector)) for x in site_features(hits, {"a", "b"}, published)}
    assert f["a"]["rank_recip"] == 1.0 and f["b"]["rank_recip"] == 0.5
    assert f["b"]["gap_to_leader"] == pytest.approx(0.2) and f["a"]["gap_to_next"] == pytest.approx(0.2)
    assert f["a"]["second"] == 0.5 and f["a"]["hits_share"] == 0.5 and f["b"]["mean_top3"] == pytest.approx(0.35)
    assert site_features(hits, {"b"}, published)[0].score.site_id == "b"  # only routable sites
    assert site_features([], {"a"}, published) == []


# -- training ---------------------------------------------------------------------------------------

def test_training_is_deterministic_and_versioned_with_its_data(trained, tmp_path: Path) -> None:
    home, model = trained
    again = tmp_path / "again"
    synthetic_log(OutcomeLog(again), 300)
    model2, path2 = train_router(again)
    assert model2.version == model.version and model2.weights == model.weights  # the same data: bit-identical
    assert model2.data_digest == model.data_digest and model.questions == 300 and model.rows > 250 * len(SITES)
    doc = json.loads(path2.read_text())
    assert doc["feature_names"] == list(FEATURE_NAMES) and doc["data_digest"] == model.data_digest
    assert (again / "models" / f"{model.version}.json").read_text() == path2.read_text()
    other = tmp_path / "other"
    synthetic_log(OutcomeLog(other), 300, seed=8)
    assert train_router(other)[0].version != model.version  # other data, another version
    w = dict(zip(FEATURE_NAMES, model.weights))
    assert w["best"] > 0 and w["gap_to_leader"] < 0  # it learned the pattern the log holds


def test_training_refuses_a_log_too_small(tmp_path: Path) -> None:
    synthetic_log(OutcomeLog(tmp_path), 5)
    with pytest.raises(ValueError, match="at least 20"):
        train_router(tmp_path)


def test_the_threshold_reaches_the_target_recall_on_unseen_questions(trained) -> None:
    _, model = trained
    router = LearnedRouter.from_model(model, published)
    rng = random.Random(99)
    recall, called = [], []
    for _ in range(200):
        relevant = rng.sample(SITES, rng.choice([1, 2]))
        chosen = [s.site_id for s in router.select(router.rank(np.zeros(3), question(rng, relevant), set(SITES)), 5)]
        recall.append(len(set(chosen) & set(relevant)) / len(relevant))
        called.append(len(chosen))
    assert np.mean(recall) >= 0.9 and np.mean(called) < 4  # fan-out follows confidence, below k


def test_a_site_unseen_in_training_is_routed(trained) -> None:
    _, model = trained
    router = LearnedRouter.from_model(model, published)
    rng = random.Random(5)
    newcomers = SITES[:8] + ["joined-today"]
    hits = question(rng, ["joined-today"], sites=newcomers)
    ranked = router.rank(np.zeros(3), hits, set(newcomers))
    assert ranked[0].site_id == "joined-today" and ranked[0].probability > model.threshold
    assert "joined-today" in [s.site_id for s in router.select(ranked, 3)]


# -- fallback ---------------------------------------------------------------------------------------

def corrupt(path: Path, how: str) -> None:
    doc = json.loads(path.read_text())
    if how == "garbage":
        path.write_text("{not json")
    elif how == "tampered":
        doc["weights"][0] += 1.0
        path.write_text(json.dumps(doc))
    elif how == "features":
        doc["feature_names"] = doc["feature_names"][:-1] + ["site_id"]
        path.write_text(json.dumps(doc))
    elif how == "empty":
        path.write_text("")


@pytest.mark.parametrize("how", ["missing", "garbage", "tampered", "features", "empty"])
def test_a_missing_or_corrupt_model_falls_back_to_summary_matching(trained, tmp_path: Path, how: str) -> None:
    home, _ = trained
    path = tmp_path / MODEL_FILE
    if how != "missing":
        path.write_bytes((home / MODEL_FILE).read_bytes())
        corrupt(path, how)
    seen: list[logging.LogRecord] = []
    handler = logging.Handler(logging.INFO)
    handler.emit = seen.append  # type: ignore[method-assign]
    hansa_log = logging.getLogger("hansa")
    level = hansa_log.level
    hansa_log.addHandler(handler)
    hansa_log.setLevel(logging.INFO)
    try:
        router = LearnedRouter(path, published)
    finally:
        hansa_log.removeHandler(handler)
        hansa_log.setLevel(level)
    assert router.model() is None and router.describe()["model_version"] is None
    assert router.describe()["fallback"].startswith("summary matching")
    expected = "router.model_missing" if how == "missing" else "router.model_unusable"
    assert [r.getMessage() for r in seen] == [expected] and seen[0].path == str(path)  # one clear line
    hits = question(random.Random(3), ["site-2"])
    ranked, summary = router.rank(np.zeros(3), hits, set(SITES)), SummaryRouter()
    expected = summary.select(summary.rank(np.zeros(3), hits, set(SITES)), 5)
    assert [s.site_id for s in router.select(ranked, 5)] == [s.site_id for s in expected]


def test_the_model_is_reloaded_when_its_file_changes(trained, tmp_path: Path) -> None:
    home, model = trained
    path = tmp_path / MODEL_FILE
    router = LearnedRouter(path, published)
    assert router.model_version is None
    path.write_bytes((home / MODEL_FILE).read_bytes())
    assert router.model_version == model.version
    corrupt(path, "garbage")
    assert router.model_version is None  # a broken replacement is not used
    path.unlink()
    assert router.model() is None


# -- exploration and the outcome log -----------------------------------------------------------------

@pytest.mark.parametrize("share", [0.0, 0.2, 0.5])
def test_exploration_asks_extra_sites_at_the_configured_share(trained, share: float) -> None:
    _, model = trained
    router = LearnedRouter.from_model(model, published, explore_share=share, explore_sites=2, seed=11)
    rng = random.Random(2)
    explored = 0
    n = 600
    for _ in range(n):
        ranked = router.rank(np.zeros(3), question(rng, ["site-1"]), set(SITES))
        own = [s.site_id for s in router.pick(ranked, 3)]
        chosen = router.select(ranked, 3)
        extra = [s for s in chosen if s.site_id not in own]
        assert [s.site_id for s in chosen[:len(own)]] == own  # the router's own choice is kept
        assert all(isinstance(s, LearnedScore) and s.explored for s in extra)
        assert len({s.site_id for s in chosen}) == len(chosen)
        if extra:
            assert len(extra) == 2
            explored += 1
    assert abs(explored / n - share) < 0.05


def test_the_outcome_log_keeps_a_digest_never_the_question_and_stays_bounded(tmp_path: Path) -> None:
    log = OutcomeLog(tmp_path, max_records=10)
    secret = "Does patient Jane Roe have diabetes?"
    for i in range(25):
        log.append(secret if i == 0 else f"q{i}", "lr-x", [{"features": [0.1] * len(FEATURE_NAMES), "called": i % 2 == 0,
                                                            "explored": False, "contributed": i % 4 == 0}])
    text = "".join(p.read_text() for p in tmp_path.glob("outcomes*.jsonl"))
    assert "Jane" not in text and "q1" not in text
    assert len((tmp_path / LOG_FILE).read_text().splitlines()) == 5  # 25 = 10 + 10 + 5: one old file kept
    assert len((tmp_path / OLD_LOG_FILE).read_text().splitlines()) == 10
    assert log.digest(secret) == OutcomeLog(tmp_path).digest(secret)  # keyed, and the key persists
    assert log.digest(secret) != OutcomeLog(tmp_path / "elsewhere").digest(secret)
    x, y, groups = log.training_rows()  # records 10..24 are kept; only the called (even) ones carry labels
    assert x.shape == (8, len(FEATURE_NAMES)) and y.sum() == 4 and len(set(groups)) == 8
    (tmp_path / LOG_FILE).write_text((tmp_path / LOG_FILE).read_text() + "{broken\n")
    assert log.training_rows()[0].shape == (8, len(FEATURE_NAMES))  # a torn line is skipped


def test_fit_refuses_one_class_and_bad_shapes() -> None:
    x = np.ones((4, len(FEATURE_NAMES)))
    with pytest.raises(ValueError, match="both"):
        fit(x, np.zeros(4), ["a", "b", "c", "d"])
    with pytest.raises(ValueError, match="features"):
        fit(np.ones((4, 3)), np.array([0, 1, 0, 1]), ["a"] * 4)


# -- operator surface: config and `hansa gateway router` ----------------------------------------------

def test_router_config_keys_are_checked() -> None:
    from hansa.core.config import load_config
    from hansa.core.errors import ConfigError

    cfg = load_config(env={"HANSA_GATEWAY_ROUTER": "learned", "HANSA_GATEWAY_ROUTER_EXPLORE_SHARE": "0.1"})
    assert (cfg.gateway.router, cfg.gateway.router_explore_share) == ("learned", 0.1)
    with pytest.raises(ConfigError, match="gateway.router"):
        load_config(env={"HANSA_GATEWAY_ROUTER": "oracle"})
    with pytest.raises(ConfigError, match="explore_share"):
        load_config(env={"HANSA_GATEWAY_ROUTER_EXPLORE_SHARE": "1.5"})


def test_cli_trains_shows_and_refuses_an_empty_log(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from hansa.core.config import Config
    from hansa.cli.gateway import gateway
    from hansa.gateway.query.learned.router import router_dir

    def run(*args: str):
        return CliRunner().invoke(gateway, ["router", *args], obj={"config": Config(home=tmp_path)})

    empty = run("train")
    assert empty.exit_code == 1 and "at least 20" in empty.output
    assert "falls back to summary matching" in run("show").output
    synthetic_log(OutcomeLog(router_dir(tmp_path / "gateway")), 40)
    trained = run("train", "--json")
    assert trained.exit_code == 0, trained.output
    out = json.loads(trained.stdout)
    assert out["questions"] == 40 and out["features"] == list(FEATURE_NAMES) and len(out["data_digest"]) == 64
    assert json.loads(run("show", "--json").output)["version"] == out["version"]
    assert f"version: {out['version']}" in run("show").output
    assert run("train", "--target-recall", "2").exit_code == 2


def test_term_features_are_each_sites_share_and_rank_of_the_term_scores() -> None:
    hits = [SummaryHit("a", "a1", 0.8, 5), SummaryHit("b", "b1", 0.6, 9), SummaryHit("c", "c1", 0.5, 2)]
    lexical = {"a": 0.2, "b": 0.8, "z": 5.0}  # z routes nowhere; c has no term statistics
    f = {x.score.site_id: dict(zip(FEATURE_NAMES, x.vector))
         for x in site_features(hits, {"a", "b", "c"}, published, lexical)}
    assert f["b"]["terms_share"] == 1.0 and f["a"]["terms_share"] == pytest.approx(0.25)
    assert (f["b"]["terms_rank_recip"], f["a"]["terms_rank_recip"]) == (1.0, 0.5)
    assert f["c"]["terms_share"] == 0.0 and f["c"]["terms_rank_recip"] == 0.0
    plain = {x.score.site_id: dict(zip(FEATURE_NAMES, x.vector)) for x in site_features(hits, {"a", "b"}, published)}
    assert plain["a"]["terms_share"] == 0.0 and plain["a"]["best"] == f["a"]["best"]  # no statistics: 0
    assert LearnedRouter.from_model(None, published).reads_lexical  # so the engine computes them


def test_training_from_labelled_rows_and_refusing_rows_of_other_features(tmp_path: Path) -> None:
    """`hansa gateway router train --rows`: a model from gold-labelled rows (what `hansa eval --split
    fit --calibration-rows` writes), deterministic, to --out; rows of another feature set, too few
    questions, or --out without --rows are refused with a clear message."""
    from click.testing import CliRunner

    from hansa.core.config import Config
    from hansa.core.errors import InputError
    from hansa.gateway.query.calibrate import Example, Row, write_rows
    from hansa.cli.gateway import gateway
    from hansa.gateway.query.learned.train import train_from_rows

    rng = random.Random(3)
    router = LearnedRouter.from_model(None, published)
    rows = []
    for q in range(60):
        relevant = rng.sample(SITES, rng.choice([1, 2]))
        for s in router.rank(np.zeros(3), question(rng, relevant), set(SITES)):
            rows.append(Row("router", Example(dict(zip(FEATURE_NAMES, s.features)), s.site_id in relevant, f"q{q}"),
                            site=s.site_id))
    model = train_from_rows(rows, target_recall=0.9)
    assert model.questions == 60 and model.rows == len(rows) and train_from_rows(rows, target_recall=0.9) == model
    assert dict(zip(FEATURE_NAMES, model.weights))["best"] > 0
    with pytest.raises(InputError, match="at least 20"):
        train_from_rows(rows[:50])
    old = [Row("router", Example({"best": 0.5}, True, "q"), site="a")]
    with pytest.raises(InputError, match="re-collect"):
        train_from_rows(old)

    data = tmp_path / "rows.jsonl"
    write_rows(data, rows)
    out = tmp_path / "models" / "squad" / "model.json"

    def run(*args: str):
        return CliRunner().invoke(gateway, ["router", *args], obj={"config": Config(home=tmp_path / "home")})

    res = run("train", "--rows", str(data), "--out", str(out), "--target-recall", "0.9", "--json")
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["version"] == model.version and load_model(out) == model
    assert not (tmp_path / "home" / "gateway" / "router" / MODEL_FILE).exists()  # the gateway's own: untouched
    assert run("train", "--out", str(out)).exit_code == 2  # --out belongs to --rows
    write_rows(data, old)
    res = run("train", "--rows", str(data))
    assert res.exit_code == 1 and "re-collect" in res.output and "Traceback" not in res.output


@pytest.mark.parametrize("shipped, target", [("mtrag16", 0.95), ("mtrag16-target98", 0.98)])
def test_the_shipped_mtrag_router_models_are_what_the_committed_rows_train(shipped: str, target: float) -> None:
    """benchmarks/router-models/mtrag16*/model.json come from the committed fit rows by the
    documented command (`hansa gateway router train --rows ... [--target-recall 0.98] --out ...`):
    the same rows, features and counts exactly, the same numbers up to the last bits a numpy or
    scikit-learn release may round differently."""
    from dataclasses import asdict

    from hansa.gateway.query.calibrate import read_rows
    from hansa.gateway.query.learned.train import train_from_rows

    bench = Path(__file__).resolve().parents[3] / "benchmarks"
    model = asdict(train_from_rows(read_rows(bench / "calibration-rows" / "mtrag16_fit_router.jsonl"), target_recall=target))
    held = asdict(load_model(bench / "router-models" / shipped / "model.json"))
    numeric = ("weights", "bias", "mean", "scale", "threshold")
    assert {k: v for k, v in model.items() if k not in numeric} == {k: v for k, v in held.items() if k not in numeric}
    for key in numeric:
        assert model[key] == pytest.approx(held[key], rel=1e-9, abs=1e-12), key
