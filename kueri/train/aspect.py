"""Would a question's aspect help the ranking? Cross-validated on the Touché 2020/2021 judgments.

    .venv/bin/python scripts/cv_aspect.py --run RUN [--folds 5]

RUN is ``kueri run --config default`` on the shipped sample's 50 topics. For each topic whose title names an
aspect (kueri.questions.analyse: "healthier", "for plants", ...), the re-ranking adds ``weight`` to the score
of every hit that speaks of the aspect (kueri.questions.speaks_of) and sorts again. ``weight`` is chosen on
the training folds (the grid below; 0 is "no change") by nDCG@5 against the 2020/2021 relevance judgments of
the hits' documents, and measured on the held-out fold. Topics without an aspect are not changed and not
counted. The 2022 judgments are not read.
"""

from __future__ import annotations

import gzip
import json
import math
import random
from collections.abc import Sequence

from kueri import resources
from kueri.cli.script import script_parser, start
from kueri.parse import read_topics
from kueri.questions import analyse, aspect_terms, speaks_of
from kueri.records import Hit
from kueri.runfile import read_run
from kueri.train.judgments import earlier_judgments

WEIGHTS = (0.0, 0.1, 0.25, 0.5, 1.0, 2.0)
DEPTH = 5


def ndcg(hits: Sequence[Hit], judged: dict[str, int], depth: int = DEPTH) -> float:
    gains = [judged.get(hit.doc.split("___", 1)[0], 0) for hit in hits[:depth]]
    ideal = sorted(judged.values(), reverse=True)[:depth]
    dcg = sum(g / math.log2(i + 2) for i, g in enumerate(gains))
    best = sum(g / math.log2(i + 2) for i, g in enumerate(ideal))
    return dcg / best if best else 0.0


def reranked(hits: Sequence[Hit], about: set[str], weight: float) -> list[Hit]:
    return sorted(hits, key=lambda h: -(h.score + (weight if h.doc in about else 0.0)))


def main(argv: Sequence[str] | None = None) -> int:
    parser = script_parser(__doc__)
    parser.add_argument("--run", required=True)
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    args = start(parser.parse_args(argv))
    run = read_run(args.run)
    judgments = earlier_judgments()
    with gzip.open(resources.sample() / "passages.jsonl.gz", "rt", encoding="utf-8") as handle:
        texts = {p["id"]: p["contents"] for p in map(json.loads, handle)}
    cases = []
    for topic in read_topics(resources.sample() / "topics.xml"):
        terms = aspect_terms(analyse(topic.title).aspect)
        if not terms or topic.number not in run or not judgments.get(topic.number):
            continue
        about = {h.doc for h in run[topic.number] if speaks_of(texts.get(h.doc, ""), terms)}
        cases.append((topic.number, run[topic.number], about, judgments[topic.number]))
    random.Random(args.seed).shuffle(cases)
    folds = [cases[i::args.folds] for i in range(args.folds)]
    before, after, chosen = [], [], []
    for i, test in enumerate(folds):
        train = [case for j, fold in enumerate(folds) if j != i for case in fold]

        def mean_ndcg(weight: float, cases: list) -> float:
            return sum(ndcg(reranked(hits, about, weight), judged) for _, hits, about, judged in cases) / len(cases)

        weight = max(WEIGHTS, key=lambda w: (round(mean_ndcg(w, train), 6), -w))  # ties: the smaller change
        chosen.append(weight)
        before += [ndcg(hits, judged) for _, hits, _, judged in test]
        after += [ndcg(reranked(hits, about, weight), judged) for _, hits, about, judged in test]
    print(f"topics with an aspect and 2020/2021 judgments: {len(cases)}; weights chosen per fold: {chosen}")
    print(f"nDCG@{DEPTH} (2020/2021, held-out folds): without the aspect {sum(before) / len(before):.4f}, "
          f"with it {sum(after) / len(after):.4f}")
    return 0

