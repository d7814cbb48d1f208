"""The learned second stage: reranks the top hits by lexical, quality and neural features
(:mod:`kueri.second_stage`). Its passage embeddings are kept in the encoders' stores in the work folder."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kueri.lucene import AnalyzerConfig
from kueri.records import Run
from kueri.stages.base import Context, Option, StageDefaults, StageKind, stored_encoder


@dataclass(frozen=True)
class SecondStage(StageDefaults):
    """``model`` (a shipped name or a file) over the top ``depth`` hits (None: the depth it was trained at);
    texts and extra queries come from the index of ``analyzer`` (the one the run was searched on)."""

    model: str
    depth: int | None
    analyzer: AnalyzerConfig
    name = "second-stage"
    needs_objects = True

    def summary(self) -> str:
        depth = f" of the top {self.depth}" if self.depth else ""
        return f"second stage {self.model}{depth}"

    def embeds(self) -> tuple[str, ...]:
        from kueri.second_stage import SecondStageModel

        return tuple(sorted(SecondStageModel.load(self.model).encoders))

    def encoders(self, context: Context) -> Any:
        """The model's encoders, loaded once per context, their passage embeddings in their stores in the work
        folder (:class:`~kueri.second_stage.candidates.Encoders`)."""
        from kueri.second_stage.candidates import Encoders

        return Encoders(**{name: stored_encoder(context, name) for name in self.embeds()})

    def apply(self, run: Run, context: Context) -> Run:
        from kueri.second_stage import SecondStageModel, second_stage

        model = SecondStageModel.load(self.model)
        return second_stage(run, context.topics, context.index(self.analyzer), depth=self.depth, model=model,
                            progress=context.progress, encoders=self.encoders(context))


def build(config: Any) -> SecondStage | None:
    return SecondStage(config.second_stage, config.second_stage_depth, config.analyzer) if config.second_stage else None


KIND = StageKind("second-stage", build, options=(
    Option("second_stage", "--second-stage", "learned reranker of the top hits: second-stage-v2, second-stage-v1, "
           "second-stage-lexical-v1, a model file, or none", metavar="MODEL", off="none"),
    Option("second_stage_depth", "--second-stage-depth", "hits per topic the second stage reranks", type=int,
           metavar="N"),
), summary="the learned reranker of the top hits")
