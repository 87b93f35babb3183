"""The evaluation datasets: $HANSA_EVAL_DATA (a folder holding mtrag/ and squad/) when set, else
../shared/datasets beside the repository."""
from __future__ import annotations

import os
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def datasets_dir(request: pytest.FixtureRequest) -> Path:
    env = os.environ.get("HANSA_EVAL_DATA")
    return Path(env) if env else request.getfixturevalue("shared_dir") / "datasets"
