"""What every evaluation dataset is reduced to: passages (grouped into documents), questions with
their gold passages and reference answers, and a deterministic way to shard documents over sites.

Why one shape: the runner, metrics and report must not care whether a question came from MTRAG or
SQuAD; each loader (evaluation.mtrag, evaluation.squad) maps its files onto these types once.
"""
from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping, Sequence

from hansa.core.errors import InputError

DATA_ENV = "HANSA_EVAL_DATA"
DATASETS = ("mtrag", "squad")

# Question kinds. Abstention is measured on the unanswerable kinds, coverage on the answerable ones.
ANSWERABLE = "answerable"
PARTIAL = "partial"
UNANSWERABLE = "unanswerable"
UNDERSPECIFIED = "underspecified"
# a question of the other dataset, which no site of this federation holds (evaluation.runner.out_of_scope_questions)
OUT_OF_SCOPE = "out_of_scope"
OUT_OF_SCOPE_ID = "out-of-scope:"  # the prefix of their ids (calibration rows keep it: reader_abstain tells them apart)
ANSWERABLE_KINDS = frozenset({ANSWERABLE, PARTIAL})


@dataclass(frozen=True)
class Passage:
    id: str
    title: str
    text: str
    doc_id: str  # passages of one document always land on one site
    domain: str = ""  # MTRAG's collection; empty where a dataset has none

    @property
    def parent_id(self) -> str:  # the name MTRAG code used for doc_id
        return self.doc_id

    def as_document(self) -> dict[str, str]:
        """What a site ingests (one JSON line per passage)."""
        return {"id": self.id, "title": self.title, "text": self.text}


@dataclass(frozen=True)
class Question:
    id: str
    text: str  # the question as asked (last user turn, standalone rewrite, SQuAD question)
    gold: tuple[str, ...] = ()  # gold passage ids (empty for unanswerable questions)
    conversation: tuple[str, ...] = ()  # every user turn up to this one (MTRAG-UN)
    answers: tuple[str, ...] = ()  # short reference answers (SQuAD)
    references: tuple[str, ...] = ()  # reference responses (MTRAG-UN `targets`)
    kind: str = ANSWERABLE
    domain: str = ""
    source: str = ""

    @property
    def answerable(self) -> bool:
        return self.kind in ANSWERABLE_KINDS

    def asked(self, use_conversation: bool) -> str:
        return " ".join(self.conversation) if use_conversation and self.conversation else self.text


def stable_hash(*parts: str) -> int:
    """A process-independent integer of `parts` (Python's hash() is salted per process)."""
    return int(hashlib.sha256("\x1f".join(parts).encode("utf-8")).hexdigest(), 16)


@dataclass(frozen=True)
class Dataset:
    name: str
    passages: tuple[Passage, ...]
    questions: tuple[Question, ...]
    caveat: str
    sharder: Callable[[Sequence[Passage], int], dict[str, list[Passage]]] = field(repr=False, compare=False)
    federation_sizes: tuple[int, ...] = ()  # the sizes the dataset's tables report

    def sites(self, n_sites: int) -> dict[str, list[Passage]]:
        """{site_id: passages} for an n-site federation; 1 is the centralized site."""
        if n_sites == 1:
            return {"central": list(self.passages)}
        return {s: ps for s, ps in self.sharder(self.passages, n_sites).items() if ps}

    @property
    def raw_bytes(self) -> int:
        return sum(len(p.text.encode("utf-8")) for p in self.passages)


def shard_by_document(passages: Sequence[Passage], n_sites: int, prefix: str = "s") -> dict[str, list[Passage]]:
    """Random sharding: a document goes to site `sha256(doc_id) mod n` (the hardest case for
    routing: sites have no topic), all its passages together."""
    if n_sites < 1:
        raise InputError(f"a federation needs at least one site, not {n_sites}")
    width = len(str(n_sites - 1))
    out: dict[str, list[Passage]] = {f"{prefix}{i:0{width}d}": [] for i in range(n_sites)}
    for p in passages:
        out[f"{prefix}{stable_hash(p.doc_id) % n_sites:0{width}d}"].append(p)
    return out


def resolve_data_dir(dataset: str, data: Path | None, env: Mapping[str, str] | None = None) -> Path:
    """The dataset folder: `--data`, else $HANSA_EVAL_DATA (the folder holding `mtrag/` and `squad/`,
    or the dataset folder itself). Nothing is guessed from where the package is installed."""
    env = os.environ if env is None else env
    if data is None:
        root = env.get(DATA_ENV, "").strip()
        if not root:
            raise InputError(
                f"no data for {dataset!r}: pass --data DIR (the {dataset} folder) or set {DATA_ENV} "
                f"to a folder holding {dataset}/ (e.g. /work/shared/datasets)"
            )
        data = Path(root).expanduser()
        if (data / dataset).is_dir():
            data = data / dataset
    if not data.is_dir():
        raise InputError(f"{data} is not a directory: point --data (or {DATA_ENV}) at the {dataset} dataset folder")
    return data


def load_dataset(name: str, data: Path) -> Dataset:
    if name == "mtrag":
        from hansa.evaluation.mtrag import load_dataset as load
    elif name == "squad":
        from hansa.evaluation.squad import load_dataset as load
    else:
        raise InputError(f"unknown dataset {name!r}: choose from {', '.join(DATASETS)}")
    return load(data)
