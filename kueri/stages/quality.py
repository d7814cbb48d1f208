"""Quality reranking: run score times argument quality (the original's ``ArgumentQualityReranker``)."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from kueri.quality.scores import DEBATER, OLD_DEBATER
from kueri.records import Run
from kueri.stages.base import Context, StageDefaults, StageKind
from kueri.stages.settings import options_of, setting

#: Passages the offline quality model scores in this process: for fewer, worker processes (each loading the model)
#: cost more than they save; for more, the run context's workers score them side by side.
POOL_MIN_PASSAGES = 2_000


@dataclass(frozen=True)
class QualityRerank(StageDefaults):
    """Scores times the quality from ``source``: ``offline`` (the shipped model), ``debater-2022`` (the shipped
    IBM Debater scores), a file."""

    source: str
    name = "quality"
    orders_topics = True  # times_quality lists topics by number

    def summary(self) -> str:
        return f"quality rerank ({self.source})"

    def scores(self, ids: Collection[str], context: Context) -> dict[str, float]:
        """The quality of the passages ``ids`` from :attr:`source` (a passage the source does not score is left
        out)."""
        from kueri.quality.offline import quality_scores_for

        how = context.run_context
        workers = how.resolved_workers() if len(ids) >= POOL_MIN_PASSAGES else 1
        return quality_scores_for(self.source, context.corpus, ids, texts=context.texts("quality"),
                                  workers=workers, skip_bad=how.skip_bad)

    def apply(self, run: Run, context: Context) -> Run:
        from kueri.quality import times_quality

        return times_quality(run, self.scores({hit.doc for hits in run.values() for hit in hits}, context))


def build(config: Any) -> QualityRerank | None:
    return QualityRerank(config.quality_rerank) if config.quality_rerank else None


@dataclass(frozen=True)
class QualitySettings:
    """The quality rerank's setting."""

    quality_rerank: str | None = setting(
        None, f"rerank by argument quality from: offline (the shipped model), {DEBATER} (the original team's IBM "
        "Debater scores) or a 'passage_id<TAB>score' file", flag="--quality", metavar="SOURCE",
        off="no quality rerank", param="source", on="offline",
        deprecated=((OLD_DEBATER, f"--quality {DEBATER}", (("quality_rerank", DEBATER),)),))


KIND = StageKind("quality", build, options=options_of(QualitySettings), summary="score times argument quality")


def shown_quality(config: Any) -> QualityRerank:
    """The stage whose scores a page shows as the passages' quality: ``config``'s quality stage, else the offline
    model's (the quality its second stage reads as a feature)."""
    return next((stage for stage in config.stages() if isinstance(stage, QualityRerank)), QualityRerank("offline"))

