"""A run's stages asked as one: what they need, what they can do, and the run they make.

:class:`Plan` is where a caller asks a configuration's stages (``RunConfig.plan()``, or given candidates'
:func:`~kueri.stages.given.given_stages`) what they need (the indexes, the encoders, what to make ahead), how they
behave (whether they order the topics, read judgments), what a question costs them, and why they labelled a hit as
they did: each answer is gathered from the stages' own (:class:`~kueri.stages.base.Stage`; a fused stage answers from
the stages of the runs it fuses), never from their types.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from kueri.lucene import AnalyzerConfig
from kueri.records import Run
from kueri.stages.base import Context, Cost, Stage, Stored, capability


def _unique(items: Iterable[Any]) -> list[Any]:
    return list(dict.fromkeys(items))


class Plan:
    """The stages of one run, in run order (the first gets an empty run)."""

    def __init__(self, stages: Sequence[Stage]) -> None:
        self.stages = list(stages)

    def _ask(self, name: str) -> list[Any]:
        """Each stage's member ``name`` (its own, or the default: :func:`~kueri.stages.base.capability`)."""
        return [capability(stage, name) for stage in self.stages]

    def indexes(self) -> list[AnalyzerConfig]:
        """The analyses of the indexes the run reads, in the order the stages name them."""
        return _unique(analyzer for indexes in self._ask("indexes") for analyzer in indexes())

    def encoders(self) -> list[str]:
        """The encoders whose passage embeddings the run reads."""
        return _unique(name for embeds in self._ask("embeds") for name in embeds())

    def orders_topics(self) -> bool:
        """Whether the run lists the topics by number rather than in the order they were given."""
        return any(self._ask("orders_topics"))

    def reads_judgments(self) -> bool:
        """Whether the run reads relevance judgments (a manual run)."""
        return any(self._ask("reads_judgments"))

    def labelling(self) -> Plan:
        """The stages that only label hits (they add a column, the stance): they keep the order."""
        return Plan([stage for stage in self.stages if stage.adds])

    def ranking(self) -> Plan:
        """The stages but those that only label hits: the run's hits and order."""
        return Plan([stage for stage in self.stages if not stage.adds])

    def prepare(self, context: Context) -> None:
        """Make ahead, in the context's work folder, what the run reads (a dense search's vectors)."""
        for prepare in self._ask("prepare"):
            prepare(context)

    def apply(self, run: Run, context: Context) -> Run:
        """The run the stages make one after the other from ``run`` (unchecked)."""
        for stage in self.stages:
            run = stage.apply(run, context)
        return run

    def explain(self, run: Run, context: Context) -> dict[str, str | None]:
        """The sentence that decided each label of ``run``'s hits, by passage id, from the stages that explain."""
        found: dict[str, str | None] = {}
        for explain in self._ask("explain"):
            found.update(explain(run, context))
        return found

    def cost(self, context: Context, stored: Stored) -> Cost | None:
        """What the context's question costs the run beyond a warm question's (None: unknown): its first stage's run
        where that is cheap to know, and what each stage then embeds of it that ``stored`` lacks."""
        if not self.stages or not self.encoders():
            return Cost()
        run = capability(self.stages[0], "probe")(context)
        total = Cost()
        for stage, cost in zip(self.stages, self._ask("cost"), strict=True):
            found = cost(run if stage is not self.stages[0] else None, context, stored)
            if found is None:
                return None
            total += found
        return total
