"""The earlier years' relevance judgments (Touché 2020 and 2021), the only judgments kueri learns from: they judge
whole ClueWeb12 documents, and the shipped sample's passages are cut from them. The 2022 judgments measure the final
system and are refused here.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from kueri import resources
from kueri.errors import KueriError
from kueri.runfile import read_qrels

EARLIER_QRELS = (resources.qrels() / "touche2020-task2-relevance.qrels",
                 resources.qrels() / "touche-task2-51-100-relevance.qrels")
FORBIDDEN_QRELS = "touche-task2-2022-relevance.qrels"


def earlier_judgments(paths: Sequence[Path] = EARLIER_QRELS) -> dict[str, dict[str, int]]:
    """Topic -> ClueWeb12 document -> relevance (0, 1, 2) of the judgments in ``paths`` (the Touché 2020 and 2021
    judgments by default); the 2022 judgments are refused."""
    for path in paths:
        if Path(path).name == FORBIDDEN_QRELS:
            raise KueriError(f"{path}: the 2022 judgments measure the final system; never train on them")
    judgments: dict[str, dict[str, int]] = {}
    for path in paths:
        for topic, docs in read_qrels(path).items():
            judgments.setdefault(topic, {}).update(docs)
    return judgments


def inherited_qrels(paths: Sequence[Path], passage_ids: Sequence[str]) -> dict[str, dict[str, int]]:
    """Passage qrels: each passage gets its document's grade for each topic that judged the document."""
    by_doc = earlier_judgments(paths)
    qrels: dict[str, dict[str, int]] = {}
    for pid in passage_ids:
        doc = pid.split("___")[0]
        for qid, docs in by_doc.items():
            if doc in docs:
                qrels.setdefault(qid, {})[pid] = docs[doc]
    return qrels
