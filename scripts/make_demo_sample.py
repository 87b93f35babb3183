#!/usr/bin/env python3
"""Regenerate hansa's bundled demo sample (cli/data/) from ../shared/datasets/mtrag.

Three sites (clapnq: Wikipedia, fiqa: finance Q&A, govt: US government pages), 40 passages each,
and two standalone questions per site whose gold passages are in the sample, then one question
no site can answer (OUT_OF_SCOPE: the demo shows the gateway saying so). Deterministic: the
same dataset gives byte-identical files. MTRAG is Apache-2.0 (IBM); cli/data/NOTICE says so.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

from hansa.evaluation.mtrag import load_passages, load_rewrites

SITES = ("clapnq", "fiqa", "govt")
PER_SITE = 40
QUESTIONS_PER_SITE = 2
# A factoid none of the three corpora holds (written here, not taken from MTRAG)
OUT_OF_SCOPE = "Who won the 1998 FIFA World Cup final?"


def main(root: Path, out: Path) -> None:
    passages = load_passages(root)
    known = {p.id for ps in passages.values() for p in ps}
    rewrites = load_rewrites(root, known)
    docs, questions = [], []
    for site in SITES:
        by_id = {p.id: p for p in passages[site]}
        picked: list[str] = []
        qs = [q for q in rewrites if q.domain == site and len(q.gold) <= 3][:QUESTIONS_PER_SITE]
        for q in qs:
            picked += [g for g in q.gold if g not in picked]
            questions.append({"site": site, "question": q.text, "gold": list(q.gold)})
        for p in passages[site]:
            if len(picked) >= PER_SITE:
                break
            if p.id not in picked:
                picked.append(p.id)
        docs += [{"site": site, "id": pid, "title": by_id[pid].title, "text": by_id[pid].text} for pid in sorted(picked)]
    questions.append({"site": None, "question": OUT_OF_SCOPE, "gold": [], "answerable": False})
    out.mkdir(parents=True, exist_ok=True)
    (out / "demo_passages.jsonl").write_text("".join(json.dumps(d, ensure_ascii=False) + "\n" for d in docs), encoding="utf-8")
    (out / "demo_questions.jsonl").write_text("".join(json.dumps(q, ensure_ascii=False) + "\n" for q in questions), encoding="utf-8")
    (out / "NOTICE").write_text(
        "demo_passages.jsonl and demo_questions.jsonl are a sample of MTRAG / MTRAG-UN\n"
        "(IBM, github.com/IBM/mt-rag-benchmark, commit cc5b1d481b391181b89f7ced860308482e785463),\n"
        "licensed under the Apache License 2.0. Passages come from ClapNQ (English Wikipedia,\n"
        "CC BY-SA), FiQA and US government web pages. Regenerate with scripts/make_demo_sample.py.\n",
        encoding="utf-8",
    )
    print(f"{len(docs)} passages, {len(questions)} questions -> {out}")


if __name__ == "__main__":
    repo = Path(__file__).resolve().parents[1]
    root = Path(sys.argv[1]) if len(sys.argv) > 1 else repo.parent / "shared" / "datasets" / "mtrag"
    main(root, repo / "cli" / "data")
