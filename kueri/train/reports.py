"""The adoption reports, each written once: per-class and macro-F1, confusions, a paired bootstrap over object
pairs, the stance decision the measured labels come from, and the adoption rule of a ranking change.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from kueri.records import STANCES as LABELS
from kueri.stance.decision import Decision

#: A change of the ranking is adopted when its cross-validated nDCG@5 gains at least this much (issues 32 and 45).
ADOPT = 0.01


def adopts(gain: float) -> bool:
    """The adoption rule: a gain of at least :data:`ADOPT`."""
    return gain >= ADOPT


def f1_report(gold: list[str], predicted: list[str], labels: tuple[str, ...]) -> dict[str, float]:
    """Per-class F1 and their mean over the classes in gold or predictions (kueri.evaluate.macro_f1's rule)."""
    report: dict[str, float] = {}
    present = [label for label in labels if label in gold or label in predicted]
    for label in labels:
        tp = sum(g == label == p for g, p in zip(gold, predicted, strict=True))
        n_pred, n_gold = predicted.count(label), gold.count(label)
        precision = tp / n_pred if n_pred else 0.0
        recall = tp / n_gold if n_gold else 0.0
        report[label] = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    report["macro"] = sum(report[label] for label in present) / len(present) if present else 0.0
    return report


def format_report(name: str, report: dict[str, float], labels: tuple[str, ...]) -> str:
    cells = " ".join(f"{label} {report[label]:.3f}" for label in labels)
    return f"{name:38s} macro-F1 {report['macro']:.3f}  ({cells})"


def summarise(name: str, reports: list[dict[str, float]]) -> str:
    """Mean and spread of the macro-F1 of several reports (fold assignments), and each class's mean F1."""
    macro = [r["macro"] for r in reports]
    cells = " ".join(f"{label} {np.mean([r[label] for r in reports]):.3f}" for label in LABELS)
    return f"{name:34s} macro-F1 {np.mean(macro):.3f} +- {np.std(macro):.3f}  ({cells})"


def confusion(gold: list[str], predicted: list[str]) -> str:
    lines = ["gold \\ predicted " + " ".join(f"{label:>8s}" for label in LABELS)]
    for g in LABELS:
        row = [sum(1 for a, b in zip(gold, predicted, strict=True) if a == g and b == p) for p in LABELS]
        lines.append(f"{g:16s} " + " ".join(f"{n:8d}" for n in row))
    return "\n".join(lines)


def indented(text: str) -> str:
    """A report's lines indented under the line before."""
    return "    " + text.replace("\n", "\n    ")


def decide(probabilities: np.ndarray, decision: Decision, named: Sequence[bool],
           comparative: Sequence[float] | None = None) -> list[str]:
    """A stance model's labels: its decision (:class:`kueri.stance.decision.Decision`: the prior shift, the NEUTRAL
    gate read against each passage's ``comparative`` score) on each row of P(FIRST, SECOND, NEUTRAL, NO), and NO
    for a passage naming neither object (it cannot favour one; ``label_masked``'s rule)."""
    labels = [decision.label(row, 1.0 if comparative is None else float(comparative[i]))
              for i, row in enumerate(probabilities)]
    return [label if name else "NO" for label, name in zip(labels, named, strict=True)]


def macro_f1_counted(gold: np.ndarray, predicted: np.ndarray, counts: np.ndarray) -> float:
    """:func:`f1_report`'s macro-F1 of label indices, each passage counted ``counts`` times."""
    f1s = []
    for k in range(len(LABELS)):
        tp = counts[(gold == k) & (predicted == k)].sum()
        n_gold, n_pred = counts[gold == k].sum(), counts[predicted == k].sum()
        if n_gold or n_pred:
            f1s.append(2 * tp / (n_gold + n_pred))
    return float(np.mean(f1s))


def paired_bootstrap(gold: Sequence[str], pairs: Sequence[str], a: Sequence[str], b: Sequence[str], name: str,
                     draws: int = 10_000) -> str:
    """The gain in macro-F1 of labels ``b`` over ``a``, and how it varies when the object ``pairs`` are drawn
    again with replacement (a pair's passages together: what another part written the same way could give)."""
    truth = np.array([LABELS.index(label) for label in gold])
    first, second = (np.array([LABELS.index(label) for label in labels]) for labels in (a, b))
    distinct = sorted(set(pairs))
    pair_of = np.array([distinct.index(pair) for pair in pairs])
    rng = np.random.default_rng(20222)
    gains = []
    for _ in range(draws):
        counts = np.bincount(rng.integers(len(distinct), size=len(distinct)), minlength=len(distinct))[pair_of]
        gains.append(macro_f1_counted(truth, second, counts) - macro_f1_counted(truth, first, counts))
    ones = np.ones(len(gold), dtype=np.int64)
    gain = macro_f1_counted(truth, second, ones) - macro_f1_counted(truth, first, ones)
    low, high = np.percentile(gains, [5, 95])
    return (f"  {name}: {gain:+.3f}; over {draws} draws of the {len(distinct)} pairs, 90 % between {low:+.3f} and "
            f"{high:+.3f}, above zero in {np.mean(np.array(gains) > 0):.1%}, below zero in "
            f"{np.mean(np.array(gains) < 0):.1%}")


def by_length_third(words: Sequence[int], gold: Sequence[str], given: Mapping[str, Sequence[str]]) -> list[str]:
    """A line for each third of the items by word count (shortest first), with each ``given`` model's macro-F1 on
    it: where in a passage's length a model gains or loses."""
    counts = np.array(words)
    third = np.searchsorted(np.percentile(counts, [100 / 3, 200 / 3]), counts, side="right")
    lines = []
    for k, name in enumerate(("shortest", "middle", "longest")):
        rows = np.flatnonzero(third == k)
        truth = [gold[i] for i in rows]
        figures = ", ".join(f"{model} {f1_report(truth, [labels[i] for i in rows], LABELS)['macro']:.3f}"
                            for model, labels in given.items())
        lines.append(f"  {name} third by words ({counts[rows].min()}-{counts[rows].max()}, {len(rows)} items): "
                     f"{figures}")
    return lines
