"""The stage abstraction: what a stage is, what a run gives it (its context), and the ordered registry.

A :class:`Stage` turns a run into a run (``apply(run, context)``; the first stage of a configuration
retrieves, so it gets an empty run). A :class:`StageKind` is a stage's registration: how a
configuration asks for it (``build(config)`` returns the stage, or None when the configuration leaves
it off) and its settings (:class:`Option`, each a configuration field and a command-line flag). The
order of :data:`STAGES` is the order a run applies them in; the pipeline, the command line and
``kueri.pyterrier`` are all generated from it.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeVar

from kueri.errors import KueriError
from kueri.lucene import AnalyzerConfig, LuceneIndex
from kueri.parse import TextCorpus
from kueri.records import Run, Topic

T = TypeVar("T")
#: Passage texts by id, in the order asked (from the stored ``contents`` of an index).
Texts = Callable[[Sequence[str]], Sequence[str]]


class Context(Protocol):
    """What the stages of one run share: the corpus and its indexes, the topics, the passage texts, the
    work folder (caches), progress bars, objects loaded once (models, encoders), nested runs (fusion)."""

    corpus: str | Path | TextCorpus  # its files, or passages given with their texts (given candidates)
    topics: list[Topic]
    workdir: Path | None  # None: no work folder (a search of one given index); nothing is cached
    progress: bool
    skip_bad: bool

    def index(self, analyzer: AnalyzerConfig) -> LuceneIndex: ...

    def texts(self, who: str) -> Texts: ...

    def run_named(self, name: str) -> Run: ...

    def shared(self, key: Hashable, make: Callable[[], T]) -> T: ...


class Stage(Protocol):
    """One step of a run: ``name`` (short), ``summary()`` (one line, for ``kueri configs -v`` and logs),
    ``needs_objects`` (reads the topics' two objects), ``adds`` (result columns it adds, e.g. ``stance``),
    ``embeds()`` (the encoders of :mod:`kueri.encoders` whose passage embeddings it reads: a server embeds the
    corpus ahead with them), ``reads_title_scores`` (it reads the scores of the configuration's title search, not
    just any first stage's: given candidates are scored by that search first, :mod:`kueri.stages.given`),
    ``orders_topics`` (its run lists the topics by number, :func:`~kueri.records.topic_key`, not in the order it got
    them: a run made of batches of topics is then sorted so, :mod:`kueri.ray_runs`) and, for a
    first stage, ``title_search()`` (that search: the stage itself, or its lexical half; None: it has none)."""

    name: str
    needs_objects: bool
    adds: tuple[str, ...]
    reads_title_scores: bool
    orders_topics: bool

    def summary(self) -> str: ...

    def embeds(self) -> tuple[str, ...]: ...

    def title_search(self) -> Any: ...

    def apply(self, run: Run, context: Context) -> Run: ...


class StageDefaults:
    """What most stages are (a stage class may inherit it): it reads no topic objects, adds no result column, reads
    no passage embeddings and no title-search scores, keeps the topics in the order it got them, and has no title
    search of its own."""

    needs_objects: bool = False
    adds: tuple[str, ...] = ()
    reads_title_scores: bool = False
    orders_topics: bool = False

    def embeds(self) -> tuple[str, ...]:
        return ()

    def title_search(self) -> Any:
        return None


def stored_encoder(context: Context, name: str) -> Any:
    """The encoder ``name`` of :mod:`kueri.encoders`, loaded once per context: with its passage embeddings in its
    store in the context's work folder (read from it and added to it), or plain without a work folder."""
    from kueri.second_stage import open_encoder

    key = ("encoder", name) if context.workdir is None else ("stored-encoder", name, str(context.workdir))
    return context.shared(key, lambda: open_encoder(name, context.workdir, context.progress))


@dataclass(frozen=True)
class Option:
    """One setting of a stage: the configuration field it sets (or an entry of ``RunConfig.options`` for a
    stage registered outside :mod:`kueri.config`), and its command-line flag. ``off`` is the flag value that
    switches the stage off (the field becomes None)."""

    name: str
    flag: str
    help: str
    type: Callable[[str], Any] | None = None
    metavar: str | None = None
    off: Any = None
    action: str | None = None
    aliases: tuple[str, ...] = ()  # other spellings of the flag

    def add_to(self, group: Any) -> None:
        if self.action:
            group.add_argument(self.flag, *self.aliases, dest=self.name, action=self.action, default=None,
                               help=self.help)
        else:
            group.add_argument(self.flag, *self.aliases, dest=self.name, type=self.type, metavar=self.metavar,
                               help=self.help)

    def value(self, given: Any) -> Any:
        """The configuration value of a flag value (``off`` becomes None)."""
        return None if self.off is not None and given == self.off else given


@dataclass(frozen=True)
class StageKind:
    """A stage's registration: ``build(config)`` is the stage a configuration asks for (None: not this run)."""

    name: str
    build: Callable[[Any], Stage | None]
    options: tuple[Option, ...] = ()
    summary: str = ""


#: Every stage, in the order a run applies them.
STAGES: list[StageKind] = []


def register(kind: StageKind, *, before: str | None = None) -> StageKind:
    """Add ``kind`` to the stage order: last, or just before the stage named ``before``."""
    if any(k.name == kind.name for k in STAGES):
        raise KueriError(f"a stage named {kind.name!r} is already registered")
    names = [k.name for k in STAGES]
    if before is not None and before not in names:
        raise KueriError(f"no stage named {before!r} to register {kind.name!r} before; known: {', '.join(names)}")
    STAGES.insert(names.index(before) if before is not None else len(STAGES), kind)
    return kind


def unregister(name: str) -> None:
    STAGES[:] = [k for k in STAGES if k.name != name]


def compile_stages(config: Any) -> list[Stage]:
    """The stages ``config`` asks for, in run order."""
    return [stage for kind in STAGES if (stage := kind.build(config)) is not None]


def options() -> dict[str, Option]:
    """Every registered stage's settings by name."""
    return {option.name: option for kind in STAGES for option in kind.options}


def add_flags(parser: argparse.ArgumentParser) -> None:
    """The flags of every stage that has settings, in stage order (``kueri run``, ``kueri tira``)."""
    group = parser.add_argument_group("later stages (replace the configuration's)")
    for kind in STAGES:
        for option in kind.options:
            option.add_to(group)
