"""MTRAG / MTRAG-UN (IBM, Apache-2.0) as a federation: passages per domain, questions with gold ids.

Why here: `hansa demo` ships a small sample made from it and `hansa eval` measures routing on all
of it; both must see the same passages, titles and gold sets. The data itself is never copied into
the repository except the demo sample (scripts/make_demo_sample.py), which keeps its license notice.
"""
from __future__ import annotations

import csv
import json
import re
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

DOMAINS = ("clapnq", "cloud", "fiqa", "govt")
# `Collection` values in the generation tasks -> our domain (site) names
COLLECTION_TO_DOMAIN = {"clapnq": "clapnq", "ibmcloud": "cloud", "fiqa": "fiqa", "govt": "govt"}
_OFFSETS = re.compile(r"-\d+-\d+$")


@dataclass(frozen=True)
class Passage:
    id: str
    domain: str
    title: str
    text: str

    @property
    def parent_id(self) -> str:
        return parent_document_id(self.id)


@dataclass(frozen=True)
class Question:
    id: str
    domain: str
    text: str  # the last user turn (or the standalone rewrite)
    conversation: tuple[str, ...]  # every user turn up to this one
    gold: tuple[str, ...]  # gold passage ids


def parent_document_id(passage_id: str) -> str:
    """`<doc>-<start>-<end>` -> `<doc>`: passages of one document must land on one site."""
    return _OFFSETS.sub("", passage_id)


def _title(text: str) -> str:
    first = text.strip().split("\n", 1)[0].strip()
    words = first.split()
    return " ".join(words[:12]) + ("…" if len(words) > 12 else "")


def _clean(text: str) -> str:
    return text.strip()


def load_passages(root: Path) -> dict[str, list[Passage]]:
    """Every gold passage with text, per domain, deduplicated by id, in a stable order."""
    seen: dict[str, Passage] = {}
    ref = root / "mtragun-human" / "generation_tasks" / "reference.jsonl"
    for line in ref.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        domain = COLLECTION_TO_DOMAIN[row["Collection"]]
        for ctx in row.get("contexts", []):
            pid = ctx["document_id"]
            if pid not in seen and ctx.get("text", "").strip():
                seen[pid] = Passage(pid, domain, _title(ctx["text"]), _clean(ctx["text"]))
    evals = root / "mtrag-human" / "evaluations" / "reference_subset_with_human_evaluations.json"
    if evals.is_file():
        # Texts sit in `documents`; the domain comes from the tasks that cite them
        # (`Collection` like "mt-rag-govt-elser-512-100-20240611").
        data = json.loads(evals.read_text(encoding="utf-8"))
        domain_of: dict[str, str] = {}
        for task in data.get("tasks", []):
            collection = str(task.get("Collection", ""))
            domain = next((d for c, d in COLLECTION_TO_DOMAIN.items() if f"-{c}-" in collection), None)
            for ctx in task.get("contexts", []) or []:
                if domain and ctx.get("document_id"):
                    domain_of[ctx["document_id"]] = domain
        for doc in data.get("documents", []):
            pid, text = doc.get("document_id"), doc.get("text", "")
            if pid and pid not in seen and text.strip() and pid in domain_of:
                title = (doc.get("title") or "").strip() or _title(text)
                seen[pid] = Passage(pid, domain_of[pid], title, _clean(text))
    out: dict[str, list[Passage]] = defaultdict(list)
    for pid in sorted(seen):
        out[seen[pid].domain].append(seen[pid])
    return dict(out)


def _read_qrels(path: Path) -> dict[str, list[str]]:
    gold: dict[str, list[str]] = defaultdict(list)
    with path.open(encoding="utf-8") as fh:
        for row in csv.DictReader(fh, delimiter="\t"):
            if int(row["score"]) > 0:
                gold[row["query-id"]].append(row["corpus-id"])
    return gold


def load_questions(root: Path, known_passages: set[str] | None = None) -> list[Question]:
    """MTRAG-UN tasks that have qrels: last user turn, the whole conversation, gold passage ids."""
    ref = root / "mtragun-human" / "generation_tasks" / "reference.jsonl"
    qrels: dict[str, list[str]] = {}
    for domain in DOMAINS:
        qrels.update(_read_qrels(root / "mtragun-human" / "retrieval_tasks" / "qrels" / f"{domain}.tsv"))
    out = []
    for line in ref.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        gold = qrels.get(row["task_id"])
        if not gold:
            continue
        if known_passages is not None and not all(g in known_passages for g in gold):
            continue
        turns = tuple(t["text"].strip() for t in row["input"] if t.get("speaker") == "user")
        out.append(Question(row["task_id"], COLLECTION_TO_DOMAIN[row["Collection"]], turns[-1], turns, tuple(gold)))
    return out


def load_rewrites(root: Path, known_passages: set[str]) -> list[Question]:
    """MTRAG's standalone rewrites whose gold passages all have text here."""
    out = []
    for domain in DOMAINS:
        base = root / "mtrag-human" / "retrieval_tasks" / domain
        qrels = _read_qrels(base / "qrels" / "dev.tsv")
        for line in (base / f"{domain}_rewrite.jsonl").read_text(encoding="utf-8").splitlines():
            row = json.loads(line)
            gold = qrels.get(row["_id"])
            if gold and all(g in known_passages for g in gold):
                text = re.sub(r"^\|user\|:\s*", "", row["text"]).strip().strip('"')
                out.append(Question(row["_id"], domain, text, (text,), tuple(gold)))
    return out
