"""MTRAG / MTRAG-UN (IBM, Apache-2.0) as a federation: passages per domain, questions with gold ids.

Why here: `hansa demo` ships a small sample made from it and `hansa eval` measures routing and
answers on all of it; both must see the same passages, titles, gold sets and reference responses. The data itself is never copied into
the repository except the demo sample (scripts/make_demo_sample.py), which keeps its license notice.
"""
from __future__ import annotations

import csv
import json
import re
from collections import defaultdict
from pathlib import Path
from typing import Sequence

from hansa.core.errors import InputError
from hansa.evaluation.datasets import (
    ANSWERABLE,
    PARTIAL,
    UNANSWERABLE,
    UNDERSPECIFIED,
    Dataset,
    Passage,
    Question,
    stable_hash,
)

DOMAINS = ("clapnq", "cloud", "fiqa", "govt")
# `Collection` values in the generation tasks -> our domain (site) names
COLLECTION_TO_DOMAIN = {"clapnq": "clapnq", "ibmcloud": "cloud", "fiqa": "fiqa", "govt": "govt"}
_OFFSETS = re.compile(r"-\d+-\d+$")
# MTRAG-UN `answerability` -> question kind; UNANSWERABLE and UNDERSPECIFIED measure abstention
KINDS = {"ANSWERABLE": ANSWERABLE, "PARTIAL": PARTIAL, "UNANSWERABLE": UNANSWERABLE, "UNDERSPECIFIED": UNDERSPECIFIED}
CAVEAT = ("Sites hold only MTRAG gold passages (no distractors from their own domain): absolute recall is "
          "optimistic; compare strategies with each other.")


def parent_document_id(passage_id: str) -> str:
    """`<doc>-<start>-<end>` -> `<doc>`: passages of one document must land on one site."""
    return _OFFSETS.sub("", passage_id)


def _title(text: str) -> str:
    first = text.strip().split("\n", 1)[0].strip()
    words = first.split()
    return " ".join(words[:12]) + ("…" if len(words) > 12 else "")


def _passage(pid: str, domain: str, title: str, text: str) -> Passage:
    return Passage(id=pid, title=title, text=text.strip(), doc_id=parent_document_id(pid), domain=domain)


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
                seen[pid] = _passage(pid, domain, _title(ctx["text"]), ctx["text"])
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
                seen[pid] = _passage(pid, domain_of[pid], title, text)
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


def _task_question(row: dict, gold: Sequence[str]) -> Question:
    turns = tuple(t["text"].strip() for t in row["input"] if t.get("speaker") == "user")
    answerability = (row.get("answerability") or ["ANSWERABLE"])[0]
    references = tuple(t["text"].strip() for t in row.get("targets", []) if t.get("text", "").strip())
    return Question(id=row["task_id"], text=turns[-1], gold=tuple(gold), conversation=turns, references=references,
                    kind=KINDS.get(answerability, ANSWERABLE), domain=COLLECTION_TO_DOMAIN[row["Collection"]],
                    source="mtragun")


def load_questions(root: Path, known_passages: set[str] | None = None) -> list[Question]:
    """MTRAG-UN tasks that have qrels: last user turn, the whole conversation, gold passage ids,
    reference responses."""
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
        out.append(_task_question(row, gold))
    return out


def load_unanswerable(root: Path) -> list[Question]:
    """MTRAG-UN's UNANSWERABLE and UNDERSPECIFIED tasks: the right response is to abstain (or ask back)."""
    ref = root / "mtragun-human" / "generation_tasks" / "reference.jsonl"
    out = []
    for line in ref.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        question = _task_question(row, ())
        if question.kind in (UNANSWERABLE, UNDERSPECIFIED):
            out.append(question)
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
                out.append(Question(id=row["_id"], text=text, gold=tuple(gold), conversation=(text,), domain=domain,
                                    source="mtrag-rewrite"))
    return out


def split_sites(passages: dict[str, list[Passage]] | Sequence[Passage], n_sites: int) -> dict[str, list[Passage]]:
    """4 sites: one per domain. 16: each domain split in 4 by a hash of the parent document id
    (a random sharding, the hardest case for routing, that keeps a document's passages together)."""
    if not isinstance(passages, dict):
        by_domain: dict[str, list[Passage]] = defaultdict(list)
        for p in passages:
            by_domain[p.domain].append(p)
        passages = dict(by_domain)
    domains = sorted(passages)
    if n_sites == len(domains):
        return {d: list(passages[d]) for d in domains}
    per = n_sites // len(domains)
    if per < 1 or per * len(domains) != n_sites:
        raise InputError(f"MTRAG federations must have a multiple of {len(domains)} sites, not {n_sites}")
    out: dict[str, list[Passage]] = {f"{d}-{i}": [] for d in domains for i in range(per)}
    for d in domains:
        for p in passages[d]:
            out[f"{d}-{stable_hash(p.doc_id) % per}"].append(p)
    return {k: v for k, v in out.items() if v}


def load_dataset(root: Path) -> Dataset:
    """Every gold passage; MTRAG-UN last turns with qrels, MTRAG rewrites whose gold passages all have
    text, and MTRAG-UN's unanswerable/underspecified tasks (abstention)."""
    if not (root / "mtragun-human" / "generation_tasks" / "reference.jsonl").is_file():
        raise InputError(f"{root} is not the MTRAG folder: mtragun-human/generation_tasks/reference.jsonl is missing")
    by_domain = load_passages(root)
    passages = tuple(p for d in sorted(by_domain) for p in by_domain[d])
    known = {p.id for p in passages}
    questions = load_questions(root, known) + load_rewrites(root, known) + load_unanswerable(root)
    return Dataset("mtrag", passages, tuple(questions), CAVEAT, split_sites, federation_sizes=(4, 16))
