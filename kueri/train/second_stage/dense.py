"""Should the default's first stage be hybrid? The second stage's cross-validation, on other candidates.

    .venv/bin/python scripts/cv_dense.py [--workdir DIR] [--bases row-15 hybrid-e5 hybrid-e5-linear dense-e5]

For each first stage (``--bases``, named configurations), the default's second stage (the title-only features of
``second-stage-v2``, offset model) is trained and cross-validated exactly as ``scripts/train_second_stage.py``
does for row 15: the first stage's top 1000 hits per topic on the shipped sample with their features, labels
ONLY from the earlier years' judgments (2020, 2021; a passage inherits its document's grade), 2-fold CV over
topics repeated over 5 splits, the penalty chosen by the mean held-out nDCG@5 at the stage's depth (100). The
2022 judgments are never read here. The rule (issue 32): a hybrid first stage replaces row 15 in the default
only if its cross-validated nDCG@5 beats row 15's by at least 0.01 AND the default stays within its cost budget
(measured separately: benchmarks/bench_dense.py and docs/dense.md).
"""

from __future__ import annotations

import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from kueri.cli import configure_logging
from kueri.cli.script import script_parser
from kueri.second_stage.features import TITLE_FEATURES
from kueri.train.reports import ADOPT, adopts
from kueri.train.second_stage.cv import SPLITS, baseline, offset_penalties
from kueri.train.second_stage.data import CANDIDATES, DENSE_DEPTH, EARLIER_QRELS, SAMPLE, build_data


def main(argv: Sequence[str] | None = None) -> int:
    parser = script_parser(__doc__, whole_doc=True, quiet=False)
    parser.add_argument("--workdir", type=Path, default=None, help="index and embedding cache (default: a temp folder)")
    parser.add_argument("--bases", nargs="+", default=["row-15", "hybrid-e5", "hybrid-e5-linear", "dense-e5"],
                        help="first stages to compare (the first is the reference)")
    parser.add_argument("--corpus", type=Path, default=SAMPLE / "passages.jsonl.gz")
    parser.add_argument("--topics", type=Path, default=SAMPLE / "topics.xml")
    args = parser.parse_args(argv)
    configure_logging()
    rows = []
    with tempfile.TemporaryDirectory(prefix="kueri-cv-dense-") as tmp:
        workdir = args.workdir or Path(tmp)
        for base in args.bases:
            started = time.perf_counter()
            data = build_data(args.corpus, args.topics, list(EARLIER_QRELS), workdir, CANDIDATES, TITLE_FEATURES,
                              base=base)
            eval_topics = data.evaluated_topics()
            first = baseline(data, eval_topics, None)
            lam, offset = offset_penalties(data, eval_topics, DENSE_DEPTH)
            judged_top100 = int((data.judged & (data.rank < DENSE_DEPTH)).sum())
            rows.append((base, first, lam, offset[lam], len(eval_topics), judged_top100))
            print(f"{base}: done in {time.perf_counter() - started:.0f} s", file=sys.stderr, flush=True)
    reference = rows[0][3]["ndcg5"]
    print(f"\nnDCG@5 on the earlier years' judgments, {rows[0][4]} topics; CV = 2-fold over topics x {SPLITS} splits "
          f"(mean, sd over splits), second stage at depth {DENSE_DEPTH}, title-only features")
    print(f"{'first stage':18s} {'first stage alone':>17s} {'+ second stage (CV)':>19s} {'sd':>7s} "
          f"{'judged-only':>11s} {'lambda':>7s} {'judged in top 100':>17s} {'vs ' + rows[0][0]:>12s}")
    for base, first, lam, figures, _, judged in rows:
        print(f"{base:18s} {first['ndcg5']:17.4f} {figures['ndcg5']:19.4f} {figures['ndcg5_sd']:7.4f} "
              f"{figures['ndcg5_condensed']:11.4f} {lam:7g} {judged:17d} {figures['ndcg5'] - reference:+12.4f}")
    best = max(rows[1:], key=lambda row: row[3]["ndcg5"], default=None)
    if best is not None:
        gain = best[3]["ndcg5"] - reference
        verdict = "passes" if adopts(gain) else "fails"
        print(f"\nbest alternative: {best[0]}, {gain:+.4f} over {rows[0][0]}: {verdict} the +{ADOPT} rule "
              "(the cost budget is checked separately)")
    return 0

