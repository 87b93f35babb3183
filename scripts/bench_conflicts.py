"""Conflict-aware fusion on contradictions made from real passages: detection precision and recall,
and how often the correct value wins.

Cases: a real question and the passage that answers it — SQuAD (the sentence holding a reference
answer) and MTRAG (the gold passage's sentence closest to the question). A copy of the passage
held by some sites ("liars") has one value in that sentence changed: a number (scaled), a date
(year moved) or a name (swapped for another answer-name from the data). The values to change are
found by plain regular expressions on the *answer* (SQuAD) or the sentence (MTRAG), not by
gateway/query/claims.py, so the extractor's blind spots count against its recall. A change is used only
when the value occurs once in the sentence and the new value is not already there (otherwise the
changed copy still states the original value: see _clean_change). 2-5 sites per case,
the honest side a majority, a tie, or a minority. Each site answers as a hansa site does: its copy's
three sentences closest to the question (the answer sentence always among them), with its own
cosine as relevance; the gateway fuses them with `hansa.gateway.query.fusion.fuse` (the real embedder).

Controls, where every reported conflict is false: all sites hold the same honest copy ("honest"),
and each site holds a different passage of the same SQuAD article ("distinct": related, non-copied
text, the realistic source of false alarms).

Two passes over the same cases: without history (every site weighs 1) and with a SiteReliability
learned along the stream, in which the liars are always drawn from the same three "bad" sites of
a pool of eight: there an honest minority can win on the bad sites' record.

    nice python scripts/bench_conflicts.py [--smoke] [--cases 300] [--out benchmarks/conflicts.json]
"""
from __future__ import annotations

import gzip
import hashlib
import json
import random
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import benchlib  # noqa: E402  (scripts/ is not a package)
from benchlib import Stopwatch, progress  # noqa: E402

DATASETS = benchlib.SHARED_DIR / "datasets"
POOL = [f"site-{i}" for i in range(8)]
BAD = POOL[:3]
SENTENCES_PER_SITE = 3
# (sites, liars): honest majority, tie, honest minority
LAYOUTS = [(2, 1), (3, 1), (4, 1), (5, 1), (5, 2), (3, 2), (4, 2), (4, 3), (5, 3)]
_YEAR = re.compile(r"\b(1[0-9]{3}|20[0-9]{2})\b")
_NUM = re.compile(r"(?<![\w.])\d{1,3}(?:,\d{3})+(?:\.\d+)?|(?<![\w.])\d+(?:\.\d+)?")
_NAME = re.compile(r"^[A-Z][\w'’.-]*(?: (?:of |de |the |van |von )?[A-Z][\w'’.-]*){0,3}$")
_CAP_RUN = re.compile(r"(?<=[a-z,;] )[A-Z][a-z]+(?: [A-Z][a-z]+){0,2}")


class CachingEmbedder:
    """The real embedder, each distinct text embedded once: sites and the gateway embed the same
    sentences, and both passes see the same cases (the vectors are identical; only time is saved,
    and no time is measured here)."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.model_id, self.dim = inner, inner.model_id, inner.dim
        self.cache: dict[str, np.ndarray] = {}

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        missing = list(dict.fromkeys(t for t in texts if t not in self.cache))
        if missing:
            for t, v in zip(missing, self.inner.embed(missing)):
                self.cache[t] = np.asarray(v, dtype=np.float32)
        return np.stack([self.cache[t] for t in texts]) if texts else np.zeros((0, self.dim), np.float32)

    def embed_one(self, text: str) -> np.ndarray:
        return self.embed([text])[0]

    def prefetch(self, texts: Sequence[str], chunk: int = 512) -> None:
        """Embed everything a run will need in large batches (far cheaper than many small calls)."""
        todo = list(dict.fromkeys(t for t in texts if t not in self.cache))
        for i in range(0, len(todo), chunk):
            self.embed(todo[i:i + chunk])


@dataclass
class Case:
    source: str
    question: str
    doc_id: str
    sentences: list[str]  # the honest passage, split
    target: int  # index of the sentence that is changed
    kind: str  # number | date | name | none (a control)
    original: str = ""
    changed: str = ""
    mutated: str = ""  # the changed sentence
    n_sites: int = 0
    liars: int = 0
    distinct: list[tuple[str, list[str]]] = field(default_factory=list)  # control: (doc, sentences) per site


def _split(text: str) -> list[str]:
    from hansa.core.sentences import sentence_spans

    return [" ".join(text[a:b].split()) for a, b in sentence_spans(text) if b - a > 20]


def _format_number(old: str, value: float) -> str:
    if "." in old:
        decimals = len(old.split(".")[1])
        out = f"{value:,.{decimals}f}" if "," in old else f"{value:.{decimals}f}"
    else:
        out = f"{int(round(value)):,}" if "," in old else str(int(round(value)))
    return out


def _mutate_value(kind: str, value: str, rng: random.Random, names: Sequence[str]) -> str | None:
    """A different value of the same kind: numbers scaled by 1.3-3x (or +2..9 when small), years moved
    3-40, names swapped for another name from the data."""
    if kind == "date":
        m = _YEAR.search(value)
        assert m
        year = int(m.group(0)) + rng.choice([-1, 1]) * rng.randint(3, 40)
        return value[: m.start()] + str(year) + value[m.end():]
    if kind == "number":
        m = _NUM.search(value)
        assert m
        old = float(m.group(0).replace(",", ""))
        new = old + rng.randint(2, 9) if old < 10 else old * rng.uniform(1.3, 3.0)
        return value[: m.start()] + _format_number(m.group(0), new) + value[m.end():]
    choices = [n for n in names if n.casefold() not in value.casefold() and value.casefold() not in n.casefold()]
    return rng.choice(choices) if choices else None


def _tokens(text: str) -> set[str]:
    return {t for t in re.findall(r"\w+", text.casefold()) if len(t) > 3 or t.isdigit()}


def _clean_change(sentence: str, value: str, changed: str) -> bool:
    """A change is a clean contradiction when the value occurs once in the sentence and what the
    change brings in is not already stated there ("1963 to 1989" -> "1989 to 1989" says both):
    otherwise the changed copy still states the original, and no reader could tell which it means."""
    new = _tokens(changed) - _tokens(value)
    return sentence.casefold().count(value.casefold()) == 1 and bool(new) and not new & _tokens(sentence)


def _kind_of(answer: str) -> str | None:
    if _YEAR.search(answer):
        return "date"
    if _NUM.search(answer):
        return "number"
    if _NAME.match(answer) and len(answer) > 3:
        return "name"
    return None


def squad_cases(root: Path, n: int, seed: int) -> tuple[list[Case], list[Case]]:
    """Mutable cases and "distinct" controls from SQuAD, sampled by a hash of the question id."""
    passages: dict[str, dict[str, Any]] = {}
    with gzip.open(root / "passages.jsonl.gz", "rt", encoding="utf-8") as fh:
        for line in fh:
            row = json.loads(line)
            passages[row["id"]] = row
    by_doc: dict[str, list[str]] = {}
    for pid, row in passages.items():
        by_doc.setdefault(row["doc_id"], []).append(pid)
    questions = []
    with gzip.open(root / "questions.jsonl.gz", "rt", encoding="utf-8") as fh:
        for line in fh:
            row = json.loads(line)
            if row.get("answerable") and row["source"] == "squad1.1-dev":
                questions.append(row)
    questions.sort(key=lambda r: hashlib.sha256(f"{seed}:{r['id']}".encode()).hexdigest())
    names = sorted({a for q in questions[:5000] for a in q["answers"] if _kind_of(a) == "name"})
    rng = random.Random(seed)
    cases: list[Case] = []
    controls: list[Case] = []
    used_passages: set[str] = set()
    per_kind = {"number": 0, "date": 0, "name": 0}
    for q in questions:
        if len(cases) >= n and len(controls) >= max(1, n // 4):
            break
        pid = q["context_passage"]
        if pid in used_passages:
            continue
        sentences = _split(passages[pid]["text"])
        answer = q["answers"][0]
        kind = _kind_of(answer)
        target = next((i for i, s in enumerate(sentences) if answer in s), None)
        if target is None:
            continue
        if len(controls) < max(1, n // 4) and len(by_doc[passages[pid]["doc_id"]]) >= 5:
            used_passages.add(pid)
            others = [p for p in by_doc[passages[pid]["doc_id"]] if p != pid]
            picked = rng.sample(others, 4)
            distinct = [(pid, sentences)] + [(p, _split(passages[p]["text"])) for p in picked]
            controls.append(Case("squad", q["question"], pid, sentences, target, "none", distinct=distinct))
            continue
        if kind is None or len(cases) >= n or per_kind[kind] > n // 3 + 1:
            continue
        changed = _mutate_value(kind, answer, rng, names)
        if not changed or changed == answer:
            continue
        used_passages.add(pid)
        per_kind[kind] += 1
        if not _clean_change(sentences[target], answer, changed):
            continue
        mutated = sentences[target].replace(answer, changed, 1)
        cases.append(Case("squad", q["question"], pid, sentences, target, kind, answer, changed, mutated))
    return cases, controls


def mtrag_cases(root: Path, n: int, seed: int, embedder: Any) -> list[Case]:
    """MTRAG has no short answers: the gold passage's sentence closest to the question gets its first
    year, number, or mid-sentence capitalized name changed."""
    from hansa.evaluation.mtrag import load_passages, load_questions

    passages = {p.id: p for ps in load_passages(root).values() for p in ps}
    questions = [q for q in load_questions(root, set(passages)) if len(q.gold) == 1]
    questions.sort(key=lambda q: hashlib.sha256(f"{seed}:{q.id}".encode()).hexdigest())
    rng = random.Random(seed + 1)
    names = sorted({m.group(0) for p in list(passages.values())[:400] for m in _CAP_RUN.finditer(p.text)})
    out: list[Case] = []
    used: set[str] = set()
    split = {q.gold[0]: _split(passages[q.gold[0]].text)[:40] for q in questions[: 3 * n]}
    if hasattr(embedder, "prefetch"):
        embedder.prefetch([q.text for q in questions[: 3 * n]] + [s for ss in split.values() for s in ss])
    for q in questions:
        if len(out) >= n:
            break
        pid = q.gold[0]
        if pid in used:
            continue
        sentences = split.get(pid) or _split(passages[pid].text)[:40]
        if len(sentences) < 2:
            continue
        qv = embedder.embed_one(q.text)
        order = np.argsort(-(embedder.embed(sentences) @ qv))
        for i in order[:3]:
            s = sentences[int(i)]
            found = [("date", m.group(0)) for m in _YEAR.finditer(s)] + \
                    [("number", m.group(0)) for m in _NUM.finditer(s) if not _YEAR.fullmatch(m.group(0))] + \
                    [("name", m.group(0)) for m in _CAP_RUN.finditer(s)]
            if not found:
                continue
            kind, value = found[0]
            changed = _mutate_value(kind, value, rng, names)
            if not changed or not _clean_change(s, value, changed):
                continue
            used.add(pid)
            out.append(Case("mtrag", q.text, pid, sentences, int(i), kind, value, changed,
                            s.replace(value, changed, 1)))
            break
    return out


def site_answer(site: str, doc_id: str, sentences: list[str], target: int, question_vec: np.ndarray,
                embedder: Any) -> Any:
    """A hansa site's partial answer over its copy: its SENTENCES_PER_SITE sentences closest to the
    question (the target sentence always included), each with the site's own cosine."""
    from hansa.gateway.client import OK, SiteCall
    from hansa.sync.wire import Citation, PartialAnswer

    scores = [float(v) for v in embedder.embed(sentences) @ question_vec]
    order = [i for i in np.argsort(-np.asarray(scores)) if i != target][: SENTENCES_PER_SITE - 1]
    picked = sorted([target, *[int(i) for i in order]]) if 0 <= target < len(sentences) else \
        sorted(int(i) for i in np.argsort(-np.asarray(scores))[:SENTENCES_PER_SITE])
    chosen = tuple((sentences[i], doc_id, round(max(-1.0, min(1.0, scores[i])), 6)) for i in picked)
    best = max(scores[i] for i in picked)
    answer = PartialAnswer(site, " ".join(s for s, _, _ in chosen), (Citation(site, doc_id, doc_id, best),),
                           0.8, chosen)
    return SiteCall(site, OK, 1.0, 0, 0, answer=answer)


@dataclass
class Tally:
    cases: int = 0
    detected: int = 0
    correct: int = 0  # true conflict detected and the honest side won
    false_in_answer: int = 0  # the changed sentence made the answer
    reported: int = 0  # conflicts reported in these cases
    true_reported: int = 0

    def add(self, other: "Tally") -> None:
        for k in vars(self):
            setattr(self, k, getattr(self, k) + getattr(other, k))

    def json(self) -> dict[str, Any]:
        return {**vars(self),
                "recall": round(self.detected / self.cases, 4) if self.cases else None,
                "correct_wins": round(self.correct / self.cases, 4) if self.cases else None,
                "correct_wins_when_detected": round(self.correct / self.detected, 4) if self.detected else None,
                "false_value_in_answer": round(self.false_in_answer / self.cases, 4) if self.cases else None,
                "precision": round(self.true_reported / self.reported, 4) if self.reported else None}


def run_case(case: Case, sites: list[str], liars: set[str], embedder: Any, reliability: Any) -> Tally:
    from hansa.gateway.query.fusion import fuse

    qv = embedder.embed_one(case.question)
    calls = []
    for site in sites:
        if case.distinct:
            doc, sentences = case.distinct[sites.index(site) % len(case.distinct)]
            calls.append(site_answer(site, doc, sentences, -1, qv, embedder))
            continue
        sentences = list(case.sentences)
        if site in liars:
            sentences[case.target] = case.mutated
        calls.append(site_answer(site, case.doc_id, sentences, case.target, qv, embedder))
    fused = fuse(qv, calls, embedder, reliability=reliability)
    t = Tally(cases=1 if case.kind != "none" else 0, reported=len(fused.conflicts))
    honest = set(sites) - liars
    for c in fused.conflicts:
        side_sets = [set(s.sites) for s in c.sides]
        true = bool(liars) and any(s <= liars for s in side_sets) and any(s <= honest for s in side_sets)
        if true:
            t.true_reported += 1
            if not t.detected:
                t.detected = 1
                t.correct = int(set(c.winner.sites) <= honest)
    if case.kind != "none":
        t.false_in_answer = int(any(s.text == case.mutated for s in fused.sentences))
    return t


def run_pass(cases: list[Case], controls: list[Case], embedder: Any, use_history: bool, seed: int) -> dict[str, Any]:
    from hansa.gateway.query.reliability import SiteReliability

    reliability = SiteReliability(None) if use_history else None
    rng = random.Random(seed)
    by: dict[str, Tally] = {}
    total = Tally()
    controls_out = {"honest": Tally(), "distinct": Tally()}
    stream: list[tuple[str, Case, tuple[int, int] | None]] = []
    for i, case in enumerate(cases):
        stream.append(("case", case, LAYOUTS[i % len(LAYOUTS)]))
    for case in controls:
        stream.append(("honest", case, None))
        stream.append(("distinct", case, None))
    rng.shuffle(stream)
    for done, (what, case, layout) in enumerate(stream):
        if done and done % 50 == 0:
            progress(f"  {done}/{len(stream)}")
        if what == "case":
            n_sites, n_liars = layout  # type: ignore[misc]
            liars = set(rng.sample(BAD, n_liars))
            sites = sorted(liars | set(rng.sample([s for s in POOL if s not in BAD], n_sites - n_liars)))
            t = run_case(case, sites, liars, embedder, reliability)
            honest = n_sites - n_liars
            balance = "honest_majority" if honest > n_liars else "tie" if honest == n_liars else "honest_minority"
            for key in (f"sites={n_sites}", balance, f"kind={case.kind}", f"source={case.source}"):
                by.setdefault(key, Tally()).add(t)
            total.add(t)
        else:
            sites = sorted(rng.sample(POOL, 5 if what == "distinct" else rng.randint(2, 5)))
            c = Case(case.source, case.question, case.doc_id, case.sentences, case.target, "none",
                     distinct=case.distinct if what == "distinct" else [])
            t = run_case(c, sites, set(), embedder, reliability)
            controls_out[what].add(t)
            total.add(t)
    out = {"all": total.json(), "by": {k: v.json() for k, v in sorted(by.items())},
           "controls": {k: {"cases": sum(1 for w, _, _ in stream if w == k), "false_conflicts": v.reported}
                        for k, v in controls_out.items()}}
    if reliability is not None:
        out["reliability_after"] = {r["site_id"]: r["reliability"] for r in reliability.view()}
    return out


def main(argv: Sequence[str] | None = None) -> int:
    p = benchlib.parser("conflicts", __doc__.split("\n\n")[0])
    p.add_argument("--cases", type=int, default=None, help="changed passages per source (default 150; smoke 4)")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--datasets", type=Path, default=DATASETS, help="folder holding squad/ and mtrag/")
    args = benchlib.parse(p, list(argv) if argv is not None else None)
    n = args.cases or (4 if args.smoke else 150)
    embedder = CachingEmbedder(benchlib.embedder())
    report = benchlib.Report("conflicts", args.smoke, libraries=("igraph", "sentence-transformers"))
    report.params = {"cases_per_source": n, "seed": args.seed, "layouts_sites_liars": LAYOUTS,
                     "site_pool": len(POOL), "bad_sites": len(BAD), "sentences_per_site": SENTENCES_PER_SITE}
    with Stopwatch() as build:
        progress("building cases from SQuAD and MTRAG")
        cases, controls = squad_cases(args.datasets / "squad", n, args.seed)
        cases += mtrag_cases(args.datasets / "mtrag", n, args.seed, embedder)
    with Stopwatch() as warm:
        progress("embedding every sentence and question in large batches")
        texts = [c.question for c in cases + controls] + [c.mutated for c in cases if c.mutated]
        texts += [s for c in cases + controls for s in c.sentences]
        texts += [s for c in controls for _, ss in c.distinct for s in ss]
        embedder.prefetch(texts)
    report.params["cases"] = {"embed_seconds": round(warm.seconds, 2), "changed": len(cases), "controls": len(controls), "build_seconds": round(build.seconds, 2)}
    for use_history in (False, True):
        name = "with_history" if use_history else "no_history"
        progress(f"fusing {len(cases)} changed cases and {2 * len(controls)} controls ({name})")
        with Stopwatch() as sw:
            report.results[name] = run_pass(cases, controls, embedder, use_history, args.seed)
        report.results[name]["seconds"] = round(sw.seconds, 2)
    base = report.results["no_history"]["all"]
    hist = report.results["with_history"]["all"]
    report.ratios["correct_wins_history_vs_none"] = benchlib.ratio(hist["correct_wins"], base["correct_wins"])
    report.target("detection_precision", ">= 0.9 (no history)", base["precision"],
                  None if args.smoke or base["precision"] is None else base["precision"] >= 0.9)
    report.target("detection_recall", ">= 0.8 (no history)", base["recall"],
                  None if args.smoke or base["recall"] is None else base["recall"] >= 0.8)
    maj = report.results["no_history"]["by"].get("honest_majority", {}).get("correct_wins_when_detected")
    report.target("majority_correct_wins", "honest majority wins >= 0.95 of detected conflicts", maj,
                  None if args.smoke or maj is None else maj >= 0.95)
    report.note("recall: share of changed cases where a conflict separating the changed copies' sites from the "
                "honest ones is reported; precision: such conflicts over all reported (controls included)")
    report.note("with_history: liars are always drawn from the same 3 of 8 sites, so their record can outweigh "
                "an honest minority; no_history weighs every site 1")
    if args.smoke:
        report.note("smoke run: too few cases to judge the targets (met = null)")
    report.emit(args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
