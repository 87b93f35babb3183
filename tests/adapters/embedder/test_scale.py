"""Score scales travel with the model: every catalog entry carries one, MiniLM's are the values hansa
fit on it, another model's are its own, and the configuration's cosine-unit defaults follow the
configured embedder unless set."""
from __future__ import annotations

import dataclasses
from dataclasses import replace

import pytest

from hansa.adapters.embedder.catalog import MODELS, require_model
from hansa.adapters.embedder.scale import (SCALED_GATEWAY_SETTINGS, ScoreScale, configured_scale, default_scale,
                                          parse_scales, scale_for, scale_of, scaled_gateway)
from hansa.core.config import Config, GatewayConfig, load_config
from hansa.core.errors import ConfigError

MINILM_ID = "sentence-transformers/all-MiniLM-L6-v2"
BGE_ID = "BAAI/bge-small-en-v1.5"
# The module constants hansa used before scales were declared per model (router.py, relevance.py,
# retrieval.py, config.py): the default model must keep them exactly.
TODAY = dict(summary_margin=0.24, site_margin=0.4, lexical_weight=0.3, overclaim=0.25, answer_margin=0.15,
             duplicate_cosine=0.95, overlap_bonus=0.1, conf_low=0.2, conf_high=0.8, topic_floor=0.25)


def _values(scale: ScoreScale) -> dict[str, float]:
    return {name: getattr(scale, name) for name in ScoreScale.numbers()}


def test_every_catalog_entry_carries_its_models_scale() -> None:
    for model in MODELS.values():
        assert model.scale == scale_for(model.model_id)
        assert set(_values(model.scale)) == set(TODAY)


def test_minilm_keeps_todays_values_and_is_the_default() -> None:
    for name in ("all-MiniLM-L6-v2", "all-MiniLM-L6-v2-q"):
        assert _values(require_model(name).scale) == TODAY
    assert default_scale().model_id == MINILM_ID
    # the dataclass defaults a GatewayConfig built in code gets are the default model's
    assert {key: getattr(GatewayConfig(), key) for key in SCALED_GATEWAY_SETTINGS} == {key: TODAY[key] for key in SCALED_GATEWAY_SETTINGS}


def test_bge_has_its_own_fitted_scale() -> None:
    bge = require_model("bge-small-en-v1.5-q").scale
    assert bge.model_id == BGE_ID and bge == require_model("bge-small-en-v1.5").scale  # int8 and fp32 share it
    assert _values(bge) != TODAY
    # bge scores unrelated text far higher than MiniLM: its confidence floor sits higher
    assert bge.conf_low > TODAY["conf_low"] and bge.conf_low < bge.conf_high
    assert bge.topic_floor > TODAY["topic_floor"]  # ... and so does the cosine a sentence off the topic stays under
    assert "fit" in bge.fit and "split" in bge.fit


def test_an_unknown_model_uses_the_default_models_scale() -> None:
    assert scale_for("someone/served-model") == default_scale()
    assert configured_scale("openai", "text-embedding-3-small") == default_scale()
    assert configured_scale("onnx", "bge-small-en-v1.5-q").model_id == BGE_ID


def test_scale_of_reads_a_running_embedders_model_id() -> None:
    class Named:
        model_id = BGE_ID

    assert scale_of(Named()) == scale_for(BGE_ID)
    assert scale_of(object()) == default_scale()


def test_the_gateways_cosine_defaults_follow_its_embedder_unless_set(tmp_path) -> None:
    bge = scale_for(BGE_ID)
    home = {"HANSA_HOME": str(tmp_path)}

    def gateway(env: dict[str, str]) -> tuple[float, float]:
        cfg = load_config(env={**home, **env})
        scaled = scaled_gateway(cfg.gateway, cfg.explicit, configured_scale(cfg.embedder.backend, cfg.embedder.model))
        return scaled.site_margin, scaled.lexical_weight

    assert gateway({"HANSA_EMBEDDER_MODEL": "bge-small-en-v1.5-q"}) == (bge.site_margin, bge.lexical_weight)
    assert gateway({"HANSA_EMBEDDER_MODEL": "bge-small-en-v1.5-q", "HANSA_GATEWAY_SITE_MARGIN": "0.4"}) == (0.4, bge.lexical_weight)
    assert gateway({}) == (TODAY["site_margin"], TODAY["lexical_weight"])
    (tmp_path / "hansa.toml").write_text('[embedder]\nmodel = "bge-small-en-v1.5-q"\n[gateway]\nlexical_weight = 0.3\n')
    assert gateway({}) == (bge.site_margin, 0.3)
    assert load_config(env=home).explicit >= {"embedder.model", "gateway.lexical_weight"}
    # a program that builds its Config in code says which settings it set, in Config.explicit as
    # load_config does: those stay as set, the others follow the embedder
    program = Config(gateway=GatewayConfig(site_margin=0.31), explicit=frozenset({"gateway.site_margin"}))
    assert scaled_gateway(program.gateway, program.explicit, bge) == replace(program.gateway, lexical_weight=bge.lexical_weight,
                                                                             topic_floor=bge.topic_floor)
    assert scaled_gateway(GatewayConfig(), Config().explicit, bge).site_margin == bge.site_margin
    # set to the default model's value, a setting the file gave is still the operator's
    (tmp_path / "hansa.toml").write_text('[embedder]\nmodel = "bge-small-en-v1.5-q"\n[gateway]\nsite_margin = 0.4\n')
    assert gateway({}) == (TODAY["site_margin"], bge.lexical_weight)


_GOOD = "\n".join(f"{k} = {v}" for k, v in TODAY.items())


_TABLE = f'default = "m"\n["m"]\nfit = "x"\n{_GOOD}'


@pytest.mark.parametrize(("text", "says"), [
    (f"{_TABLE}\nsite_margn = 0.3", "unknown keys \\['site_margn'\\]"),
    (f'{_TABLE}\nmodel_id = "m"', "unknown keys \\['model_id'\\]"),  # the table's name is the model_id
    (f'default = "m"\n["m"]\n{_GOOD}', "missing 'fit'"),
    (_TABLE.replace("conf_low = 0.2", "conf_low = 0.9"), "conf_low \\(0.9\\) must be below"),
    (_TABLE.replace("overclaim = 0.25", 'overclaim = "high"'), "'overclaim' has the wrong type"),
    (_TABLE.replace("overclaim = 0.25", "overclaim = true"), "'overclaim' has the wrong type"),
    (_TABLE.replace("overclaim = 0.25", "overclaim = 1.5"), "'overclaim': input should be less than or equal to 1"),
    ('default = "m"\nm = 0.3', "expected an object"),
    (f'default = "other"\n["m"]\nfit = "x"\n{_GOOD}', "`default` must name one of its models"),
    ("default = [", "not valid TOML"),
])
def test_a_bad_scales_file_is_refused_naming_the_file_and_the_key(text: str, says: str) -> None:
    with pytest.raises(ConfigError, match=says) as err:
        parse_scales(text, "scales.toml")
    assert str(err.value).startswith("scales.toml")
    if "default" not in says and "TOML" not in says:  # a table's error names its model and what a table holds
        assert str(err.value).startswith("scales.toml: ['m']: ") and "every model declares exactly: fit, " in str(err.value)


def test_integers_are_numbers_in_a_scales_file() -> None:
    scales, _ = parse_scales(_TABLE.replace("overclaim = 0.25", "overclaim = 0").replace("conf_high = 0.8", "conf_high = 1"),
                             "scales.toml")
    assert (scales["m"].overclaim, scales["m"].conf_high) == (0.0, 1.0) and isinstance(scales["m"].overclaim, float)


def test_the_shipped_file_parses_to_what_the_lookups_return() -> None:
    scales, default = parse_scales(_shipped_text(), "scales.toml")
    assert default == MINILM_ID and scales[BGE_ID] == scale_for(BGE_ID)
    assert dataclasses.asdict(scales[MINILM_ID]) == dataclasses.asdict(default_scale())


def _shipped_text() -> str:
    from importlib import resources

    return (resources.files("hansa.adapters.embedder") / "scales.toml").read_text(encoding="utf-8")
