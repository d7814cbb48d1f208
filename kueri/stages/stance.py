"""Stance labels: FIRST / SECOND / NEUTRAL / NO for the top hits of each topic (:mod:`kueri.stance`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kueri.records import Run
from kueri.stages.base import Context, Option, StageDefaults, StageKind


@dataclass(frozen=True)
class Stance(StageDefaults):
    """Labels the top ``depth`` hits of each topic (None: every hit) with ``model_name`` (a shipped model's name or a
    model file); the others keep Q0."""

    depth: int | None
    model_name: str = "stance-v3"
    name = "stance"
    needs_objects = True
    adds = ("stance",)

    def summary(self) -> str:
        which = f" ({self.model_name})" if self.model_name != "stance-v3" else ""
        return (f"stance of the top {self.depth}" if self.depth else "stance of every hit") + which

    def model(self, context: Context) -> Any:
        """The stance model, loaded once per context."""
        from kueri.stance import load_model

        return context.shared(("stance-model", self.model_name), lambda: load_model(self.model_name))

    def apply(self, run: Run, context: Context) -> Run:
        from kueri.processes import resolve_workers
        from kueri.stance import label_run

        return label_run(run, context.topics, context.texts("stance"), depth=self.depth, model=self.model(context),
                         progress=context.progress, workers=resolve_workers())

    def explain(self, run: Run, context: Context) -> dict[str, str | None]:
        """The sentence that decided the label :meth:`apply` gives each of the top ``depth`` hits, by passage id
        (None: the passage names neither object), for a reader who asks why (:func:`kueri.stance.explain_run`)."""
        from kueri.stance import explain_run

        return {row["doc"]: row["sentence"] for row in explain_run(run, context.topics, context.texts("stance"),
                                                                     self.depth, self.model(context))}


def build(config: Any) -> Stance | None:
    return Stance(config.stance_depth, config.stance_model) if config.stance_depth else None


KIND = StageKind("stance", build, options=(
    Option("stance_depth", "--stance-depth", "label the stance of the top N hits per topic (0: none)", type=int,
           metavar="N", off=0),
    Option("stance_model", "--stance-model", "the stance model: stance-v3 (the passage model on the top 10 hits), "
           "stance-v2 (the stance encoder's sentence votes on the top 20), stance-v1 (TF-IDF) or a model file",
           metavar="MODEL"),
), summary="stance labels of the top hits")
