"""How often the gateway's screen (gateway.query.fusion) flags honest text: each SQuAD question against
every sentence of its gold paragraph (the text most like its question an honest site holds), and
every corpus sentence for instructions.

    python -m hansa.evaluation.screening --squad ../shared/datasets/squad [--limit N]
"""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import Sequence

from hansa.core.sentences import split_sentences
from hansa.evaluation.squad import load_dataset
from hansa.gateway.query.fusion import echoes, instructs


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m hansa.evaluation.screening", description=__doc__.split("\n\n")[0])
    p.add_argument("--squad", type=Path, required=True, help="../shared/datasets/squad")
    p.add_argument("--limit", type=int, default=0, help="questions to check (0: all)")
    args = p.parse_args(argv)
    ds = load_dataset(args.squad)
    sentences = {x.id: split_sentences(x.text) for x in ds.passages}
    questions = ds.questions[: args.limit] if args.limit else ds.questions
    pairs = echo = 0
    examples: list[str] = []
    for q in questions:
        for g in q.gold:
            for s in sentences.get(g, ()):
                pairs += 1
                if echoes(q.text, s):
                    echo += 1
                    examples.append(f"{q.text} || {s}")
    flagged = [s for texts in sentences.values() for s in texts if instructs(s)]
    total = sum(len(v) for v in sentences.values())
    print(f"echo: {echo} of {pairs} (question, gold-paragraph sentence) pairs over {len(questions)} questions")
    print(f"instruction: {len(flagged)} of {total} corpus sentences")
    for line in [*examples[:10], *flagged[:10]]:
        print("  ", line[:240])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
