"""The stance models' training data, read once: CompSent-19's sentences, the Touché 2022 stance training answers
and the web-passage stance set's parts (``kueri/resources/training/``). Never the 2022 judgments, never the
shipped sample's passages.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Callable
from pathlib import Path

from kueri import resources
from kueri.stance.features import OBJ1, OBJ2, MaskedPassage, ObjectMatcher, mark_spans, mask_passage, tokens

TRAINING = resources.path("training")
COMPSENT = TRAINING / "compsent19-train.csv"
STANCE_TRAIN = TRAINING / "touche2022-stance-train.tsv"
#: Comparative sentences the team wrote (one object's drawback or merit in comparative form), labelled by another hand.
DRAWBACK_SENTENCES = TRAINING / "drawback-sentences.jsonl"
#: The web-passage stance set (its README says how it was written and labelled).
WEB = resources.path("training", "web-passages")
STANCE_CODES = {"2": "FIRST", "3": "SECOND", "1": "NEUTRAL", "0": "NO"}
SWAP_LABEL = {"FIRST": "SECOND", "SECOND": "FIRST", "BETTER": "WORSE", "WORSE": "BETTER"}


def compsent_rows() -> list[dict[str, str]]:
    """CompSent-19's rows as the CSV holds them (``id``, ``object_a``, ``object_b``, ``sentence``,
    ``most_frequent_label``)."""
    with open(COMPSENT, encoding="utf-8", newline="") as handle:
        return list(csv.DictReader(handle))


def load_compsent() -> list[tuple[str, list[str], str]]:
    """(id, masked sentence tokens, label) of CompSent-19; OBJ1 = object_a."""
    rows = []
    for row in compsent_rows():
        matcher = ObjectMatcher(row["object_a"], row["object_b"])
        rows.append((row["id"], matcher.mask(tokens(row["sentence"])), row["most_frequent_label"]))
    return rows


def load_drawback_sentences() -> list[tuple[str, list[str], str]]:
    """(pair key, masked sentence tokens, gold label) of the written drawback and merit sentences, CompSent-19's
    form; the key is the unordered, lower-cased object pair, so a split by key keeps a pair's sentences together."""
    rows = []
    with open(DRAWBACK_SENTENCES, encoding="utf-8") as handle:
        for line in handle:
            row = json.loads(line)
            matcher = ObjectMatcher(row["object_a"], row["object_b"])
            key = "\t".join(sorted((row["object_a"].lower(), row["object_b"].lower())))
            rows.append((key, matcher.mask(tokens(row["sentence"])), row["label"]))
    return rows


def stance_train_rows() -> list[dict[str, str]]:
    """The usable rows of the stance training set: 511 hold a numeric id in place of the answer text, dropped."""
    with open(STANCE_TRAIN, encoding="utf-8", newline="") as handle:
        return [row for row in csv.DictReader(handle, delimiter="\t", quoting=csv.QUOTE_NONE)
                if not row["answer"].strip().isdigit()]


def load_stance_train(surround: Callable[[str, str, str], str] | None = None) -> list[tuple[str, MaskedPassage, str]]:
    """(question id, masked answer, label) of the usable stance-train rows; OBJ1 = object_1.

    Objects are masked where the annotators marked them (mask_pos_1/2, paraphrases included) and where
    kueri's matcher finds them, so training sees the contexts prediction sees and more. ``surround(text, object_1,
    object_2)``: each answer set inside page surroundings first (:mod:`kueri.train.stance.surroundings`).
    """
    rows = []
    for row in stance_train_rows():
        spans = [(s, e, OBJ1) for s, e in json.loads(row["mask_pos_1"] or "[]")]
        spans += [(s, e, OBJ2) for s, e in json.loads(row["mask_pos_2"] or "[]")]
        matcher = ObjectMatcher(row["object_1"], row["object_2"])
        text = mark_spans(row["answer"], spans)
        if surround is not None:
            text = surround(text, row["object_1"], row["object_2"])
        rows.append((row["id"], mask_passage(text, matcher), STANCE_CODES[row["answer_stance"]]))
    return rows


def web_rows(part: str, folder: Path = WEB) -> list[dict]:
    """The rows of one part of the web-passage set (``train``, ``frozen``, ``second-train``, ...)."""
    with open(folder / f"{part}.jsonl", encoding="utf-8") as handle:
        return [json.loads(line) for line in handle]
