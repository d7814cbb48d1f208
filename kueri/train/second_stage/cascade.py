"""Cross-validate cascades: the encoders score only a cheaper model's top candidates (half the encoders' cost).

    .venv/bin/python scripts/cv_cascade.py [--workdir W] [--minilm 20,30,40,100] [--e5 10,20,30,100]

The default second stage embeds each topic's top 100 candidates with both encoders and ranks them by
the full model (``second-stage-v2``'s features). A cascade ranks the 100 by the lexical model (no neural
feature), embeds the top ``N1`` with MiniLM and reorders them by the MiniLM model (lexical + MiniLM
features), then embeds that ranking's top ``N2`` with e5 and reorders them by the full model; the rest of
each level keeps the order of the level before, below. Each model is fitted as its shipped counterpart
is (``scripts/train_second_stage.py``: the lexical one on the top 1000 with penalty 0.1, MiniLM's on
the top 100 with 0.03, the full one on the top 100 with 0.01), on the training topics of each fold: the
same data, labels (the 2020/2021 judgments, inherited by the sample's passages; never 2022's) and
cross-validation (2-fold over topics x 5 splits, held-out nDCG@5, mean and sd over splits). ``N1`` of
100 with ``N2`` of 100 is today's second stage. Printed per cascade: nDCG@5 and the distinct passages
each encoder embeds for the sample's 50 topics (MiniLM's include the lexical run's top 5 per topic, its
feedback passages).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np

from kueri.cli import configure_logging
from kueri.cli.script import script_parser
from kueri.records import Hit
from kueri.second_stage.features import PRF_DEPTH, TITLE_FEATURES
from kueri.train.folds import split_topics
from kueri.train.second_stage.cv import SPLITS, ndcg5
from kueri.train.second_stage.data import DENSE_DEPTH, LEXICAL, LEXICAL_DEPTH, Data, sample_data
from kueri.train.second_stage.fit import fit_offset, score

DEPTH = DENSE_DEPTH
MINILM = (*LEXICAL, "dense_title", "dense_prf")


@dataclasses.dataclass(frozen=True)
class Level:
    features: tuple[str, ...]
    penalty: float
    train_depth: int  # the training rows: the top train_depth of the lexical run


#: The three models as shipped: lexical (second-stage-lexical-v1), MiniLM (second-stage-v1), full (second-stage-v2).
LEVELS = (Level(LEXICAL, 0.1, LEXICAL_DEPTH), Level(MINILM, 0.03, DEPTH), Level(TITLE_FEATURES, 0.01, DEPTH))


def columns_of(data: Data, features: tuple[str, ...]) -> Data:
    """The data with only ``features`` as its matrix's columns."""
    keep = [f for f in data.features if f in features]
    matrix = data.matrix[:, [data.features.index(f) for f in keep]]
    return dataclasses.replace(data, features=tuple(keep), matrix=matrix)


def cascade_cv(data: Data, eval_topics: list[str], tops: tuple[int, int]) -> tuple[float, float, dict[str, int]]:
    """Held-out nDCG@5 (mean, sd over splits) of the cascade keeping ``tops`` = (N1, N2), and its passages."""
    views = [columns_of(data, level.features) for level in LEVELS]
    inside = data.rank < DEPTH
    figures, passages = [], {}
    for split in range(SPLITS):
        # Per row: the deepest level it reached, and its score there.
        reached = np.where(inside, 0, -1)
        scores = np.zeros(len(data.rank))
        a, b = split_topics(sorted(data.candidates, key=int), split)
        for train, test in ((a, b), (b, a)):
            held = np.isin(data.topic, test) & inside
            for number, (level, view) in enumerate(zip(LEVELS, views, strict=True)):
                model = fit_offset(view, np.isin(data.topic, train) & (data.rank < level.train_depth),
                                      level.penalty)
                if number:
                    for qid in test:
                        rows = np.flatnonzero((data.topic == qid) & (reached == number - 1))
                        best = rows[np.lexsort((data.rank[rows], -scores[rows]))][: tops[number - 1]]
                        reached[best] = number
                now = held & (reached == number)
                scores[now] = score(model, view, now)
        run = {}
        for qid in eval_topics:
            rows = np.flatnonzero((data.topic == qid) & inside)
            order = rows[np.lexsort((data.rank[rows], -scores[rows], -reached[rows]))]
            hits = data.candidates[qid].hits
            run[qid] = [Hit(hits[data.rank[r]].doc, float(len(order) - i)) for i, r in enumerate(order)]
        figures.append(ndcg5(run, data.qrels))
        if split == 0:
            def docs(mask: np.ndarray) -> set[str]:
                return {data.candidates[data.topic[r]].hits[data.rank[r]].doc for r in np.flatnonzero(mask)}
            passages = {"minilm": len(docs(reached >= 1) | docs(data.rank < PRF_DEPTH)), "e5": len(docs(reached >= 2))}
    return float(np.mean(figures)), float(np.std(figures)), passages


def main(argv: list[str] | None = None) -> int:
    parser = script_parser(__doc__, whole_doc=True, quiet=False)
    parser.add_argument("--workdir", type=Path, default=None, help="index and embeddings (default: a temporary folder)")
    parser.add_argument("--minilm", default="20,25,30,35,40,50,100", help="N1 values: MiniLM's candidates per topic")
    parser.add_argument("--e5", default="10,15,20,25,30,100", help="N2 values: e5's candidates per topic")
    args = parser.parse_args(argv)
    configure_logging()
    data = sample_data(args.workdir, TITLE_FEATURES)
    eval_topics = data.evaluated_topics()
    print(f"{'MiniLM N1':>9s} {'e5 N2':>6s} {'nDCG@5':>7s} {'sd':>6s} {'MiniLM passages':>16s} {'e5 passages':>12s}")
    for n1 in [int(x) for x in args.minilm.split(",")]:
        for n2 in [int(x) for x in args.e5.split(",") if int(x) <= n1]:
            mean, sd, passages = cascade_cv(data, eval_topics, (n1, n2))
            print(f"{n1:9d} {n2:6d} {mean:7.4f} {sd:6.4f} {passages['minilm']:16d} {passages['e5']:12d}", flush=True)
    return 0

