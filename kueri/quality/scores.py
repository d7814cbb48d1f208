"""Quality score files, and run scores times argument quality, as the original's ``ArgumentQualityReranker``
(Table 1 rows 18-24).

new score = run score x quality. The run score is the one a run file holds (6 decimals: the
original reranked run files), the quality the score file's value read as a Java ``float`` and
widened to double. A passage without a quality score keeps factor 1.0, as the original (this
favours unscored passages, since qualities are <= 1). Stable sort by topic, then new score: ties
keep the input order; ranks are renumbered and nothing is cut.
"""

from __future__ import annotations

import logging
import struct
from pathlib import Path

from kueri import resources
from kueri.errors import KueriError
from kueri.records import Hit, Run, topic_key
from kueri.runfile import format_score

log = logging.getLogger(__name__)

#: The original team's IBM Debater scores (recovered from their run pairs; 64,382 passages), by the one name every
#: command and configuration gives them; ``debater``, their old second name, is still read for a release.
DEBATER, OLD_DEBATER = "debater-2022", "debater"
SHIPPED_SCORES = {DEBATER: resources.path("quality", "debater-quality-scores.tsv")}


def as_java_float(value: float) -> float:
    """``Float.parseFloat`` widened to double: the nearest float32 of ``value``."""
    return struct.unpack("f", struct.pack("f", value))[0]


def resolve_scores(name_or_path: str) -> Path:
    if name_or_path in SHIPPED_SCORES:
        return SHIPPED_SCORES[name_or_path]
    path = Path(name_or_path)
    if not path.is_file():
        raise KueriError(f"quality score file {name_or_path!r} not found (shipped: {', '.join(SHIPPED_SCORES)})")
    return path


def read_quality_scores(name_or_path: str) -> dict[str, float]:
    """``passage_id<TAB>score`` lines; like the original, lines without exactly 2 fields are ignored
    (counted and reported); a second field that is not a number is an error naming the line."""
    path = resolve_scores(name_or_path)
    scores: dict[str, float] = {}
    ignored = 0
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            fields = line.rstrip("\r\n").split("\t")
            if len(fields) != 2:
                ignored += bool(line.strip())
                continue
            try:
                scores[fields[0]] = as_java_float(float(fields[1]))
            except ValueError:
                raise KueriError(f"{path}:{number}: quality score {fields[1]!r} is not a number") from None
    if ignored:
        log.warning("quality: ignored %d line(s) of %s without exactly 2 tab-separated fields", ignored, path)
    return scores


def times_quality(run: Run, scores: dict[str, float]) -> Run:
    """Multiply each hit's (printed) score by its passage's quality; re-sort each topic stably."""
    reranked: Run = {}
    for topic in sorted(run, key=topic_key):
        hits = [
            Hit(hit.doc, float(format_score(hit.score)) * scores.get(hit.doc, 1.0), hit.stance)
            for hit in run[topic]
        ]
        hits.sort(key=lambda hit: -hit.score)
        reranked[topic] = hits
    return reranked
