"""`hansa eval --site-setting`: a sweep of how sites are built reaches every site's configuration."""
from __future__ import annotations

import pytest

from hansa.core.config import load_config
from hansa.core.errors import HansaError
from hansa.evaluation.runner import setting_env, site_env


def test_site_settings_become_the_sites_configuration() -> None:
    env = site_env([("chunks_per_summary", "32"), ("leiden_gamma", "2.5")])
    cfg = load_config(env=env)
    assert (cfg.site.chunks_per_summary, cfg.site.leiden_gamma) == (32, 2.5)


def test_an_unknown_site_setting_is_refused_by_name() -> None:
    with pytest.raises(HansaError, match="unknown \\[site\\] setting 'chunk_per_summary'"):
        site_env([("chunk_per_summary", "32")])


def test_gateway_settings_become_the_gateways_configuration_and_unknown_keys_are_refused() -> None:
    env = setting_env("gateway", [("lexical_weight", "2.5"), ("top_k_sites", "4")])
    cfg = load_config(env=env)
    assert (cfg.gateway.lexical_weight, cfg.gateway.top_k_sites) == (2.5, 4)
    with pytest.raises(HansaError, match="unknown \\[gateway\\] setting 'lexical_wieght'"):
        setting_env("gateway", [("lexical_wieght", "2")])
