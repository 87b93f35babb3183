"""Calibration rows from an evaluation's own federation: fit the gate and abstention at the size
they are reported at.

Why here and not in a script of its own: the rows must come from exactly the sites, questions and
split rule the report is measured on (`hansa eval --split fit --calibration-rows ROWS`), then
`hansa gateway calibrate --data ROWS --out CAL` fits them, and `hansa eval --split report
--calibration CAL` reports the calibrated gate (`gated`) and abstention on questions the fit never
saw. Origins follow the `gated` strategy's rule: a gold site (in-domain) and a site holding none of
the question's gold (out-of-domain), so the rows and the reported Table 2 mean the same thing.
Tier rows (the tiered router's gaps) and router rows (the learned router's features of every
ranked site, labelled by the gold sites) call no site, so `--routing-only` collects them alone: the
cheap way to fit tier cut-offs onto an existing calibration (`hansa gateway calibrate --onto`) and
to train the learned router (`hansa gateway router train --rows`).
"""
from __future__ import annotations

from typing import Any, Collection, Sequence

from hansa.evaluation.datasets import Question
from hansa.gateway.query.calibrate import LabelledQuestion, Row, abstain_rows, escalate_rows, gate_rows, reader_rows, tier_rows


# How deep escalate rows follow a question's ranking: every schedule the fit chooses among ends at
# 16 sites, and each row costs one site call.
ESCALATE_ROW_SITES = 16
# The kinds of rows a question can give (tiers and router rows come from collect_routing_rows).
ROW_KINDS = ("gate", "escalate", "reader", "abstain")


def collect_rows(gateway: Any, question: Question, text: str, gold_sites: Sequence[str], other: str | None,
                 kinds: Collection[str] = ROW_KINDS) -> list[Row]:
    """The gate rows (answerable questions: one per origin), the escalate rows (every prefix of its
    ranking), the reader row (a gateway with a reader) and the abstain row of one question, of
    the `kinds` asked for: escalate rows call up to 16 sites a question, so fitting abstention alone
    need not pay for them."""
    labelled = LabelledQuestion(question.id, text, tuple(gold_sites), question.answerable)
    origins = ([gold_sites[0]] if gold_sites else []) + ([other] if other else [])
    rows = gate_rows(gateway, [labelled], origins) if "gate" in kinds and question.answerable and gold_sites else []
    if "escalate" in kinds:
        rows += escalate_rows(gateway, [labelled], max_sites=min(ESCALATE_ROW_SITES, len(gateway.registry.list())))
    if "reader" in kinds and gateway.engine.reading is not None:
        rows += reader_rows(gateway, [labelled])
    return rows + (abstain_rows(gateway, [labelled]) if "abstain" in kinds else [])


def collect_routing_rows(gateway: Any, questions: Sequence[Question], texts: Sequence[str],
                         gold_sites: Sequence[Sequence[str]]) -> list[Row]:
    """The tiers rows and the learned router's rows of every question (`texts`: what the gateway
    routes for each); neither calls a site."""
    from hansa.gateway.query.learned.train import router_rows

    labelled = [LabelledQuestion(q.id, text, tuple(gold), q.answerable)
                for q, text, gold in zip(questions, texts, gold_sites)]
    return tier_rows(gateway, labelled) + router_rows(gateway, labelled)
