"""The second stage's training data: the candidates of a first stage on the shipped sample, their features, and the
grades they inherit from the earlier years' judgments (:mod:`kueri.train.judgments`; never the 2022 ones)."""

from __future__ import annotations

import hashlib
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

import kueri
from kueri import resources
from kueri.config import get_config
from kueri.parse import read_topics
from kueri.pipeline import Pipeline
from kueri.quality.offline import OfflineQualityModel
from kueri.runcontext import RunContext
from kueri.second_stage.candidates import Candidates, CandidateTimes, collect
from kueri.second_stage.features import FEATURES, NEURAL_FEATURES, TITLE_FEATURES
from kueri.second_stage.model import DEFAULT_MODEL, LEXICAL_MODEL, MINILM_MODEL, WHOLE_TOPIC_MODEL
from kueri.second_stage.ranking import load_encoders
from kueri.train.judgments import EARLIER_QRELS, inherited_qrels

#: The checkout (or the folder the package is installed in): training files are named relative to it.
ROOT = Path(kueri.__file__).resolve().parent.parent
SAMPLE = resources.sample()
BASE_CONFIG = "row-15"
CANDIDATES = 1000  # the lexical run's hits per topic that features are computed for (all of them)
DENSE_DEPTH = 100  # cross-validated as good as deeper, and the neural features' cost grows with it
LEXICAL_DEPTH = 1000
LEXICAL = tuple(f for f in TITLE_FEATURES if f not in NEURAL_FEATURES)
#: The features each model weighs, and the file it is written to by default.
FEATURE_SETS: dict[str, tuple[tuple[str, ...], Path]] = {
    "minilm-e5": (TITLE_FEATURES, DEFAULT_MODEL),
    "whole-topic": (FEATURES, WHOLE_TOPIC_MODEL),
    "minilm": ((*LEXICAL, "dense_title"), MINILM_MODEL),
    "lexical": (LEXICAL, LEXICAL_MODEL),
}


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


@dataclass
class Data:
    """All candidates of all topics as one matrix, with topic and label of each row."""

    candidates: dict[str, Candidates]
    features: tuple[str, ...]  # the names of the matrix's columns
    matrix: np.ndarray
    topic: np.ndarray  # topic number of each row
    grade: np.ndarray  # inherited grade, 0 where the document is not judged
    judged: np.ndarray  # bool: the document is judged for the topic
    rank: np.ndarray  # 0-based rank in the lexical run
    qrels: dict[str, dict[str, int]]  # inherited passage qrels of the sample, for the evaluator

    def evaluated_topics(self) -> list[str]:
        """The topics in number order whose sample passages include a relevant judged one (the others score 0
        whatever the ranking: left out)."""
        return [t for t in sorted(self.candidates, key=int) if max(self.qrels.get(t, {}).values(), default=0) > 0]


def build_data(corpus: Path, topics_path: Path, qrels_paths: Sequence[Path], workdir: Path, depth: int,
               features: Sequence[str], base: str = BASE_CONFIG) -> Data:
    """The candidates of the first stage ``base`` (a named configuration) with their features and labels."""
    topics = read_topics(topics_path)
    started = time.perf_counter()
    with Pipeline(corpus, topics, RunContext(workdir, progress=False)) as pipeline:
        config = get_config(base)
        run = pipeline.run(config)
        index = pipeline.index(config.analyzer)
        quality = OfflineQualityModel.load()
        times = CandidateTimes()
        encoders = load_encoders({NEURAL_FEATURES[f] for f in features if f in NEURAL_FEATURES}, cache_dir=workdir)
        candidates = collect(run, topics, index, depth, quality.score, times, encoders=encoders, wanted=features)
        passage_ids = list(index.ids)
    log(f"features: {times.summary()} ({time.perf_counter() - started:.1f} s with the lexical run)")
    qrels = inherited_qrels(qrels_paths, passage_ids)
    rows, topic, grade, judged, rank = [], [], [], [], []
    for qid, cand in candidates.items():
        labels = qrels.get(qid, {})
        for position, hit in enumerate(cand.hits):
            topic.append(qid)
            grade.append(max(labels.get(hit.doc, 0), 0))
            judged.append(hit.doc in labels)
            rank.append(position)
        rows.append(cand.features)
    columns = [FEATURES.index(f) for f in features]
    return Data(candidates, tuple(features), np.vstack(rows)[:, columns], np.array(topic),
                np.array(grade, dtype=np.float64), np.array(judged), np.array(rank), qrels)


def sample_data(workdir: Path | None, features: Sequence[str], base: str = BASE_CONFIG,
                corpus: Path = SAMPLE / "passages.jsonl.gz", topics: Path = SAMPLE / "topics.xml",
                qrels: Sequence[Path] = EARLIER_QRELS) -> Data:
    """:func:`build_data` of all :data:`CANDIDATES` (the shipped sample by default), in ``workdir`` (its index and
    embedding cache) or a temporary folder."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="kueri-second-stage-") as tmp:
        return build_data(corpus, topics, list(qrels), workdir or Path(tmp), CANDIDATES, features, base=base)


def feature_check(data: Data, count: int = 3) -> list[dict[str, object]]:
    """Feature rows of a few fixed candidates, stored with the model: a test recomputes them, so a change of
    the features (or of the object matcher / quality model they use) that the model never saw is noticed."""
    checks = []
    for qid in sorted(data.candidates, key=int)[:count]:
        cand = data.candidates[qid]
        values = cand.features[0, [FEATURES.index(f) for f in data.features]]
        checks.append({"topic": qid, "passage": cand.hits[0].doc, "rank": 1,
                       "values": [round(v, 9) for v in values.tolist()]})
    return checks


def file_sha256(path: Path) -> str:
    """The SHA-256 of a file, read in blocks."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
