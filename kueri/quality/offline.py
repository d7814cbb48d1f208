"""Offline argument-quality scores: a small linear model that imitates IBM Project Debater's scores.

For users without a Debater key (or without network). The model (``kueri/resources/models/quality-*.npz``,
rebuilt by ``scripts/train_quality.py``) is one ridge regression over three blocks of features of
the passage text (contents without backslashes, what the original sent to Debater):

* TF-IDF of lower-cased character 1-4-grams (sublinear tf, smooth idf, l2-normalised row),
* TF-IDF of lower-cased words, likewise,
* 30 surface features (:func:`~kueri.quality.features.text_features`), standardised and down-weighted.

It was fitted on the training half of the Debater scores of the shipped sample (passages whose id's
MD5 starts with an even byte); the other half is the held-out test. The file holds plain arrays
(no pickle), and prediction is re-implemented here (plain Python and numpy), so neither scikit-learn nor its
version matters at run time; the training script checks that both predict the same.

Public API: :class:`OfflineQualityModel`, :func:`score_corpus`, :func:`quality_scores_for`.
"""

from __future__ import annotations

import functools
import hashlib
import tempfile
import time
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from kueri import resources
from kueri.arithmetic import dot
from kueri.errors import KueriError, SetupError, deprecated
from kueri.model_files import load_model_file, write_model_file
from kueri.parse.passages import PassageReader
from kueri.processes import ordered_pool_map, worker_pool
from kueri.progress import progress_bar
from kueri.quality.features import CHAR_NGRAM_RANGE, TEXT_FEATURES, char_ngrams, model_text, text_features, word_tokens
from kueri.quality.scores import DEBATER, OLD_DEBATER, as_java_float, read_quality_scores
from kueri.records import Texts
from kueri.runfile import format_score, write_lines_atomic
from kueri.tfidf import TfidfBlock, block_arrays, read_block

DEFAULT_MODEL = resources.path("models", "quality-ridge-v1.npz")
MODEL_FORMAT = 1
#: Scores are clipped to Debater's range, so a reranked score never grows (the reranker assumes <= 1).
SCORE_RANGE = (0.0, 1.0)
_CHUNK = 500  # passages per task when scoring in several processes


class OfflineQualityModel:
    """The shipped quality model; :meth:`score` maps passage contents to a quality in [0, 1]."""

    def __init__(self, meta: Mapping[str, object], char: TfidfBlock, word: TfidfBlock,
                 feature_mean: np.ndarray, feature_scale: np.ndarray, feature_coef: np.ndarray,
                 intercept: float) -> None:
        if meta.get("format") != MODEL_FORMAT:
            raise SetupError(f"quality model format {meta.get('format')!r} is not {MODEL_FORMAT}: "
                             "rebuild it with scripts/train_quality.py")
        if tuple(meta.get("char_ngram_range", ())) != CHAR_NGRAM_RANGE or \
                tuple(meta.get("text_features", ())) != TEXT_FEATURES:
            raise SetupError("quality model was trained with other features than kueri/quality/features.py "
                             "computes: rebuild it with scripts/train_quality.py")
        self.meta = dict(meta)
        self.char, self.word = char, word
        self.feature_mean, self.feature_scale, self.feature_coef = feature_mean, feature_scale, feature_coef
        self.intercept = float(intercept)
        # The features enter as (x - mean) / scale * coef: fold that into one weight and one offset.
        weights = feature_coef / feature_scale
        self._feature_weights = weights.tolist()
        self._offset = self.intercept - dot(weights, feature_mean)

    # -- files ---------------------------------------------------------------------------------

    @classmethod
    def load(cls, path: str | Path = DEFAULT_MODEL) -> OfflineQualityModel:
        """The model in ``path``, read once per process while the file is unchanged (a model is never changed once
        made, and ``kueri serve`` asks for it twice a question)."""
        try:
            stat = Path(path).stat()
        except OSError:
            return cls._read(Path(path))  # the error that names the file and how to rebuild it
        return cls._read_unchanged(Path(path).resolve(), stat.st_mtime_ns, stat.st_size)

    @classmethod
    @functools.lru_cache(maxsize=4)
    def _read_unchanged(cls, path: Path, mtime_ns: int, size: int) -> OfflineQualityModel:
        return cls._read(path)

    @classmethod
    def _read(cls, path: Path) -> OfflineQualityModel:
        return load_model_file(path, "quality model", "scripts/train_quality.py", lambda meta, arrays: cls(
            meta, read_block(arrays, "char", with_coef=True), read_block(arrays, "word", with_coef=True),
            arrays["feature_mean"], arrays["feature_scale"], arrays["feature_coef"],
            float(arrays["intercept"].reshape(-1)[0])))

    def save(self, path: str | Path) -> None:
        """Write the model as an ``.npz`` whose bytes depend only on its contents (no timestamps)."""
        arrays: dict[str, np.ndarray] = {
            "feature_mean": self.feature_mean, "feature_scale": self.feature_scale,
            "feature_coef": self.feature_coef, "intercept": np.array([self.intercept]),
            **block_arrays("char", self.char), **block_arrays("word", self.word),
        }
        write_model_file(path, self.meta, arrays)

    # -- prediction ----------------------------------------------------------------------------

    def raw_score(self, contents: str) -> float:
        """The ridge prediction (unclipped) for passage contents (backslashes are removed here)."""
        text = model_text(contents)
        score = self._offset + self.char.dot(char_ngrams(text)) + self.word.dot(word_tokens(text))
        return score + sum(w * x for w, x in zip(self._feature_weights, text_features(text), strict=True))

    def score(self, contents: str) -> float:
        low, high = SCORE_RANGE
        return min(high, max(low, self.raw_score(contents)))


def spearman(a: Iterable[float], b: Iterable[float]) -> float:
    """Spearman's rank correlation (ties get their average rank), for the held-out evaluation."""

    def ranks(values: np.ndarray) -> np.ndarray:
        order = np.argsort(values, kind="stable")
        ranked = np.empty(len(values))
        ranked[order] = np.arange(len(values), dtype=float)
        _, inverse, counts = np.unique(values, return_inverse=True, return_counts=True)
        sums = np.bincount(inverse, weights=ranked)
        return (sums / counts)[inverse]

    x, y = ranks(np.asarray(list(a), dtype=float)), ranks(np.asarray(list(b), dtype=float))
    return float(np.corrcoef(x, y)[0, 1])


# -- scoring a corpus ------------------------------------------------------------------------------

_worker_model: OfflineQualityModel | None = None


def _init_worker(model_path: str) -> None:
    global _worker_model
    _worker_model = OfflineQualityModel.load(model_path)


def _score_chunk(chunk: list[tuple[str, str]]) -> list[tuple[str, float]]:
    assert _worker_model is not None
    return [(pid, _worker_model.score(contents)) for pid, contents in chunk]


@functools.cache
def _model_from_bytes(digest: str, data: bytes) -> OfflineQualityModel:
    """A model shipped to a Ray worker as bytes (its nodes need not see the driver's files), loaded once."""
    with tempfile.NamedTemporaryFile(suffix=".npz") as handle:
        handle.write(data)
        handle.flush()
        return OfflineQualityModel.load(handle.name)


def _score_chunk_on_ray(chunk: list[tuple[str, str]], digest: str, data: bytes) -> list[tuple[str, float]]:
    model = _model_from_bytes(digest, data)
    return [(pid, model.score(contents)) for pid, contents in chunk]


def _chunks(pairs: Iterable[tuple[str, str]], size: int) -> Iterator[list[tuple[str, str]]]:
    chunk: list[tuple[str, str]] = []
    for pair in pairs:
        chunk.append(pair)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def iter_offline_scores(pairs: Iterable[tuple[str, str]], model_path: str | Path = DEFAULT_MODEL,
                        workers: int = 1, ray_address: str | None = None) -> Iterator[tuple[str, float]]:
    """``(id, quality)`` for ``(id, contents)`` pairs, in input order, in ``workers`` processes, or as
    tasks of the Ray cluster at ``ray_address`` (the model travels with the tasks; the same scores).

    At most ``2 * workers`` chunks (twice the cluster's CPUs) are in flight, so memory stays bounded on
    the full corpus (``Pool.imap`` would read the whole input ahead).
    """
    if ray_address:
        from kueri.scaleout import TASK_RETRIES, connect, ordered_map

        OfflineQualityModel.load(model_path)  # fail here, clearly, rather than in every task
        data = Path(model_path).read_bytes()
        ray = connect(ray_address)
        task = ray.remote(max_retries=TASK_RETRIES)(_score_chunk_on_ray)
        model = ray.put(data)
        for scored in ordered_map(ray, task, _chunks(pairs, _CHUNK), hashlib.sha256(data).hexdigest(), model):
            yield from scored
        return
    if workers <= 1:
        model = OfflineQualityModel.load(model_path)
        for pid, contents in pairs:
            yield pid, model.score(contents)
        return
    OfflineQualityModel.load(model_path)  # fail here, clearly, rather than in every worker
    with worker_pool(workers, _init_worker, str(model_path)) as pool:
        for scored in ordered_pool_map(pool, _score_chunk, _chunks(pairs, _CHUNK), window=2 * workers):
            yield from scored


@dataclass
class OfflineSummary:
    scored: int
    seconds: float

    @property
    def rate(self) -> float:
        return self.scored / self.seconds if self.seconds > 0 else float("inf")


def _corpus_pairs(corpus: str | Path, ids: Collection[str] | None, skip_bad: bool) -> Iterator[tuple[str, str]]:
    for passage in PassageReader(corpus, skip_bad=skip_bad):
        if ids is None or passage.id in ids:
            yield passage.id, passage.contents


def score_corpus(corpus: str | Path, scores_path: str | Path, model_path: str | Path = DEFAULT_MODEL,
                 workers: int = 1, progress: bool = True, skip_bad: bool = False,
                 ids: Collection[str] | None = None, ray_address: str | None = None) -> OfflineSummary:
    """Write ``passage_id<TAB>quality`` (6 decimals) for every passage of ``corpus`` (or only ``ids``).

    The file is written atomically: it appears complete or not at all (the run is fast and
    deterministic, so a crashed run is simply repeated).
    """

    start = time.monotonic()
    scored = 0

    def lines() -> Iterator[str]:
        nonlocal scored
        results = iter_offline_scores(_corpus_pairs(corpus, ids, skip_bad), model_path, workers, ray_address)
        with progress_bar("offline quality", "passages", progress, iterable=results) as bar:
            for pid, quality in bar:
                if "\t" in pid or "\n" in pid:
                    raise KueriError(f"passage id {pid!r} contains a tab or line break: cannot write it")
                scored += 1
                yield f"{pid}\t{format_score(quality)}\n"

    write_lines_atomic(scores_path, lines())
    return OfflineSummary(scored, time.monotonic() - start)


# -- score sources for reranking -------------------------------------------------------------------


def _offline_scores(corpus: str | Path | None, ids: Collection[str] | None, texts: Texts | None,
                    model_path: str | Path, workers: int, skip_bad: bool) -> dict[str, float]:
    if texts is not None and ids is not None:
        wanted = sorted(ids)
        pairs: Iterable[tuple[str, str]] = zip(wanted, texts(wanted), strict=True)
    elif corpus is not None:
        pairs = _corpus_pairs(corpus, ids, skip_bad)
    else:
        raise KueriError("offline quality scores need the corpus (the passage texts)")
    return {pid: as_java_float(float(format_score(q))) for pid, q in iter_offline_scores(pairs, model_path, workers)}


#: ``--quality`` names computed here, each with its provider of scores: the offline model. Any other source is a
#: shipped score name (:data:`~kueri.quality.scores.SHIPPED_SCORES`: the Debater scores) or a score file.
QUALITY_SOURCES: dict[str, Callable[..., dict[str, float]]] = {"offline": _offline_scores}


def quality_scores_for(source: str, corpus: str | Path | None = None, ids: Collection[str] | None = None,
                       *, texts: Texts | None = None, model_path: str | Path = DEFAULT_MODEL, workers: int = 1,
                       skip_bad: bool = False) -> dict[str, float]:
    """Quality scores for reranking, as :func:`~kueri.quality.scores.read_quality_scores` returns them.

    ``source``:

    * ``"debater-2022"``: the original team's IBM Debater scores, shipped (64,382 passages; a passage
      without one keeps factor 1.0 in the reranker). For a new corpus, fill a score file with
      ``kueri quality debater`` and pass that file instead. (``"debater"``, its old name, still works for a
      release, with a warning.)
    * ``"offline"``: the offline model's scores of the passages of ``corpus``, only of ``ids`` when
      given (e.g. the passages of the run to rerank: far faster than the corpus); with ``texts`` (the
      passages' texts by id, e.g. from an index) and ``ids``, the corpus is not read again.
    * anything else: a score file path.

    Offline values are rounded to 6 decimals and read as Java floats, exactly as if they had been
    written to a score file and read back, so both routes rerank identically.
    """
    if source == OLD_DEBATER:
        deprecated(f"the quality source {OLD_DEBATER!r}", repr(DEBATER))
        source = DEBATER
    provider = QUALITY_SOURCES.get(source)
    if provider is None:
        return read_quality_scores(source)
    return provider(corpus, ids, texts, model_path, workers, skip_bad)
