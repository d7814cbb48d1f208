"""The learned second stage: reranks the top hits by lexical, quality and neural features
(:mod:`kueri.second_stage`). Its passage embeddings are kept in the encoders' stores in the work folder."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kueri.lucene import AnalyzerConfig
from kueri.records import Run
from kueri.stages.base import Context, Cost, StageDefaults, StageKind, Stored, stored_encoder
from kueri.stages.settings import options_of, setting

#: The candidates a second stage whose depth is not set is taken to rerank when its cost is estimated (the
#: depth the shipped models were trained at).
DEFAULT_DEPTH = 100


@dataclass(frozen=True)
class LearnedRanking(StageDefaults):
    """``model`` (a shipped name or a file) over the top ``depth`` hits (None: the depth it was trained at);
    texts and extra queries come from the index of ``analyzer`` (the one the run was searched on). ``cascade``:
    cheaper models that rank first, each with how many of its top hits per topic the next one reorders
    (:func:`kueri.second_stage.second_stage`)."""

    model: str
    depth: int | None
    analyzer: AnalyzerConfig
    cascade: tuple[tuple[str, int], ...] = ()
    name = "second-stage"
    needs_objects = True
    reads_title_scores = True  # its model learned BM25 scores of the title: given candidates are scored so first

    def summary(self) -> str:
        depth = f" of the top {self.depth}" if self.depth else ""
        steps = "".join(f"{model} keeping {keep}, then " for model, keep in self.cascade)
        return f"second stage {steps}{self.model}{depth}"

    def embeds(self) -> tuple[str, ...]:
        from kueri.second_stage import SecondStageModel

        models = [SecondStageModel.load(name) for name in (*(model for model, _ in self.cascade), self.model)]
        return tuple(sorted(frozenset().union(*(model.encoders for model in models))))

    def indexes(self) -> tuple[AnalyzerConfig, ...]:
        return (self.analyzer,)

    def cost(self, run: Run | None, context: Context, stored: Stored) -> Cost | None:
        """Of each topic's top candidates in ``run`` that its models embed (:meth:`embedded_depths`, of the top
        :data:`DEFAULT_DEPTH` when its depth is not set), how many the stores lack (None: ``run`` is not known)."""
        depths = self.embedded_depths(DEFAULT_DEPTH)
        if not depths:
            return Cost()
        if run is None:
            return None
        window = max(DEFAULT_DEPTH, self.depth or DEFAULT_DEPTH)  # the candidates its first model ranks
        cost = Cost()
        for topic in context.topics:
            ids = [hit.doc for hit in run.get(topic.number, [])[:window]]
            texts = context.texts(self.name)(ids)
            for encoder, count in depths.items():
                # a cascade embeds what its cheaper model ranks on top of the window, not the first stage's top: so
                # what counts is how many of the window's candidates are stored (an earlier question's), against
                # how many the encoder embeds
                wanted = min(count, len(texts))
                cost += Cost(max(0, wanted - stored(encoder, texts)), wanted)
        return cost

    def embedded_depths(self, default_depth: int) -> dict[str, int]:
        """Per encoder, how many of a topic's top candidates it embeds: the depth for an encoder of the first model
        that ranks (``default_depth`` when the model's own is not set here), else what the cascade's step before the
        first model that uses it keeps (``kueri serve`` looks them up to tell a warm question from a cold one)."""
        from kueri.second_stage import SecondStageModel

        names = (*(model for model, _ in self.cascade), self.model)
        ranked = [self.depth or default_depth, *(keep for _, keep in self.cascade)]  # candidates each level ranks
        depths: dict[str, int] = {}
        for name, count in zip(names, ranked, strict=True):
            for encoder in SecondStageModel.load(name).encoders:
                depths.setdefault(encoder, count)
        return depths

    def encoders(self, context: Context) -> dict[str, Any]:
        """The model's encoders by name, loaded once per context, their passage embeddings in their stores in the
        work folder (:data:`~kueri.second_stage.candidates.Encoders`)."""
        return {name: stored_encoder(context, name) for name in self.embeds()}

    def apply(self, run: Run, context: Context) -> Run:
        from kueri.second_stage import SecondStageModel, second_stage

        model = SecondStageModel.load(self.model)
        return second_stage(run, context.topics, context.index(self.analyzer), depth=self.depth, model=model,
                            progress=context.run_context.progress, encoders=self.encoders(context),
                            cascade=self.cascade)


def build(config: Any) -> LearnedRanking | None:
    if not config.second_stage:
        return None
    return LearnedRanking(config.second_stage, config.second_stage_depth, config.analyzer,
                          config.second_stage_cascade or ())


def parse_cascade(text: str) -> tuple[tuple[str, int], ...]:
    """``MODEL:N[,MODEL:N...]`` (a flag's value) as the cascade's (model, candidates kept) pairs; ``none``: no
    cascade."""
    from argparse import ArgumentTypeError

    if text.strip() == "none":
        return ()
    steps = []
    for part in text.split(","):
        model, _, keep = part.strip().rpartition(":")
        if not model or not keep.isdigit() or int(keep) < 1:
            raise ArgumentTypeError(f"second-stage cascade {text!r}: give MODEL:N[,MODEL:N...] (N at least 1), e.g. "
                             "second-stage-lexical-v1:40,second-stage-v1:15")
        steps.append((model, int(keep)))
    return tuple(steps)


@dataclass(frozen=True)
class SecondStageSettings:
    """The learned second stage's settings."""

    second_stage: str | None = setting(
        None, "learned reranker of the top hits: second-stage-v2, second-stage-v1, second-stage-lexical-v1, "
        "second-stage-whole-topic-v1 or a model file", metavar="MODEL", off="no second stage", param="model",
        on="second-stage-v2")
    second_stage_depth: int | None = setting(
        None, "hits per topic the second stage reranks (default: the depth its model was trained at)", type=int,
        metavar="N", param="depth", on=100)
    second_stage_cascade: tuple[tuple[str, int], ...] = setting(
        (), "cheaper models that rank first, each with how many of its top hits per topic the next reorders (the "
        "default's: second-stage-lexical-v1:40,second-stage-v1:15), or none", type=parse_cascade,
        metavar="MODEL:N,...", param="cascade")


KIND = StageKind("second-stage", build, options=options_of(SecondStageSettings),
                 summary="the learned reranker of the top hits")
