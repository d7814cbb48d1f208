"""Encoder features of a stance answer for :mod:`kueri.train.stance.cv_encoders`: cosine similarities of its e5 and
MiniLM embeddings (what the second stage already computes) to short statements built from the topic's two objects,
and a probe of whether those encoders tell a single comparative sentence's direction. Embeddings are kept in a cache
folder.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from kueri.train.data import compsent_rows, stance_train_rows

# "OBJ1 is better than OBJ2" and paraphrases; {a} is the winner. Both orders are embedded.
BETTER = (
    "{a} is better than {b}.", "{a} is superior to {b}.", "I prefer {a} over {b}.", "{b} is worse than {a}.",
    "Choose {a} rather than {b}.", "{a} beats {b}.", "{a} is the better choice compared to {b}.",
    "{a} has clear advantages over {b}.", "Go with {a}, not {b}.", "{b} is inferior to {a}.",
)
NEUTRAL = (
    "{a} and {b} are equally good.", "Both {a} and {b} have their pros and cons; it depends.",
    "There is no clear winner between {a} and {b}.", "{a} and {b} are about the same.",
)
OFF_TOPIC = (
    "How to store {a} at home.", "Where to buy {b} and how much it costs.", "A list of products including {a}.",
    "Copyright, privacy policy and contact information.", "Click here to subscribe to our newsletter.",
)
ENCODER_FEATURES = ("better1_mean", "better2_mean", "better1_max", "better2_max", "neutral", "off_topic",
                    "question")
# Columns exchanged by swapping the objects.
ENCODER_SWAP = [1, 0, 3, 2, 4, 5, 6]
#: The dense features that read the sentence votes (the rest are counts, positions and sentiment).


def raw_rows() -> list[tuple[str, str, str, str]]:
    """(question, answer, object_1, object_2) of the usable rows, in load_stance_train's order."""
    return [(row["question"], row["answer"], row["object_1"], row["object_2"]) for row in stance_train_rows()]


def cached_embeddings(cache: Path, name: str, texts: list[str], encode: Callable[[list[str]], np.ndarray]
                      ) -> np.ndarray:
    """``encode(texts)``, kept in ``cache/name-<digest of texts>.npy``."""
    digest = hashlib.sha1("\0".join(texts).encode()).hexdigest()[:16]
    path = cache / f"{name}-{digest}.npy"
    if path.exists():
        return np.load(path)
    started = time.perf_counter()
    vectors = encode(texts)
    np.save(path, vectors)
    print(f"  embedded {len(texts)} texts with {name} in {time.perf_counter() - started:.0f} s", flush=True)
    return vectors


def statements(first: str, second: str) -> list[str]:
    return ([t.format(a=first, b=second) for t in BETTER] + [t.format(a=second, b=first) for t in BETTER]
            + [t.format(a=first, b=second) for t in NEUTRAL] + [t.format(a=first, b=second) for t in OFF_TOPIC])


def encoder_features(passages: np.ndarray, questions: np.ndarray, proto: np.ndarray) -> np.ndarray:
    """Rows x 7 similarity features; ``proto`` is rows x statements x dimension (see :func:`statements`)."""
    sims = np.einsum("rd,rsd->rs", passages, proto)
    nb = len(BETTER)
    b1, b2 = sims[:, :nb], sims[:, nb:2 * nb]
    neutral = sims[:, 2 * nb:2 * nb + len(NEUTRAL)]
    off = sims[:, 2 * nb + len(NEUTRAL):]
    question = np.einsum("rd,rd->r", passages, questions)
    return np.column_stack([b1.mean(1), b2.mean(1), b1.max(1), b2.max(1), neutral.mean(1), off.mean(1), question])


def embed_all(cache: Path, rows: list[tuple[str, str, str, str]]) -> dict[str, np.ndarray]:
    """Encoder features of each row, per encoder (forward direction)."""
    from kueri.encoders.e5 import E5Encoder
    from kueri.encoders.minilm import MiniLMEncoder

    answers = [answer for _, answer, _, _ in rows]
    questions = [question for question, _, _, _ in rows]
    protos = [statements(o1, o2) for _, _, o1, o2 in rows]
    unique = sorted({s for p in protos for s in p})
    where = {s: i for i, s in enumerate(unique)}
    out = {}
    for name, make in (("e5", E5Encoder), ("minilm", MiniLMEncoder)):
        encoder = None

        def lazy(method: str, name: str = name, make: Callable = make) -> Callable[[list[str]], np.ndarray]:
            def run(texts: list[str]) -> np.ndarray:
                nonlocal encoder
                if encoder is None:
                    encoder = make()
                return getattr(encoder, method)(texts)
            return run

        passage_vectors = cached_embeddings(cache, f"{name}-passages", answers, lazy("passages"))
        question_vectors = cached_embeddings(cache, f"{name}-questions", questions, lazy("queries"))
        statement_vectors = cached_embeddings(cache, f"{name}-statements", unique, lazy("queries"))
        proto = np.stack([statement_vectors[[where[s] for s in p]] for p in protos])
        out[name] = encoder_features(passage_vectors, question_vectors, proto)
    return out


def sentence_probe(cache: Path) -> None:
    """Do the encoders tell the direction of a single comparative sentence? CompSent-19's BETTER and WORSE
    sentences: is the sentence closer to "A is better than B" (mean of two templates) than to "B ... A"?"""
    from kueri.encoders.e5 import E5Encoder
    from kueri.encoders.minilm import MiniLMEncoder

    rows = [r for r in compsent_rows() if r["most_frequent_label"] in ("BETTER", "WORSE")]
    texts = [r["sentence"] for r in rows]
    templates = BETTER[:2]
    forward = [t.format(a=r["object_a"], b=r["object_b"]) for r in rows for t in templates]
    backward = [t.format(a=r["object_b"], b=r["object_a"]) for r in rows for t in templates]
    better = np.array([r["most_frequent_label"] == "BETTER" for r in rows])
    for name, make, method in (("minilm", MiniLMEncoder, "passages"), ("e5", E5Encoder, "queries")):
        encoder = make()
        vectors = cached_embeddings(cache, f"{name}-compsent", texts, getattr(encoder, method))
        f = cached_embeddings(cache, f"{name}-compsent-forward", forward, encoder.queries)
        b = cached_embeddings(cache, f"{name}-compsent-backward", backward, encoder.queries)
        k = len(templates)
        margin = (np.einsum("rd,rkd->r", vectors, f.reshape(len(rows), k, -1))
                  - np.einsum("rd,rkd->r", vectors, b.reshape(len(rows), k, -1))) / k
        accuracy = float(((margin > 0) == better).mean())
        print(f"sentence probe, {name}: {len(rows)} CompSent-19 BETTER/WORSE sentences ({better.mean():.3f} BETTER): "
              f"the closer statement's direction is right for {accuracy:.3f}; mean margin {margin[better].mean():+.4f} "
              f"(BETTER) {margin[~better].mean():+.4f} (WORSE)", flush=True)
