"""Stance labels: FIRST / SECOND / NEUTRAL / NO for the top hits of each topic (:mod:`kueri.stance`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kueri.records import Run
from kueri.stages.base import Context, StageDefaults, StageKind
from kueri.stages.settings import ALL, OFF, depth_flag, options_of, setting
from kueri.stance.family import DEFAULT, MODELS


@dataclass(frozen=True)
class Stance(StageDefaults):
    """Labels the top ``depth`` hits of each topic (None: every hit) with ``model_name`` (a shipped model's name or a
    model file); the others keep Q0."""

    depth: int | None
    model_name: str = DEFAULT
    name = "stance"
    needs_objects = True
    adds = ("stance",)

    def summary(self) -> str:
        which = f" ({self.model_name})" if self.model_name != DEFAULT else ""
        return (f"stance of the top {self.depth}" if self.depth else "stance of every hit") + which

    def model(self, context: Context) -> Any:
        """The stance model, loaded once per context."""
        from kueri.stance import load_model

        return context.shared(("stance-model", self.model_name), lambda: load_model(self.model_name))

    def apply(self, run: Run, context: Context) -> Run:
        from kueri.stance import label_run

        how = context.run_context
        return label_run(run, context.topics, context.texts("stance"), depth=self.depth, model=self.model(context),
                         progress=how.progress, workers=how.resolved_workers())

    def explain(self, run: Run, context: Context) -> dict[str, str | None]:
        """The sentence that decided the label :meth:`apply` gives each of the top ``depth`` hits, by passage id
        (None: the passage names neither object), for a reader who asks why (:func:`kueri.stance.explain_run`)."""
        from kueri.stance import explain_run

        return {row["doc"]: row["sentence"] for row in explain_run(run, context.topics, context.texts("stance"),
                                                                     self.depth, self.model(context))}


def build(config: Any) -> Stance | None:
    return Stance(config.stance_depth, config.stance_model) if config.stance_model else None


@dataclass(frozen=True)
class StanceSettings:
    """The stance stage's settings. The stance is on when a configuration names its model (--stance-depth alone names
    the default); the old switch, a depth of 0, still turns it off."""

    stance_depth: int | None = setting(
        None, f"how many of each topic's top hits get a stance: N or {ALL} (every hit)", type=depth_flag, metavar="N",
        param="depth", needs="stance_model",
        deprecated=((0, f"--stance-model {OFF} (no stance)", (("stance_model", None), ("stance_depth", None))),))
    stance_model: str | None = setting(
        None, "label the stance of the top hits with MODEL: " + ", ".join(
            f"{name} ({model.summary})" for name, model in MODELS.items()) + f", or a model file (default {DEFAULT})",
        metavar="MODEL", off="no stance", param="model", on=DEFAULT)


KIND = StageKind("stance", build, options=options_of(StanceSettings), summary="stance labels of the top hits")
