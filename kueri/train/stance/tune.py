"""Fine-tune the passage stance model's top encoder layers with its head on whole passages (docs/stance.md).

    .venv/bin/pip install -e '.[train]'
    .venv/bin/python scripts/tune_stance_passages.py --cache DIR cv       # grouped CV on the web-passage set
    .venv/bin/python scripts/tune_stance_passages.py --cache DIR cv-answers   # ... and on the stance answers
    .venv/bin/python scripts/tune_stance_passages.py --cache DIR write    # kueri/resources/models/stance-v4.npz
    .venv/bin/python scripts/tune_stance_passages.py --cache DIR --assignments 3 cv cv-answers
    .venv/bin/python scripts/tune_stance_passages.py --cache DIR --tuned-layers 2 cv-answers   # a candidate
    .venv/bin/python scripts/tune_stance_passages.py --cache DIR --windows [--train-in-windows] cv-answers
    .venv/bin/python scripts/tune_stance_passages.py --cache DIR --windows --members 3 cv-answers   # an ensemble

The defaults are stance-v4's recipe (``--votes``, ``--with-part second-train``); ``--no-votes`` and ``--with-part``
with no part give the candidates it was judged beside.

``scripts/train_stance_passages.py`` fits only a linear head on the stance encoder's first-token state: the encoder
itself learnt from single CompSent-19 sentences. Here its top layer learns too, on the same training data (the
web-passage set's training part, the stance answers, CompSent-19's training half; both orders of the objects, labels
exchanged), starting from that script's head fitted on the same data. The layers below are left as they are, so
their output is computed once per text (kueri's own graph) and kept in ``--cache``; since the head reads only the
first token, the top layer is computed for that token alone (its attention still reads every token), a sixth of a
whole layer's work. ``--tuned-layers N`` trains the top N layers (stance-v4: 1); the ones below the top are computed
for every token, and the states kept are those below the N, a cache of their own. JAX on the CPU, seeded.

``cv``: the web-passage set's five folds by domain (the other script's fold assignments, ``--assignments`` of them),
each fold's model trained on the other four plus the answers and CompSent-19, beside the head alone on the same folds
(paired). ``write``: the model fitted on everything, as a passage-encoder file whose top layer replaces the stance
encoder's (int8 blocks, as every cross-encoder file holds its layers); measure it on a frozen part with
``train_stance_passages.py frozen --model stance-v3 FILE``. ``--votes``: the head also reads the sentence encoder's
votes on the passage's sentences naming both objects (``train_stance_passages.py --votes``); the file says so and
kueri computes them when it labels.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from kueri import resources
from kueri.cli.script import script_parser
from kueri.encoders.bert_graph import BertLayer, FloatLinear, Int8Linear
from kueri.encoders.cross import TunedWeights, base_weights
from kueri.records import STANCES as LABELS
from kueri.stance.encoders import SENTENCE_MODEL
from kueri.stance.features import in_training_half
from kueri.train.folds import FOLDS, group_folds
from kueri.train.reports import confusion, f1_report, indented, summarise
from kueri.train.stance.bert_jax import (
    PARTS,
    adamw_step,
    bert_layer,
    full_layer,
    layer_norm,
    layer_parameters,
    layers_of,
    length_order,
    padded,
)
from kueri.train.stance.heads import (
    COMPOSED_WEIGHTS,
    SOURCE_WEIGHTS,
    SWAP,
    C,
    Head,
    class_mix,
    decide,
    fit_head,
    symmetric_probabilities,
    weight_of,
)
from kueri.train.stance.lower import Source, lower_of
from kueri.train.stance.passage_data import (
    EXTRA_TRAINING_PARTS,
    Data,
    States,
    answer_items,
    composed_items,
    compsent_items,
    load,
    outside,
    web_items,
    with_votes,
)
from kueri.train.stance.passages import write
from kueri.train.stance.windows import Windows, windows_of

SEED = 20222
BATCH = 32
#: Settings of the top layer's training (chosen by ``cv``; docs/stance.md).
EPOCHS = 2
LEARNING_RATE = 3e-5
#: stance-v4 tunes the top layer alone.
TUNED_LAYERS = 1
REBUILD = "`python scripts/train_stance_encoder.py`"
#: How far apart the seeds of an ensemble's members are (past the epochs' seeds, ``SEED + epoch``).
MEMBER_SEED_STEP = 1000
#: The training parts beside train.jsonl of stance-v4, the default recipe (the third part came later).
STANCE_V4_PARTS = ("second-train",)


def tuned_logits(params: dict, x, bias, extra, heads: int, eps: float):
    """Logits from the tuned layers below the top (``params["below_top"]``, every token), the top layer computed
    for the first token only (the same arithmetic as a whole layer's first row: its query is the first token's,
    its keys and values every token's) and the head, which reads that token's state and ``extra`` (the sentence
    votes, or nothing: width 0)."""
    import jax
    import jax.numpy as jnp

    for layer in params["below_top"]:
        x = full_layer(layer, x, bias, heads, eps)
    p = params["layer"]
    batch, tokens, hidden = x.shape
    size = hidden // heads

    def split(y, length):
        return y.reshape(batch, length, heads, size).transpose(0, 2, 1, 3)

    q = split(x[:, :1] @ p["q"]["w"] + p["q"]["b"], 1)
    k, v = (split(x @ p[n]["w"] + p[n]["b"], tokens) for n in "kv")
    scores = q @ k.transpose(0, 1, 3, 2) / np.float32(np.sqrt(size)) + bias
    context = (jax.nn.softmax(scores, axis=-1) @ v).transpose(0, 2, 1, 3).reshape(batch, hidden)
    first = layer_norm(x[:, 0] + context @ p["ao"]["w"] + p["ao"]["b"], p["aln"], eps)
    middle = jax.nn.gelu(first @ p["fi"]["w"] + p["fi"]["b"], approximate=False)
    first = layer_norm(first + middle @ p["fo"]["w"] + p["fo"]["b"], p["oln"], eps)
    return jnp.concatenate([first, extra], axis=-1) @ params["head"]["w"] + params["head"]["b"]


def batches_of(states: Sequence[np.ndarray], extras: np.ndarray, labels: np.ndarray, weights: np.ndarray,
               size: int = BATCH) -> list[tuple[np.ndarray, ...]]:
    """Inputs of similar length together, padded to a multiple of 16 (few shapes to compile)."""
    order = length_order(states)
    out = []
    for start in range(0, len(order), size):
        chosen = order[start:start + size]
        x, bias = padded(states, chosen, 16)
        out.append((np.array(chosen), x, bias, extras[chosen].astype(np.float32), labels[chosen], weights[chosen]))
    return out


def as_jax(layer: dict) -> dict:
    import jax.numpy as jnp

    return {k: {n: jnp.asarray(a) for n, a in v.items()} for k, v in layer.items()}


def as_layer(params: dict) -> BertLayer:
    return bert_layer({k: {n: np.asarray(a, dtype=np.float32) for n, a in v.items()} for k, v in params.items()})


def rounded(layer: dict) -> dict:
    """A layer's linear weights rounded to int8 blocks, as the file holds them."""
    import jax.numpy as jnp

    layer = dict(layer)
    for part in PARTS:
        weight = Int8Linear.quantise(np.asarray(layer[part]["w"]), np.asarray(layer[part]["b"])).weight()
        layer[part] = {"w": jnp.asarray(weight), "b": layer[part]["b"]}
    return layer


class TopLayers:
    """The stance encoder's top ``count`` layers and a passage head, trained together (see the module)."""

    def __init__(self, encoder: TunedWeights, head: Head, count: int = TUNED_LAYERS,
                 source_weights: Mapping[str, float] | None = None, seed: int = SEED) -> None:
        import jax.numpy as jnp

        self.encoder, self.count, self.source_weights, self.seed = encoder, count, source_weights, seed
        layers = [layer_parameters(layer) for layer in layers_of(encoder)[-count:]]
        self.params = {"below_top": [as_jax(layer) for layer in layers[:-1]], "layer": as_jax(layers[-1]),
                       "head": {"w": jnp.asarray(head.weight, dtype=jnp.float32),
                                "b": jnp.asarray(head.bias, dtype=jnp.float32)}}
        self.train_priors = head.train_priors
        base = base_weights().encoder
        self.heads, self.eps = base.heads, base.eps

    def fit(self, source: Source, epochs: int, learning_rate: float, log: bool = True) -> None:
        import jax
        import jax.numpy as jnp

        lower, items = source.lower, source.data.items
        y = np.array([LABELS.index(i.label) for i in items] + [SWAP[LABELS.index(i.label)] for i in items],
                     dtype=np.int32)
        w = np.array([weight_of(i.source, self.source_weights) for i in items] * 2, dtype=np.float32)
        batches = batches_of([*lower.forward, *lower.backward], source.extras(), y, w)
        heads, eps = self.heads, self.eps

        def loss(p, x, bias, extra, labels, weights):
            logits = tuned_logits(p, x, bias, extra, heads, eps)
            picked = jax.nn.log_softmax(logits)[jnp.arange(len(labels)), labels]
            return -jnp.sum(weights * picked) / jnp.sum(weights)

        step = adamw_step(loss, epochs * len(batches), learning_rate)
        params = self.params
        m = jax.tree_util.tree_map(jnp.zeros_like, params)
        v = jax.tree_util.tree_map(jnp.zeros_like, params)
        t = 0
        for epoch in range(epochs):
            started, total = time.perf_counter(), 0.0
            for index in np.random.default_rng(self.seed + epoch).permutation(len(batches)):
                _, x, bias, extra, labels, weights = batches[index]
                t += 1
                params, m, v, value = step(params, m, v, jnp.float32(t), x, bias, extra, labels, weights)
                total += float(value) * float(weights.sum())
            if log:
                print(f"    epoch {epoch + 1}/{epochs}: loss {total / w.sum():.4f}, "
                      f"{time.perf_counter() - started:.0f} s", flush=True)
        self.params = params

    def shipped(self) -> dict:
        """The parameters as the file holds them: the layers' linear weights rounded to int8 blocks."""
        return {"below_top": [rounded(layer) for layer in self.params["below_top"]],
                "layer": rounded(self.params["layer"]), "head": self.params["head"]}

    def probabilities(self, source: Source) -> np.ndarray:
        """P(FIRST, SECOND, NEUTRAL, NO) as the shipped file computes them (:meth:`shipped`), both orders averaged
        (FIRST and SECOND exchanged back)."""
        import jax

        count = len(source.lower.forward)
        states = [*source.lower.forward, *source.lower.backward]
        logits = np.zeros((len(states), len(LABELS)))
        predict = jax.jit(lambda p, x, bias, extra: tuned_logits(p, x, bias, extra, self.heads, self.eps))
        params = self.shipped()
        for chosen, x, bias, extra, *_ in batches_of(states, source.extras(), np.zeros(len(states), np.int32),
                                                     np.zeros(len(states), np.float32), 64):
            logits[chosen] = np.asarray(predict(params, x, bias, extra), dtype=np.float64)
        return symmetric_probabilities(logits[:count], logits[count:])

    def tuned(self, meta: dict[str, object]) -> TunedWeights:
        """The stance encoder with these top layers, and this head."""
        tops = [as_layer(layer) for layer in [*self.params["below_top"], self.params["layer"]]]
        head = FloatLinear(np.asarray(self.params["head"]["w"]), np.asarray(self.params["head"]["b"]))
        return TunedWeights(meta, (*self.encoder.layers[:-self.count], *tops), head)


@dataclass
class Ensemble:
    """Fitted top layers read together: the mean of their probabilities (``--members``, a candidate: the members
    share the layers below and differ in the order they saw the batches, so each costs only its top layer for the
    first token and its head)."""

    members: list[TopLayers]

    def probabilities(self, source: Source) -> np.ndarray:
        return np.mean([member.probabilities(source) for member in self.members], axis=0)


def member_seeds(members: int) -> list[int]:
    """The seeds of an ensemble's members: the first is stance-v4's, so a one-member ensemble is stance-v4's model."""
    return [SEED + MEMBER_SEED_STEP * m for m in range(members)]


def trained(source: Source, encoder: TunedWeights, epochs: int, learning_rate: float,
            tuned_layers: int = TUNED_LAYERS, source_weights: Mapping[str, float] | None = None) -> TopLayers:
    model = TopLayers(encoder, fit_head(source.data, C, source_weights), tuned_layers, source_weights)
    model.fit(source, epochs, learning_rate)
    return model


def cross_validate(target: Source, rest: Source, encoder: TunedWeights, shift_to: np.ndarray, epochs: int,
                   learning_rate: float, assignments: int, measured: Sequence[bool] | None = None,
                   tuned_layers: int = TUNED_LAYERS, read_in_windows: Windows | None = None,
                   train_in_windows: bool = False, source_weights: Mapping[str, float] | None = None,
                   members: int = 1) -> None:
    """Grouped 5-fold CV over ``target`` (the fold assignments of ``train_stance_passages.py``), each fold's model
    trained on the other folds plus ``rest``, beside stance-v3's recipe (a head on the encoder's state alone) and,
    with the votes, the head on state and votes, on the same folds (paired); figures on the ``measured`` items
    (default all), mean and spread over the assignments. ``read_in_windows``: the held-out items longer than the
    window also read in those windows; with ``train_in_windows``, also a model trained on the training folds' windows
    too, read in windows. ``source_weights``: how much each source's items count in every fit (default
    :data:`~kueri.train.stance.heads.SOURCE_WEIGHTS`). ``members`` over 1: also the :class:`Ensemble` of that many
    (the first the tuned model above), and read in windows with ``read_in_windows``."""
    items = target.data.items
    hidden = target.lower.forward[0].shape[1]
    keep = [i for i in range(len(items)) if measured is None or measured[i]]
    gold = [items[i].label for i in keep]
    tuned = (f"top {'layer' if tuned_layers == 1 else f'{tuned_layers} layers'} + head, {epochs} ep, "
             f"lr {learning_rate}")
    state_alone = "head on the state alone (stance-v3's recipe)"
    reports: dict[str, list[dict[str, float]]] = {}  # each reading's figures, in the order the folds give them
    pooled: list[str] = []
    for assignment in range(assignments):
        labels: dict[str, list[str]] = {}
        fold = group_folds([item.group for item in items], assignment)
        for k in range(FOLDS):
            held = [i for i in range(len(items)) if fold[i] == k]
            kept = target.take([i for i in range(len(items)) if fold[i] != k]) + \
                rest.take(outside(rest.data.items, {items[i].group for i in held}))
            part = target.take(held)
            started = time.perf_counter()
            head = fit_head(kept.data, C, source_weights)
            state_only = head if target.data.forward.shape[1] == hidden else fit_head(
                Data(kept.data.items, kept.data.forward[:, :hidden], kept.data.backward[:, :hidden]), C, source_weights)
            model = TopLayers(encoder, head, tuned_layers, source_weights)
            model.fit(kept, epochs, learning_rate, log=False)
            first = model.probabilities(part)
            read = {state_alone: state_only.probabilities(part.data.forward[:, :hidden],
                                                          part.data.backward[:, :hidden])}
            if state_only is not head:
                read["head on the state and the votes"] = head.probabilities(part.data.forward, part.data.backward)
            read[tuned] = first
            if read_in_windows:
                read[f"{tuned}, read in windows"] = read_in_windows.probabilities(model, target, held, first)
            if read_in_windows and train_in_windows:  # the training folds' windows naming an object, each an item
                trained_windows = [j for j, owner in enumerate(read_in_windows.owner) if fold[owner] != k]
                windowed = TopLayers(encoder, head, tuned_layers, source_weights)
                windowed.fit(kept + read_in_windows.source(target, trained_windows), epochs, learning_rate, log=False)
                read[f"{tuned}, trained and read in windows"] = read_in_windows.probabilities(
                    windowed, target, held, windowed.probabilities(part))
            if members > 1:
                others = [TopLayers(encoder, head, tuned_layers, source_weights, seed)
                          for seed in member_seeds(members)[1:]]
                for other in others:
                    other.fit(kept, epochs, learning_rate, log=False)
                ensemble = Ensemble([model, *others])
                read[f"{tuned}, {members} members"] = together = ensemble.probabilities(part)
                if read_in_windows:
                    read[f"{tuned}, {members} members, read in windows"] = read_in_windows.probabilities(
                        ensemble, target, held, together)
            for name, p in read.items():
                decided = labels.setdefault(name, [""] * len(items))
                for i, label in zip(held, decide(p, part.data.items, head.train_priors, shift_to), strict=True):
                    decided[i] = label
            print(f"  assignment {assignment}, fold {k + 1}/{FOLDS}: {len(held)} held out, "
                  f"{time.perf_counter() - started:.0f} s", flush=True)
        for name, decided in labels.items():
            reports.setdefault(name, []).append(f1_report(gold, [decided[i] for i in keep], LABELS))
        print(f"  assignment {assignment}: " + ", ".join(f"{reports[n][-1]['macro']:.4f}" for n in labels), flush=True)
        pooled += [labels[tuned][i] for i in keep]
    names = list(reports)
    for name in names:
        print(summarise(name, reports[name]))
    for name, against in ((tuned, state_alone), *((later, tuned) for later in names[names.index(tuned) + 1:])):
        gains = [b["macro"] - a["macro"] for a, b in zip(reports[against], reports[name], strict=True)]
        print(f"  {name} minus {against.split(' (')[0].split(',')[0]}, paired per assignment: {np.mean(gains):+.4f} "
              f"+- {np.std(gains):.4f} ({', '.join(f'{g:+.4f}' for g in gains)})")
    print(indented(confusion(gold * assignments, pooled)))


def main(argv: list[str] | None = None) -> int:
    parser = script_parser(__doc__, quiet=False)
    parser.add_argument("--cache", type=Path, required=True, help="folder for the encoder's states (outside the repo)")
    parser.add_argument("--epochs", type=int, default=EPOCHS, help="passes over the data (%(default)s)")
    parser.add_argument("--learning-rate", type=float, default=LEARNING_RATE, help="peak (%(default)s)")
    parser.add_argument("--out", type=Path, default=resources.path("models", "stance-v4.npz"),
                        help="the model file to write (%(default)s)")
    parser.add_argument("--assignments", type=int, default=1, help="cv: fold assignments (%(default)s)")
    parser.add_argument("--tuned-layers", type=int, default=TUNED_LAYERS, choices=range(1, 7), metavar="{1..6}",
                        help="the stance encoder's top layers trained with the head (%(default)s)")
    parser.add_argument("--votes", action=argparse.BooleanOptionalAction, default=True,
                        help="the head reads the sentence encoder's votes too (train_stance_passages.py --votes; "
                        "default: yes)")
    parser.add_argument("--with-part", nargs="*", default=list(STANCE_V4_PARTS), choices=EXTRA_TRAINING_PARTS,
                        help="training parts of the set beside train.jsonl (default: %(default)s; none given: "
                        "train.jsonl alone; cv measures on train.jsonl's passages)")
    parser.add_argument("--windows", action="store_true",
                        help="cv-answers: also read the held-out passages longer than the model's window in "
                        "overlapping windows (the same fitted models)")
    parser.add_argument("--train-in-windows", action="store_true",
                        help="cv-answers with --windows: also a model trained on the training folds' answers' windows "
                        "naming an object (each with its answer's label), read in windows")
    parser.add_argument("--composed", action="store_true",
                        help="train on the stance answers and CompSent-19's sentences set inside page surroundings too")
    parser.add_argument("--answers-weight", type=float, default=SOURCE_WEIGHTS["answers"],
                        help="how much a stance answer counts in every fit, beside a web passage's 1 (%(default)s)")
    parser.add_argument("--members", type=int, default=1,
                        help="cv, cv-answers: also an ensemble of this many tuned models, differing in the batches' "
                        "order, their probabilities averaged (%(default)s: none)")
    parser.add_argument("what", nargs="+", choices=("cv", "cv-answers", "write"))
    args = parser.parse_args(argv)
    if args.train_in_windows and not args.windows:
        parser.error("--train-in-windows reads in windows: give --windows too")
    weights = {**SOURCE_WEIGHTS, "answers": args.answers_weight}
    started = time.perf_counter()
    encoder = TunedWeights.load(SENTENCE_MODEL, REBUILD)
    states = States(args.cache)
    sources = {}
    for name, items in (("web-train", web_items("train")), *((f"web-{p}", web_items(p)) for p in args.with_part),
                        ("answers", answer_items()), ("compsent-train", compsent_items(True)),
                        *((("composed", composed_items()),) if args.composed else ())):
        data = load(states, name, items)
        sources[name] = Source(with_votes(data, args.cache) if args.votes else data,
                               lower_of(args.cache, name, items, encoder, args.tuned_layers))
    web = sources["web-train"]
    count = len(web.data.items)  # a CV measures on train.jsonl's passages (its figures stay comparable)
    for part in args.with_part:
        web = web + sources[f"web-{part}"]
    measured = [i < count for i in range(len(web.data.items))] if args.with_part else None
    # CompSent-19's sentences, and with --composed the answers and sentences in page surroundings: in every fit.
    sentences = sources["compsent-train"] + sources["composed"] if args.composed else sources["compsent-train"]
    rest = sources["answers"] + sentences
    shift_to = class_mix(web.data.items)
    if "cv" in args.what:
        print(f"== web-passage set: {FOLDS} folds by domain ==")
        cross_validate(web, rest, encoder, shift_to, args.epochs, args.learning_rate, args.assignments, measured,
                       args.tuned_layers, source_weights=weights, members=args.members)
    if "cv-answers" in args.what:
        print(f"== stance answers: {FOLDS} folds by question, measured on the held-out half of stance-v1's split ==")
        answers = sources["answers"]
        cross_validate(answers, web + sentences, encoder, shift_to, args.epochs, args.learning_rate,
                       args.assignments, [not in_training_half(item.group) for item in answers.data.items],
                       args.tuned_layers, windows_of(args.cache, "answers", answers.data.items, encoder,
                                                     args.tuned_layers) if args.windows else None,
                       args.train_in_windows, weights, args.members)
    if "write" in args.what:
        model = trained(web + rest, encoder, args.epochs, args.learning_rate, args.tuned_layers, weights)
        head = Head(np.zeros((1, 1)), np.zeros(1), model.train_priors)
        tuned = model.tuned(dict(encoder.meta))
        # The top layer's own settings apart from the sentence encoder's (its header's "epochs", "learning_rate").
        write(head, shift_to, args.out, tuned, {"tuned_layers": args.tuned_layers, "votes": args.votes, "top_layer": {
            "epochs": args.epochs, "learning_rate": args.learning_rate, "seed": SEED},
            # the header says the weights the file was trained with (the default's are written by `write` itself)
            **({"source_weights": {**weights, **(COMPOSED_WEIGHTS if args.composed else {})}}
               if weights != SOURCE_WEIGHTS else {})}, args.with_part, args.composed)
    print(f"done in {time.perf_counter() - started:.0f} s")
    return 0

