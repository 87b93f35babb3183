"""The model layer, chosen by measurement: hand-written parsing vs pydantic v2 vs msgspec, side by side.

Why: docs/decisions/0002-model-layer.md decides which mechanism parses and writes what crosses a
boundary (issue 33, item 2). The wire types of sync/wire.py are measured on the two messages that
matter: a PartialAnswer (4 citations, 12 sentences with relevance; every site answer is one) and a
batch of 400 SummaryRecords (what publications carry).

Variants, interleaved round by round in one process (`--rounds` rounds of `--calls` calls; the
median round is reported), each from JSON bytes to validated objects (decode) and back (encode):

- `legacy`: the hand-written parsers as they were (scripts/legacy_wire.py): json.loads + from_json.
- `hansa`: what sync/wire.py ships now (stdlib dataclasses validated by pydantic through
  core/model.py): json.loads + from_json, and to_json + json.dumps.
- `pydantic_strict`: pydantic BaseModels with ConfigDict(strict=True, extra="forbid", frozen=True),
  validated straight from the bytes (model_validate_json / model_dump_json).
- `msgspec`: msgspec Structs (forbid_unknown_fields=True, frozen=True, Meta constraints),
  msgspec.json.decode(type=...) / msgspec.json.encode. Skipped, with a note, when not installed.

The strictness table feeds each variant the bad inputs today's parser refuses (and two it accepts:
5.0 for an integer, 1 for a number) and records whether it refuses exactly as today and whether
its error names the field. Import times are measured in fresh interpreters.

    nice python scripts/bench_models.py [--smoke] [--out benchmarks/models.json]

No `from __future__ import annotations`: msgspec resolves the local Structs' annotations eagerly.
"""
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Annotated, Any, Callable, Sequence

sys.path.insert(0, str(Path(__file__).resolve().parent))
import benchlib  # noqa: E402  (scripts/ is not a package)
import legacy_wire  # noqa: E402

from hansa.core.errors import InputError  # noqa: E402
from hansa.sync import wire  # noqa: E402

SITE_ID_PATTERN = wire.SITE_ID_RE.pattern
SUMMARY_ID_PATTERN = wire.SUMMARY_ID_RE.pattern


def partial_answer_json() -> dict[str, Any]:
    citations = [{"site_id": "site-a", "doc_id": f"reports/doc-{i}.pdf", "title": f"Annual report {i}",
                  "score": 0.81 - i / 20, "page": 3 + i, "source": f"reports:doc-{i}.pdf"} for i in range(4)]
    sentences = [[f"Sentence {i} of the answer says something specific about the flood maps, {i * 7} times.",
                  f"reports/doc-{i % 4}.pdf", 0.71 - i / 50] for i in range(12)]
    return {"site_id": "site-a", "answer": " ".join(s[0] for s in sentences), "citations": citations,
            "confidence": 0.64, "sentences": sentences}


def summary_batch_json(n: int) -> list[dict[str, Any]]:
    vector = "A" * 512  # 384 float32 in base64
    return [{"id": f"c{i}", "version": 3, "vector": vector,
             "richness": {"entities": 40 + i, "chunks": 120 + i, "documents": 9},
             "level": i % 3, "text": None, **({"parent": f"p{i // 10}"} if i % 3 < 2 else {})} for i in range(n)]


def pydantic_models() -> dict[str, Any]:
    from pydantic import BaseModel, ConfigDict, Field

    class Strict(BaseModel):
        model_config = ConfigDict(strict=True, extra="forbid", frozen=True)

    class Citation(Strict):
        site_id: str
        doc_id: str
        title: str
        score: float = 0.0
        page: Annotated[int, Field(ge=1, le=wire.MAX_PAGE)] | None = None
        source: str | None = None

    Relevance = Annotated[float, Field(ge=-1.0, le=1.0)]

    class PartialAnswer(Strict):
        site_id: Annotated[str, Field(pattern=SITE_ID_PATTERN)]
        answer: str
        citations: tuple[Citation, ...]
        confidence: Annotated[float, Field(ge=0.0, le=1.0)]
        sentences: tuple[tuple[str, str] | tuple[str, str, Relevance], ...] = ()

    class Richness(Strict):
        entities: Annotated[int, Field(ge=0, le=wire.MAX_INT64)]
        chunks: Annotated[int, Field(ge=0, le=wire.MAX_INT64)]
        documents: Annotated[int, Field(ge=0, le=wire.MAX_INT64)]

    class SummaryRecord(Strict):
        id: Annotated[str, Field(pattern=SUMMARY_ID_PATTERN)]
        version: Annotated[int, Field(ge=0, le=wire.MAX_INT64)]
        vector: str
        richness: Richness
        level: Annotated[int, Field(ge=0, le=1024)]
        text: str | None
        parent: Annotated[str, Field(pattern=SUMMARY_ID_PATTERN)] | None = Field(default=None, exclude_if=_is_none)

    class RetrieveRequest(Strict):
        question: Annotated[str, Field(min_length=1, max_length=wire.MAX_QUESTION_CHARS)]
        top_k: Annotated[int, Field(ge=1, le=100)] = 10
        mode: str = "local"

    from pydantic import TypeAdapter
    return {"PartialAnswer": PartialAnswer, "SummaryBatch": TypeAdapter(list[SummaryRecord]),
            "RetrieveRequest": RetrieveRequest}


def _is_none(value: Any) -> bool:
    return value is None


def msgspec_models() -> dict[str, Any]:
    import msgspec
    from msgspec import Meta

    class Citation(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
        site_id: str
        doc_id: str
        title: str
        score: float = 0.0
        page: Annotated[int, Meta(ge=1, le=wire.MAX_PAGE)] | None = None
        source: str | None = None

    class PartialAnswer(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
        site_id: Annotated[str, Meta(pattern=SITE_ID_PATTERN)]
        answer: str
        citations: tuple[Citation, ...]
        confidence: Annotated[float, Meta(ge=0.0, le=1.0)]
        # msgspec has no union of two tuple shapes: a sentence is an array of str | float
        sentences: tuple[tuple[str | float, ...], ...] = ()

        def __post_init__(self) -> None:
            for s in self.sentences:
                if not (len(s) in (2, 3) and all(isinstance(x, str) for x in s[:2])
                        and (len(s) == 2 or (isinstance(s[2], float) and -1.0 <= s[2] <= 1.0))):
                    raise ValueError("sentences must be [text, doc_id] or [text, doc_id, relevance in [-1, 1]]")

    class Richness(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
        entities: Annotated[int, Meta(ge=0, le=wire.MAX_INT64)]
        chunks: Annotated[int, Meta(ge=0, le=wire.MAX_INT64)]
        documents: Annotated[int, Meta(ge=0, le=wire.MAX_INT64)]

    class SummaryRecord(msgspec.Struct, forbid_unknown_fields=True, frozen=True, omit_defaults=True):
        id: Annotated[str, Meta(pattern=SUMMARY_ID_PATTERN)]
        version: Annotated[int, Meta(ge=0, le=wire.MAX_INT64)]
        vector: str
        richness: Richness
        level: Annotated[int, Meta(ge=0, le=1024)]
        text: str | None
        parent: Annotated[str, Meta(pattern=SUMMARY_ID_PATTERN)] | None = None

    class RetrieveRequest(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
        question: Annotated[str, Meta(min_length=1, max_length=wire.MAX_QUESTION_CHARS)]
        top_k: Annotated[int, Meta(ge=1, le=100)] = 10
        mode: str = "local"

    return {"PartialAnswer": msgspec.json.Decoder(PartialAnswer),
            "SummaryBatch": msgspec.json.Decoder(list[SummaryRecord]),
            "RetrieveRequest": msgspec.json.Decoder(RetrieveRequest)}


def build_variants(batch: int) -> tuple[dict[str, dict[str, Callable[[bytes], Any]]],
                                         dict[str, dict[str, Callable[[Any], bytes]]], list[str]]:
    """decoders[variant][message](bytes) -> objects; encoders[variant][message](objects) -> bytes."""
    notes: list[str] = []
    loads, dumps = json.loads, json.dumps

    def hand(module: Any) -> dict[str, Callable[[bytes], Any]]:
        return {"PartialAnswer": lambda raw: module.PartialAnswer.from_json(loads(raw)),
                "SummaryBatch": lambda raw: [module.SummaryRecord.from_json(r) for r in loads(raw)],
                "RetrieveRequest": lambda raw: module.RetrieveRequest.from_json(loads(raw))}

    decoders = {"legacy": hand(legacy_wire), "hansa": hand(wire)}
    to_dict_encoder = {"PartialAnswer": lambda obj: dumps(obj.to_json()).encode(),
                       "SummaryBatch": lambda objs: dumps([o.to_json() for o in objs]).encode()}
    encoders: dict[str, dict[str, Callable[[Any], bytes]]] = {"legacy": to_dict_encoder, "hansa": to_dict_encoder}

    models = pydantic_models()
    decoders["pydantic_strict"] = {
        "PartialAnswer": models["PartialAnswer"].model_validate_json,
        "SummaryBatch": models["SummaryBatch"].validate_json,
        "RetrieveRequest": models["RetrieveRequest"].model_validate_json}
    encoders["pydantic_strict"] = {"PartialAnswer": lambda obj: obj.model_dump_json().encode(),
                                   "SummaryBatch": models["SummaryBatch"].dump_json}
    try:
        import msgspec
    except ImportError as exc:
        notes.append(f"msgspec not installed ({exc}): the msgspec variant is skipped")
    else:
        structs = msgspec_models()
        decoders["msgspec"] = {name: dec.decode for name, dec in structs.items()}
        encoders["msgspec"] = {"PartialAnswer": msgspec.json.encode, "SummaryBatch": msgspec.json.encode}
    return decoders, encoders, notes


# (name, message, how to spoil the good JSON, what today's parser does: "refuse" / "accept", field)
def strictness_cases() -> list[tuple[str, str, Callable[[dict[str, Any]], Any], str, str]]:
    def answer(**change: Any) -> Callable[[dict[str, Any]], Any]:
        return lambda good: {**good, **change}

    def without(key: str) -> Callable[[dict[str, Any]], Any]:
        return lambda good: {k: v for k, v in good.items() if k != key}

    def request(**change: Any) -> Callable[[dict[str, Any]], Any]:
        return lambda good: {"question": "Which agency publishes the flood maps?", **change}

    def sentence(relevance: Any) -> Callable[[dict[str, Any]], Any]:
        return lambda good: {**good, "sentences": [["text", "doc", relevance]]}

    return [
        ("unknown key", "PartialAnswer", answer(extra=1), "refuse", "extra"),
        ("missing key", "PartialAnswer", without("confidence"), "refuse", "confidence"),
        ("wrong type (string for a number)", "PartialAnswer", answer(confidence="0.5"), "refuse", "confidence"),
        ("bool where a number is expected", "PartialAnswer", answer(confidence=True), "refuse", "confidence"),
        ("1 where a number is expected", "PartialAnswer", answer(confidence=1), "accept", "confidence"),
        ("number out of range", "PartialAnswer", answer(confidence=1.5), "refuse", "confidence"),
        ("invalid site id", "PartialAnswer", answer(site_id="Site_A"), "refuse", "site_id"),
        ("relevance outside [-1, 1]", "PartialAnswer", sentence(1.5), "refuse", "sentences"),
        ("bool where an int is expected", "RetrieveRequest", request(top_k=True), "refuse", "top_k"),
        ("5.0 where an int is expected", "RetrieveRequest", request(top_k=5.0), "accept", "top_k"),
        ("5.5 where an int is expected", "RetrieveRequest", request(top_k=5.5), "refuse", "top_k"),
        ("int out of range", "RetrieveRequest", request(top_k=101), "refuse", "top_k"),
        ("over-long string", "RetrieveRequest", request(question="x" * (wire.MAX_QUESTION_CHARS + 1)), "refuse",
         "question"),
    ]


def strictness(decoders: dict[str, dict[str, Callable[[bytes], Any]]]) -> list[dict[str, Any]]:
    good = partial_answer_json()
    rows = []
    for name, message, spoil, today, field in strictness_cases():
        raw = json.dumps(spoil(good)).encode()
        row: dict[str, Any] = {"case": name, "message": message, "today": today}
        for variant, decode in decoders.items():
            try:
                decode[message](raw)
            except Exception as exc:  # each library raises its own error type; the text is what we compare
                text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
                row[variant] = {"outcome": "refuse", "as_today": today == "refuse", "names_field": field in str(exc),
                                "input_error": isinstance(exc, InputError), "error": text[:160]}
            else:
                row[variant] = {"outcome": "accept", "as_today": today == "accept"}
        rows.append(row)
    return rows


def import_seconds(statement: str, repeats: int) -> float:
    """Median wall time of `statement` in a fresh interpreter (the module cache is cold each time)."""
    code = f"import time; t = time.perf_counter(); {statement}; print(time.perf_counter() - t)"
    samples = [float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                                    env=None).stdout) for _ in range(repeats)]
    return statistics.median(samples)


def library_bytes(module_name: str) -> int | None:
    try:
        module = __import__(module_name)
    except ImportError:
        return None
    folder = Path(module.__file__).parent
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def main(argv: Sequence[str] | None = None) -> int:
    p = benchlib.parser("models", __doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=None, help="interleaved rounds per variant (default 7; smoke 2)")
    p.add_argument("--calls", type=int, default=None, help="calls per round (default 300; smoke 5)")
    p.add_argument("--batch", type=int, default=400, help="summary records per batch (default 400)")
    args = benchlib.parse(p, list(argv) if argv is not None else None)
    rounds = args.rounds or (2 if args.smoke else 7)
    calls = args.calls or (5 if args.smoke else 300)
    report = benchlib.Report("models", args.smoke, libraries=["pydantic", "pydantic_core", "msgspec"])
    decoders, encoders, notes = build_variants(args.batch)
    for note in notes:
        report.note(note)
    messages = {"PartialAnswer": json.dumps(partial_answer_json()).encode(),
                "SummaryBatch": json.dumps(summary_batch_json(args.batch)).encode()}
    report.params = {"rounds": rounds, "calls": calls, "batch": args.batch,
                     "message_bytes": {k: len(v) for k, v in messages.items()}, "variants": list(decoders)}
    objects = {v: {m: decoders[v][m](raw) for m, raw in messages.items()} for v in decoders}
    for variant in encoders:  # each encoder must give back what its decoder read
        for m, raw in messages.items():
            assert json.loads(encoders[variant][m](objects[variant][m])) == json.loads(raw), (variant, m)
    samples: dict[str, list[float]] = {}
    for r in range(rounds):
        benchlib.progress(f"round {r + 1}/{rounds}")
        for variant in decoders:
            for m, raw in messages.items():
                decode, encode, obj = decoders[variant][m], encoders[variant][m], objects[variant][m]
                t = time.perf_counter()
                for _ in range(calls):
                    decode(raw)
                samples.setdefault(f"decode:{m}:{variant}", []).append(time.perf_counter() - t)
                t = time.perf_counter()
                for _ in range(calls):
                    encode(obj)
                samples.setdefault(f"encode:{m}:{variant}", []).append(time.perf_counter() - t)
    us = {k: round(statistics.median(v) / calls * 1e6, 2) for k, v in samples.items()}
    report.results["microseconds_per_message"] = us
    report.results["strictness"] = strictness(decoders)
    repeats = 2 if args.smoke else 7
    report.results["import_seconds"] = {
        "pydantic (BaseModel, TypeAdapter)": import_seconds("from pydantic import BaseModel, TypeAdapter", repeats),
        "msgspec": import_seconds("import msgspec", repeats) if "msgspec" in decoders else None,
        "hansa.sync.wire": import_seconds("import hansa.sync.wire", repeats),
        "hansa.sync.wire + first PartialAnswer parse (builds the validators)": import_seconds(
            "from hansa.sync.wire import PartialAnswer; PartialAnswer.from_json("
            + repr(partial_answer_json()) + ")", repeats),
    }
    report.results["installed_bytes"] = {name: library_bytes(name) for name in ("pydantic", "pydantic_core", "msgspec")}
    for m in messages:
        for variant in decoders:
            if variant != "legacy":
                report.ratios[f"decode:{m}:{variant}_vs_legacy"] = benchlib.ratio(
                    us[f"decode:{m}:legacy"], us[f"decode:{m}:{variant}"])
                report.ratios[f"encode:{m}:{variant}_vs_legacy"] = benchlib.ratio(
                    us[f"encode:{m}:legacy"], us[f"encode:{m}:{variant}"])
    table = report.results["strictness"]
    report.target("hansa refuses and accepts exactly as today", "all cases", float(sum(r["hansa"]["as_today"] for r in table)),
                  all(r["hansa"]["as_today"] for r in table))
    report.note("ratios > 1: the variant is faster than the hand-written parser (legacy time / variant time)")
    if args.smoke:
        report.note("smoke run: too few calls to compare speeds")
    report.emit(args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
