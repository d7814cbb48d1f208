"""Per-topic nDCG@5 of a run against a reference run, as a PNG: where a system wins and loses.

    .venv/bin/pip install -e '.[report]'     # matplotlib
    .venv/bin/python scripts/plot_per_topic.py out/run.txt tests/data/runs/Aldo-Nadi-run5.txt.gz \\
        --qrels kueri/resources/qrels/touche-task2-2022-relevance.qrels \\
        --corpus kueri/resources/sample/passages.jsonl.gz --out per-topic.png

One bar per topic: nDCG@5 of RUN minus that of REFERENCE (green: RUN better), topics sorted by the
difference; the title gives both means and the win / tie / loss counts. ``--corpus`` restricts runs
and qrels to the corpus' passages, as ``kueri evaluate --corpus`` does. A topic missing from one run
counts 0 there.
"""

from __future__ import annotations

from kueri.cli.evaluate import run_name
from kueri.cli.script import script_parser
from kueri.errors import KueriError
from kueri.evaluate import per_topic_values, restrict_qrels, restrict_run
from kueri.parse import PassageReader
from kueri.runfile import read_qrels, read_run

MEASURE = "nDCG@5"


def per_topic(run_path: str, qrels: dict, ids: set[str] | None) -> dict[str, float]:
    run = read_run(run_path)
    if ids is not None:
        run = restrict_run(run, ids)
    values, _ = per_topic_values(run, qrels, [MEASURE])
    return {qid: v[MEASURE] for qid, v in values.items()}


def main(argv: list[str] | None = None) -> int:
    parser = script_parser(__doc__, quiet=False)
    parser.add_argument("run", help="the run to show (e.g. the default's run.txt)")
    parser.add_argument("reference", help="the run to compare with (e.g. the original's best, Aldo-Nadi-run5)")
    parser.add_argument("--qrels", required=True)
    parser.add_argument("--corpus", help="restrict runs and qrels to this corpus' passages")
    parser.add_argument("--out", default="per-topic.png")
    args = parser.parse_args(argv)
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise KueriError("the plot needs matplotlib: .venv/bin/pip install -e '.[report]'") from None

    qrels = read_qrels(args.qrels)
    ids = {p.id for p in PassageReader(args.corpus)} if args.corpus else None
    if ids is not None:
        qrels = restrict_qrels(qrels, ids)
    ours, theirs = per_topic(args.run, qrels, ids), per_topic(args.reference, qrels, ids)
    topics = sorted(set(ours) | set(theirs), key=int)
    diffs = sorted(((ours.get(q, 0.0) - theirs.get(q, 0.0), q) for q in topics), reverse=True)
    wins = sum(d > 0 for d, _ in diffs)
    losses = sum(d < 0 for d, _ in diffs)
    mean_ours = sum(ours.get(q, 0.0) for q in topics) / len(topics)
    mean_theirs = sum(theirs.get(q, 0.0) for q in topics) / len(topics)

    figure, axes = plt.subplots(figsize=(12, 4.5), dpi=100)
    axes.bar(range(len(diffs)), [d for d, _ in diffs], color=["#2a9d4b" if d > 0 else "#c0392b" for d, _ in diffs])
    axes.set_xticks(range(len(diffs)), [q for _, q in diffs], rotation=90, fontsize=7)
    axes.axhline(0, color="black", linewidth=0.8)
    axes.set_xlabel("topic")
    axes.set_ylabel(f"{MEASURE} difference")
    axes.set_title(f"{run_name(args.run)} ({mean_ours:.4f}) minus {run_name(args.reference)} ({mean_theirs:.4f}), "
                   f"{len(topics)} topics: {wins} wins, {len(topics) - wins - losses} ties, {losses} losses",
                   fontsize=10)
    figure.tight_layout()
    figure.savefig(args.out)
    print(f"{args.out}: {len(topics)} topics, mean {MEASURE} {mean_ours:.4f} vs {mean_theirs:.4f}; "
          f"{wins} wins, {losses} losses")
    return 0

