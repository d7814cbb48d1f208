"""Does a passage that is one comparative sentence keep that sentence's side? CompSent-19's held-out half through
``kueri stance``, each sentence a one-passage topic.

    .venv/bin/python scripts/stance_one_sentence.py [--model stance-v1 stance-v2 ...] [--work DIR]

Every held-out sentence (kueri.stance.features.in_training_half of its id is false) becomes a topic whose
``<objects>`` are its two objects and a corpus of one passage, the sentence; ``kueri stance --depth 0`` labels
the one-hit run. FIRST reads as BETTER (object_a is better), SECOND as WORSE, NEUTRAL and NO as NONE; the
macro-F1 over BETTER / WORSE / NONE is printed beside the sentence encoder's own on the same sentences.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path
from xml.sax.saxutils import escape

from kueri.cli.script import script_parser
from kueri.stance.encoders import SENTENCE_LABELS, SentenceEncoder
from kueri.stance.features import in_training_half
from kueri.train.data import compsent_rows, load_compsent
from kueri.train.reports import f1_report

AS_SENTENCE = {"FIRST": "BETTER", "SECOND": "WORSE", "NEUTRAL": "NONE", "NO": "NONE"}


def held_out() -> list[dict[str, str]]:
    return [row for row in compsent_rows() if not in_training_half(row["id"])
            and ", " not in row["object_a"] + row["object_b"]]


def write_inputs(rows: list[dict[str, str]], folder: Path) -> tuple[Path, Path, Path]:
    topics, corpus, run = folder / "topics.xml", folder / "passages.jsonl", folder / "run.txt"
    with open(topics, "w", encoding="utf-8") as handle:
        handle.write("<topics>\n")
        for number, row in enumerate(rows, 1):
            handle.write(f"<topic><number>{number}</number><title>Which is better, {escape(row['object_a'])} or "
                         f"{escape(row['object_b'])}?</title><objects>{escape(row['object_a'])}, "
                         f"{escape(row['object_b'])}</objects></topic>\n")
        handle.write("</topics>\n")
    with open(corpus, "w", encoding="utf-8") as handle:
        for number, row in enumerate(rows, 1):
            handle.write(json.dumps({"id": f"s{number}", "contents": row["sentence"]}) + "\n")
    run.write_text("".join(f"{n} Q0 s{n} 1 1.0 sentences\n" for n in range(1, len(rows) + 1)), encoding="utf-8")
    return topics, corpus, run


def main(argv: list[str] | None = None) -> int:
    parser = script_parser(__doc__, quiet=False)
    parser.add_argument("--model", nargs="+", default=["stance-v1", "stance-v2"], help="stance models")
    parser.add_argument("--work", type=Path, help="folder for the inputs and runs (default: a temporary one)")
    args = parser.parse_args(argv)
    rows = held_out()
    gold = [row["most_frequent_label"] for row in rows]
    folder = args.work or Path(tempfile.mkdtemp(prefix="kueri-one-sentence-"))
    folder.mkdir(parents=True, exist_ok=True)
    topics, corpus, run = write_inputs(rows, folder)
    masked = {row_id: tokens for row_id, tokens, _ in load_compsent()}
    probabilities = SentenceEncoder().probabilities([masked[row["id"]] for row in rows])
    encoder = [SENTENCE_LABELS[int(i)] for i in probabilities.argmax(axis=1)]
    report = f1_report(gold, encoder, SENTENCE_LABELS)
    print(f"{len(rows)} held-out sentences; the sentence encoder alone: macro-F1 {report['macro']:.4f} "
          f"({' '.join(f'{k} {report[k]:.3f}' for k in SENTENCE_LABELS)})", flush=True)
    for model in args.model:
        labelled = folder / f"labelled-{Path(model).stem}.txt"
        subprocess.run([sys.executable, "-m", "kueri", "stance", str(run), "--corpus", str(corpus), "--topics",
                        str(topics), "--output", str(labelled), "--depth", "0", "--model", model, "-q"], check=True)
        stance = {line.split()[0]: line.split()[1] for line in labelled.read_text().splitlines()}
        predicted = [AS_SENTENCE[stance[str(n)]] for n in range(1, len(rows) + 1)]
        report = f1_report(gold, predicted, SENTENCE_LABELS)
        print(f"kueri stance --model {model}: macro-F1 {report['macro']:.4f} "
              f"({' '.join(f'{k} {report[k]:.3f}' for k in SENTENCE_LABELS)})", flush=True)
    return 0

