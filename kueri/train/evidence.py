"""Learn the relevance score below which ``kueri serve`` says the corpus holds little on a question.

    .venv/bin/python scripts/learn_evidence_threshold.py --run RUN [--config default]

RUN is ``kueri run --config NAME`` on the shipped sample's 50 topics. Each of its hits whose document the
Touché 2020 or 2021 relevance judgments judge for that topic (the sample's passages are cut from the judged
ClueWeb12 documents) is a labelled example: relevant when the document was judged 1 or 2. The threshold is
the score that best separates relevant from non-relevant hits, by balanced accuracy (the true-positive rate
minus the false-positive rate, Youden's J; the mean of two neighbouring scores, so it lies between them). A
question is then *weak* when none of its top 3 passages reaches it (kueri.serve.answer.Evidence). The threshold
is the configuration's ``weak_score`` (kueri/config.py).

The 2022 judgments only measure the rule afterwards: precision at 3 of the topics the rule calls weak and of
the others. Nothing is tuned on them.
"""

from __future__ import annotations

from collections.abc import Sequence

from kueri import resources
from kueri.cli.script import script_parser, start
from kueri.runfile import read_qrels, read_run
from kueri.serve.answer import EVIDENCE_DEPTH as DEPTH
from kueri.train.judgments import FORBIDDEN_QRELS as QRELS_2022
from kueri.train.judgments import earlier_judgments


def examples(run: dict, judgments: dict[str, dict[str, int]]) -> list[tuple[float, bool]]:
    """(score, relevant) of every hit whose document is judged for its topic."""
    out = []
    for topic, hits in run.items():
        judged = judgments.get(topic, {})
        for hit in hits:
            document = hit.doc.split("___", 1)[0]
            if document in judged:
                out.append((hit.score, judged[document] >= 1))
    return out


def best_threshold(pairs: Sequence[tuple[float, bool]]) -> tuple[float, float]:
    """The threshold with the highest balanced accuracy (J) for "score >= threshold: relevant", and its J."""
    positives = sum(relevant for _, relevant in pairs)
    negatives = len(pairs) - positives
    ordered = sorted(pairs, key=lambda p: -p[0])
    best = (float("inf"), -1.0)
    true_positives = false_positives = 0
    for i, (score, relevant) in enumerate(ordered):
        true_positives += relevant
        false_positives += not relevant
        following = ordered[i + 1][0] if i + 1 < len(ordered) else score - 1.0
        if following == score:
            continue  # a threshold cannot split equal scores
        j = true_positives / positives - false_positives / negatives
        if j > best[1]:
            best = ((score + following) / 2, j)
    return best


def main(argv: Sequence[str] | None = None) -> int:
    parser = script_parser(__doc__)
    parser.add_argument("--run", required=True, help="kueri run --config NAME on the sample's topics")
    args = start(parser.parse_args(argv))
    run = read_run(args.run)
    pairs = examples(run, earlier_judgments())
    threshold, j = best_threshold(pairs)
    relevant = sum(r for _, r in pairs)
    print(f"examples: {len(pairs)} judged hits (2020/2021), {relevant} relevant")
    print(f"threshold: {threshold:.4f} (balanced accuracy J = {j:.3f})")
    above = [r for s, r in pairs if s >= threshold]
    below = [r for s, r in pairs if s < threshold]
    print(f"  relevant at or above it: {sum(above)} of {len(above)}; below it: {sum(below)} of {len(below)}")
    measured = read_qrels(resources.qrels() / QRELS_2022)
    rows = {"weak": [], "not weak": []}
    for topic, hits in run.items():
        top = hits[:DEPTH]
        weak = not top or max(h.score for h in top) < threshold
        judged = measured.get(topic, {})
        precision = sum(judged.get(h.doc, 0) >= 1 for h in top) / DEPTH
        rows["weak" if weak else "not weak"].append(precision)
    for name, values in rows.items():
        mean = sum(values) / len(values) if values else float("nan")
        print(f"2022 (measured only): {len(values)} topics {name}, mean precision at {DEPTH} {mean:.3f}")
    return 0

