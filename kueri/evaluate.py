"""Evaluate runs: relevance measures through ir-measures (pytrec_eval) and stance macro-F1.

Relevance follows trec_eval without ``-c``, the semantics of the Touché results tables:

* a topic is evaluated when it is in the run AND in the qrels; the mean is over those topics.
  Topics of the qrels the run lacks are NOT counted as 0 (ir-measures alone would count them:
  its evaluators fill in a default for every qrels topic, so we hand it only the run's topics),
  and topics of the run without any judgment are skipped (reported as ``skipped_topics``);
* within a topic, hits are ranked by score descending, ties by doc id descending (trec_eval's
  rule; the rank column is ignored); unjudged = grade 0; nDCG's ideal ranking comes from all
  judged grades of the topic;
* one deliberate difference: trec_eval keeps scores as C ``float``, so scores that differ only
  after ~7 significant digits tie there (Olivier-Armstrong-run1: trec_eval 0.4801, doubles
  0.4792). We rank with the scores' full double precision, as the reference values of the
  project do; ``float_scores=True`` (``--float-scores``) gives trec_eval's exact numbers.

Measures are named as ir-measures names them (``nDCG@5``, ``P@5``, ``AP``, ``Judged@10``...) or
as trec_eval does (``ndcg_cut.5``). Measures pytrec_eval provides are computed by it; others
(``Judged@k``) by ir-measures' next provider that has them.

Stance: macro-F1 over the (topic, passage) pairs of the run that the stance qrels judge, with
labels FIRST, SECOND, NEUTRAL, NO (``Q0`` counts as NO, in run and qrels). As scikit-learn's
``f1_score(average="macro")`` with its default labels, the mean is over the labels that occur in
the gold labels or the predictions; a label in neither is left out rather than scored 0 or 1.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import ir_measures

from kueri.errors import KueriError
from kueri.records import NO_STANCE, STANCES, Run

Qrels = Mapping[str, Mapping[str, int]]
StanceQrels = Mapping[str, Mapping[str, str]]

DEFAULT_MEASURES = ("nDCG@5", "nDCG@10", "P@5")
STANCE_KEY = "stance_macro_f1"


# --------------------------------------------------------------------------------------------
# Relevance
# --------------------------------------------------------------------------------------------


def parse_measure(name: str) -> Any:
    """The ir-measures measure called ``name`` (ir-measures or trec_eval spelling)."""
    try:
        return ir_measures.parse_measure(name)
    except (ValueError, NameError, SyntaxError):
        pass
    try:
        parsed = ir_measures.parse_trec_measure(name)
    except (ValueError, NameError, SyntaxError):
        parsed = []
    if len(parsed) != 1:
        raise KueriError(f"unknown measure {name!r} (use ir-measures names: nDCG@5, P@10, AP, ...)")
    return parsed[0]


def run_as_dict(run: Run, float_scores: bool = False) -> dict[str, dict[str, float]]:
    """``{qid: {doc: score}}`` for pytrec_eval; a repeated doc keeps its first (best) hit.

    trec_eval (and pytrec_eval, which is its code) stores scores as C ``float``: scores that
    differ only after ~7 significant digits become ties and are then ordered by doc id. So that
    ties are ties of the doubles, the default hands it ``n, n-1, ..., 1`` in our own order
    (score descending as doubles, then doc id descending, trec_eval's tie rule); every trec_eval
    measure depends on that order only. ``float_scores=True`` passes the scores as they are,
    to reproduce trec_eval's numbers exactly.
    """
    scored: dict[str, dict[str, float]] = {}
    for qid, hits in run.items():
        docs: dict[str, float] = {}
        for hit in hits:
            docs.setdefault(hit.doc, float(hit.score))
        if not docs:  # a topic without hits has no line in a run file: trec_eval never sees it
            continue
        if not float_scores:
            # Python compares str by code point, as strcmp by byte for ASCII/UTF-8 ids.
            ordered = sorted(docs.items(), key=lambda item: item[0], reverse=True)
            ordered.sort(key=lambda item: item[1], reverse=True)  # stable: doc desc in ties
            # Small integers are exact in a float, so no two become equal there.
            docs = {doc: float(len(ordered) - i) for i, (doc, _) in enumerate(ordered)}
        scored[qid] = docs
    return scored


def per_topic_values(
    run: Run, qrels: Qrels, measures: Sequence[str], float_scores: bool = False
) -> tuple[dict[str, dict[str, float]], list[str]]:
    """(``{qid: {measure name: value}}`` for the evaluated topics in run order, skipped topics).

    Evaluated topics are those of the run that have qrels; skipped are the run's others.
    ``float_scores``: see :func:`run_as_dict`.
    """
    parsed = {name: parse_measure(name) for name in measures}
    scored = run_as_dict(run, float_scores)
    evaluated = [qid for qid in scored if qrels.get(qid)]
    skipped = [qid for qid in scored if not qrels.get(qid)]
    values: dict[str, dict[str, float]] = {qid: {} for qid in evaluated}
    if not evaluated or not parsed:
        return values, skipped
    # Only the evaluated topics' qrels: ir-measures yields a default value (0) for every qrels
    # topic missing from the run, which would be trec_eval -c, not trec_eval.
    topic_qrels = {qid: dict(qrels[qid]) for qid in evaluated}
    topic_run = {qid: scored[qid] for qid in evaluated}
    by_measure = {measure: name for name, measure in parsed.items()}
    native = [m for m in by_measure if ir_measures.pytrec_eval.supports(m)]
    others = [m for m in by_measure if m not in native]
    evaluators: list[Any] = []
    if native:
        evaluators.append(ir_measures.pytrec_eval.evaluator(native, topic_qrels))
    if others:
        try:
            evaluators.append(ir_measures.evaluator(others, topic_qrels))
        except (ValueError, RuntimeError) as exc:  # no installed provider has the measure
            raise KueriError(f"cannot compute {', '.join(map(str, others))}: {exc}") from None
    for evaluator in evaluators:
        for metric in evaluator.iter_calc(topic_run):
            values[metric.query_id][by_measure[metric.measure]] = float(metric.value)
    for name, measure in parsed.items():  # several names may parse to the same measure
        canonical = by_measure[measure]
        for topic in values.values():
            topic[name] = topic[canonical]
    return values, skipped


def evaluate_run(
    run: Run,
    qrels: Qrels,
    measures: Sequence[str] = ("nDCG@5",),
    stance_qrels: StanceQrels | None = None,
    per_topic: bool = False,
    float_scores: bool = False,
) -> dict[str, Any]:
    """Evaluate one run: ``{"topics": 50, "skipped_topics": 0, "nDCG@5": 0.4687, ...}``.

    ``topics`` counts the evaluated topics (in the run and in the qrels); ``skipped_topics`` the
    run's topics without qrels. Measures with no evaluated topic are ``None``. With
    ``stance_qrels``: ``stance_macro_f1`` (``None`` when no pair is judged) and
    ``stance_pairs``. With ``per_topic``: ``per_topic`` = ``{qid: {measure: value}}``.
    ``float_scores=True`` compares scores at C float precision as trec_eval does (see
    :func:`run_as_dict`); the default compares the scores as written (doubles).
    """
    values, skipped = per_topic_values(run, qrels, measures, float_scores)
    result: dict[str, Any] = {"topics": len(values), "skipped_topics": len(skipped)}
    for name in measures:
        aggregator = parse_measure(name).aggregator()  # a mean for the usual measures
        for topic in values.values():
            aggregator.add(topic[name])
        result[name] = float(aggregator.result()) if values else None
    if stance_qrels is not None:
        pairs = judged_stance_pairs(run, stance_qrels)
        result[STANCE_KEY] = macro_f1(pairs)
        result["stance_pairs"] = len(pairs)
    if per_topic:
        result["per_topic"] = values
    return result


def restrict_run(run: Run, ids: Iterable[str]) -> Run:
    """The run with only the hits whose doc is in ``ids``; topics left empty are dropped."""
    keep = ids if isinstance(ids, set | frozenset) else set(ids)
    restricted = {qid: [hit for hit in hits if hit.doc in keep] for qid, hits in run.items()}
    return {qid: hits for qid, hits in restricted.items() if hits}


def restrict_qrels(qrels: Qrels, ids: Iterable[str]) -> dict[str, dict[str, int]]:
    """The qrels with only the judgments of docs in ``ids``; topics left empty are dropped."""
    keep = ids if isinstance(ids, set | frozenset) else set(ids)
    restricted = {qid: {d: g for d, g in docs.items() if d in keep} for qid, docs in qrels.items()}
    return {qid: docs for qid, docs in restricted.items() if docs}


# --------------------------------------------------------------------------------------------
# Stance
# --------------------------------------------------------------------------------------------


def _label(stance: str) -> str:
    return "NO" if stance == NO_STANCE else stance


def judged_stance_pairs(run: Run, stance_qrels: StanceQrels) -> list[tuple[str, str]]:
    """(gold, predicted) labels of the run's (topic, doc) pairs that the stance qrels judge.

    A doc repeated within a topic counts once, with its first (best-ranked) prediction.
    """
    pairs: list[tuple[str, str]] = []
    for qid, hits in run.items():
        gold = stance_qrels.get(qid)
        if not gold:
            continue
        seen: set[str] = set()
        for hit in hits:
            if hit.doc in gold and hit.doc not in seen:
                seen.add(hit.doc)
                pairs.append((_label(gold[hit.doc]), _label(hit.stance)))
    return pairs


def macro_f1(pairs: Sequence[tuple[str, str]]) -> float | None:
    """Macro-F1 of (gold, predicted) pairs over the labels occurring in either; ``None`` if empty.

    Per label: precision and recall are 0 when their denominator is 0, and F1 is 0 when both
    are 0 (scikit-learn's ``zero_division=0``).
    """
    if not pairs:
        return None
    order = {label: i for i, label in enumerate(STANCES)}
    labels = sorted({g for g, _ in pairs} | {p for _, p in pairs}, key=lambda x: order.get(x, 99))
    total = 0.0
    for label in labels:
        tp = sum(1 for g, p in pairs if g == label and p == label)
        predicted = sum(1 for _, p in pairs if p == label)
        actual = sum(1 for g, _ in pairs if g == label)
        precision = tp / predicted if predicted else 0.0
        recall = tp / actual if actual else 0.0
        total += 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return total / len(labels)


# --------------------------------------------------------------------------------------------
# Reporting and the CLI
# --------------------------------------------------------------------------------------------


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.4f}"
    return str(value)


def _aligned(columns: Sequence[str], results: Sequence[Mapping[str, Any]]) -> str:
    # First column left-aligned (names), the others right-aligned (numbers).
    rows = [list(columns)] + [[_cell(r.get(c)) for c in columns] for r in results]
    widths = [max(len(row[i]) for row in rows) for i in range(len(columns))]
    lines = []
    for row in rows:
        cells = [row[0].ljust(widths[0])]
        cells += [cell.rjust(width) for cell, width in zip(row[1:], widths[1:], strict=True)]
        lines.append("  ".join(cells))
    return "\n".join(lines)


def format_table(results: Sequence[Mapping[str, Any]], measures: Sequence[str]) -> str:
    """One row per result (``run``, ``topics``, the measures, then ``stance_macro_f1`` when any
    result has it), columns aligned; values with 4 decimals, ``-`` for none."""
    columns = ["run", "topics", *measures]
    if any(STANCE_KEY in r for r in results):
        columns.append(STANCE_KEY)
    return _aligned(columns, results)


def format_per_topic(
    name: str, per_topic: Mapping[str, Mapping[str, float]], measures: Sequence[str]
) -> str:
    """Per-topic values of one run, one row per topic (as ``trec_eval -q``, in columns)."""
    results = [{"run": name, "topic": qid, **values} for qid, values in per_topic.items()]
    return _aligned(["run", "topic", *measures], results)
