"""An embedding model's score scale: the cosine-unit parameters hansa fit on that model's scores.

Why with the model: margins, thresholds and bonuses in cosine units mean something only for the
model whose cosines they were fit on (bge-small-en-v1.5 scores unrelated text where MiniLM scores
related text). They are declared per `model_id` in scales.toml, shipped with the package beside the
catalog, and looked up from the embedder a site or gateway actually runs, so changing
`[embedder] model` brings that model's values along and nobody edits module constants.

Why a data file rather than Python: the values are fit by measurement (scripts/fit_score_scale.py,
routing runs) and read only when answering, not when a site is built; keeping them out of the code
that builds sites keeps the evaluation's site cache valid while they are refit.
"""
from __future__ import annotations

import tomllib
from dataclasses import dataclass, fields, replace
from functools import lru_cache
from importlib import resources
from typing import TYPE_CHECKING, Annotated, Any, ClassVar

from pydantic import Field, StrictFloat, StrictStr

from hansa.core.errors import ConfigError, InputError
from hansa.core.model import FORBID, Wire

if TYPE_CHECKING:
    from hansa.core.config import GatewayConfig

SCALES_FILE = "scales.toml"

# A value in cosine units: a number in [0, 1] (an integer is a number too; a bool is not).
Cosine = Annotated[StrictFloat, Field(ge=0.0, le=1.0)]


@dataclass(frozen=True)
class ScoreScale(Wire):
    """One model's table in scales.toml, whose comments document each key, with the `model_id` it
    is declared under: what the lookups return. Read through the model layer once, so a misspelt
    key, a missing one or a value out of [0, 1] is refused naming the key."""

    __pydantic_config__ = FORBID
    WHERE: ClassVar[str] = SCALES_FILE

    fit: StrictStr  # how the values were fit: command, data, split
    summary_margin: Cosine
    site_margin: Cosine
    lexical_weight: Cosine
    overclaim: Cosine
    answer_margin: Cosine
    duplicate_cosine: Cosine
    overlap_bonus: Cosine
    conf_low: Cosine
    conf_high: Cosine
    topic_floor: Cosine
    model_id: str  # the table's name in scales.toml, never one of its keys

    def __post_init__(self) -> None:
        if not self.conf_low < self.conf_high:
            raise ValueError(f"conf_low ({self.conf_low}) must be below conf_high ({self.conf_high}): "
                             "confidence rises from one to the other")

    @classmethod
    def numbers(cls) -> tuple[str, ...]:
        """The keys in cosine units (all but `fit` and `model_id`)."""
        return tuple(f.name for f in fields(cls) if f.name not in ("model_id", "fit"))


def parse_scales(text: str, where: str) -> tuple[dict[str, ScoreScale], str]:
    """(scale per model_id, the default model_id) from scales.toml's text; bad input names `where`
    and the model's table."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{where}: not valid TOML: {exc}") from exc
    default = data.pop("default", None)
    scales: dict[str, ScoreScale] = {}
    for model_id, table in data.items():
        named = f"{where}: [{model_id!r}]"
        try:
            if isinstance(table, dict) and "model_id" in table:  # the table's name is its model_id
                raise InputError(f"{named}: unknown keys ['model_id']")
            given = {**table, "model_id": model_id} if isinstance(table, dict) else table
            scales[model_id] = ScoreScale.from_json(given, where=named)
        except InputError as exc:
            raise ConfigError(f"{exc}; every model declares exactly: fit, {', '.join(ScoreScale.numbers())} "
                              "(numbers in [0, 1], cosine units)") from None
    if default not in scales:
        raise ConfigError(f"{where}: `default` must name one of its models ({', '.join(scales)}), not {default!r}")
    return scales, default


@lru_cache(maxsize=1)
def _shipped() -> tuple[dict[str, ScoreScale], str]:
    path = resources.files("hansa.adapters.embedder") / SCALES_FILE
    return parse_scales(path.read_text(encoding="utf-8"), f"hansa/adapters/embedder/{SCALES_FILE}")


def scale_for(model_id: str) -> ScoreScale:
    """The score scale of the model with this `model_id` (an Embedder's), else the default model's."""
    scales, default = _shipped()
    return scales.get(model_id) or scales[default]


def default_scale() -> ScoreScale:
    """The values a caller without an embedder uses: the default model's (today's constants)."""
    scales, default = _shipped()
    return scales[default]


def scale_of(embedder: Any) -> ScoreScale:
    """The score scale of a running embedder (anything with a `model_id`, wrappers included)."""
    return scale_for(str(getattr(embedder, "model_id", "")))


# [gateway] settings in the embedder's cosine units: where the configuration leaves one out, a
# gateway uses its embedder's value, not the dataclass default (the default model's).
SCALED_GATEWAY_SETTINGS = ("site_margin", "lexical_weight", "topic_floor")


def scaled_gateway(gateway: "GatewayConfig", explicit: frozenset[str], scale: ScoreScale) -> "GatewayConfig":
    """`gateway` with each SCALED_GATEWAY_SETTINGS that `explicit` (Config.explicit: what the file or
    the environment gave, and what a program that builds its Config names there) leaves out taken
    from `scale`."""
    unset = {key: getattr(scale, key) for key in SCALED_GATEWAY_SETTINGS if f"gateway.{key}" not in explicit}
    return replace(gateway, **unset) if unset else gateway


def configured_scale(backend: str, model: str) -> ScoreScale:
    """The score scale `[embedder] backend` / `model` will run with, before any model is loaded: a
    catalog name maps to its model_id; a local directory or a served model is looked up by name."""
    from hansa.adapters.embedder.catalog import catalog_model

    found = catalog_model(model) if backend in ("onnx", "sentence-transformers") else None
    return scale_for(found.model_id if found else model)
