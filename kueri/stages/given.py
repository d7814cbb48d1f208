"""Given candidates as a first stage: any earlier run's hits (TIRA's re-rank input, a run file, a PyTerrier
frame), reranked and labelled by a configuration's later stages as if that configuration had retrieved them.

:func:`given_stages` compiles a configuration for given candidates: :class:`Given` in place of its first stage,
then its later stages. A later stage that reads the title search's scores (``reads_title_scores``: the learned
second stage, whose model learned BM25 scores) gets them: :class:`Given` scores its candidates with the
configuration's own title search (``title_search()`` of its first stage), since another first stage's scores are
on another scale.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kueri.errors import KueriError
from kueri.lucene import AnalyzerConfig
from kueri.records import Hit, Run
from kueri.stages.base import Context, Stage, StageDefaults, capability


@dataclass(frozen=True, eq=False)
class Given(StageDefaults):
    """Each topic's top ``hits`` of ``run``, every candidate a passage of the index of ``analyzer``; with
    ``scored_by`` (a title search, :class:`~kueri.stages.retrieval.Search`), scored by it instead of their given
    scores."""

    run: Run = field(repr=False)
    analyzer: AnalyzerConfig
    hits: int
    scored_by: Any = None
    name = "given"

    def indexes(self) -> tuple[AnalyzerConfig, ...]:
        return (self.analyzer,)

    def probe(self, context: Context) -> Run:
        return self.apply({}, context)  # the candidates are known: at most a search of their titles

    def summary(self) -> str:
        rescored = f", scored by [{self.scored_by.summary()}]" if self.scored_by is not None else ""
        count = sum(len(hits) for hits in self.run.values())
        return f"{count} given candidates of {len(self.run)} topics{rescored}; {self.hits} hits"

    def apply(self, run: Run, context: Context) -> Run:
        known = set(context.index(self.analyzer).ids)
        unknown = [hit.doc for hits in self.run.values() for hit in hits if hit.doc not in known]
        if unknown:
            raise KueriError(f"{context.corpus}: {len(unknown)} passage(s) of the run are not in this corpus, "
                             f"e.g. {unknown[0]}")
        given = {qid: hits[: self.hits] for qid, hits in self.run.items()}
        return given if self.scored_by is None else title_scores(given, self.scored_by, context)


def given_stages(config: Any, run: Run) -> list[Stage]:
    """``config``'s stages over the candidates of ``run``: :class:`Given`, then the stages after its first."""
    first, *later = config.stages()
    # Both are optional members of a stage: a stage of one's own need not know them.
    reads = any(capability(stage, "reads_title_scores") for stage in later)
    search = capability(first, "title_search")() if reads else None
    return [Given(run, config.analyzer, config.hits, search), *later]


def title_scores(run: Run, search: Any, context: Context) -> Run:
    """``run`` with every hit's score replaced by its score under ``search`` (a title search).

    The order stays the run's, but for hits whose given scores tie (a run file's 6 decimals make ties of scores
    that differed, and TIRA's loader orders ties by docno): those are ordered as the search orders them, by their
    title score, then by corpus order."""
    from kueri.lucene.search import PassageScorer

    index = context.index(search.analyzer)
    position = {pid: i for i, pid in enumerate(index.ids)}
    scorer = PassageScorer(index, search.similarity, search.fields)
    by_number = {t.number: t for t in context.topics}
    rescored: Run = {}
    for qid, hits in run.items():
        scores = scorer.scores(by_number[qid].title, [hit.doc for hit in hits])
        order = [i for group in _tie_groups(hits) for i in sorted(group, key=lambda i: (-scores[i],
                                                                                         position[hits[i].doc]))]
        rescored[qid] = [Hit(hits[i].doc, scores[i], hits[i].stance) for i in order]
    return rescored


def _tie_groups(hits: list[Hit]) -> list[list[int]]:
    """The positions of ``hits``, in runs of equal consecutive scores."""
    groups: list[list[int]] = []
    for i, hit in enumerate(hits):
        if groups and hits[groups[-1][0]].score == hit.score:
            groups[-1].append(i)
        else:
            groups.append([i])
    return groups
